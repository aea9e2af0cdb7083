// The leader's free/used state of every core and of memory on every node.
//
// One NodeState per node, kept in rank order: which cores are in use, free
// cores per node and per NUMA domain, free memory, and whether the node may
// get new work (schedulable: up and not drained). allocate() and release()
// are all-or-nothing: they check the whole Allocation first and change
// nothing when any part is wrong, so a core is never given twice and never
// freed while not in use.
//
// Ownership: plain value; copying is cheap (topologies are immutable and
// shared between a pool and its copies), which is how the scheduler takes a
// per-cycle working copy. Not thread-safe: in hpcqd only the event-loop
// thread touches it.
//
// Errors: add_node: kAlreadyExists (rank taken), kInvalidArgument (topology
// ids not 0..n-1, a core naming a NUMA domain that does not exist).
// allocate/release: kNotFound (rank not in the pool), kInvalidArgument (core
// id out of range, core listed twice), kFailedPrecondition (core already in
// use / not in use, node not schedulable, not enough free memory, more
// memory released than in use). Messages name the node, rank and core.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "lib/resource/allocation.h"
#include "lib/resource/topology.h"

namespace hpcq::resource {

class NodeState {
 public:
  Rank rank() const { return rank_; }
  const std::string& name() const { return name_; }
  const NodeTopology& topology() const { return *topology_; }
  bool schedulable() const { return schedulable_; }

  int total_cores() const { return static_cast<int>(used_.size()); }
  int free_cores() const { return free_cores_; }
  // 0 for a domain that does not exist.
  int free_cores_in_numa(int numa) const;
  bool core_free(int core) const;
  std::uint64_t free_memory() const { return topology_->memory_bytes - used_memory_; }

 private:
  friend class NodePool;

  Rank rank_ = 0;
  std::string name_;
  std::shared_ptr<const NodeTopology> topology_;
  bool schedulable_ = true;
  std::vector<bool> used_;      // by core id
  std::vector<int> numa_free_;  // by NUMA domain id
  int free_cores_ = 0;
  std::uint64_t used_memory_ = 0;
};

class NodePool {
 public:
  Status add_node(Rank rank, std::string name, NodeTopology topology, bool schedulable = true);
  // Forgets the node and whatever of it was in use. Release the node's jobs
  // first: a later release() naming this rank fails with kNotFound. Returns
  // whether the node was there.
  bool remove_node(Rank rank);
  // Down or drained nodes keep their state but get no new work. Returns
  // whether the node was there.
  bool set_schedulable(Rank rank, bool schedulable);

  Status allocate(const Allocation& allocation);
  Status release(const Allocation& allocation);

  // nullptr when the rank is not in the pool.
  const NodeState* find(Rank rank) const;
  // In ascending rank order.
  const std::vector<NodeState>& nodes() const { return nodes_; }
  // 0 for a rank not in the pool.
  int free_cores(Rank rank) const;
  int free_cores_in_numa(Rank rank, int numa) const;
  std::uint64_t free_memory(Rank rank) const;

  // The same nodes (schedulable flags kept) with nothing in use: what could
  // run if every job ended.
  NodePool idle_copy() const;

 private:
  NodeState* find_mutable(Rank rank);
  // Checks a whole allocation against the current state; changes nothing.
  Status check(const Allocation& allocation, bool taking) const;
  // Applies an allocation that check() accepted.
  void apply(const Allocation& allocation, bool taking);
  // Checks one node's part of an allocation; `taking` selects the direction.
  Status check_part(const NodeState& node, const NodeAllocation& part, bool taking,
                    std::vector<bool>& seen) const;

  std::vector<NodeState> nodes_;  // sorted by rank
};

}  // namespace hpcq::resource
