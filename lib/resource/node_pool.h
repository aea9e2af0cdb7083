// The leader's free/used state of every core, GPU and of memory on every node.
//
// One NodeState per node, kept in rank order: which cores are in use
// (exclusively, or shared by oversubscribing jobs), which are reserved for
// the system (Slurm's CoreSpecCount, kubelet's reserved CPUs), which GPUs are
// in use, how many units of each generic resource (gres: nvme = 2) are in
// use, free cores per node and per NUMA domain, free memory, and whether
// the node may get new work (schedulable: up and not drained). allocate() and
// release() are all-or-nothing: they check the whole Allocation first and
// change nothing when any part is wrong, so a core is never given twice
// (exclusive) or to more than kMaxSharers oversubscribing jobs, never given
// while reserved, and never freed while not in use.
//
// Core state is kept in 64-bit words (bit c = core c), with per-NUMA core
// masks precomputed once per node, so "free cores in domain d" is a popcount
// over a few words rather than a per-core scan.
//
// Ownership: plain value; copying is cheap (the name, topology and masks are
// immutable and shared between a pool and its copies; a copy duplicates a
// few words per node), which is how the scheduler takes a per-cycle working
// copy. Not thread-safe: in hpcqd only the event-loop thread touches it.
//
// Errors: add_node: kAlreadyExists (rank taken), kInvalidArgument (topology
// ids not 0..n-1, a core naming a NUMA domain that does not exist, a GPU
// naming one). allocate/release: kNotFound (rank not in the pool),
// kInvalidArgument (core or GPU id out of range, listed twice),
// kFailedPrecondition (core or GPU already in use / not in use, core
// reserved, node not schedulable, not enough free memory, more memory
// released than in use, more gres units taken than free or released than in
// use); kInvalidArgument also for a gres name the node does not have.
// reserve_cores: kNotFound, kInvalidArgument (no such core),
// kFailedPrecondition (core in use). set_gres: kNotFound, kInvalidArgument (a
// count < 0), kFailedPrecondition (fewer units than are in use). Messages
// name the node, rank and core (or resource).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "lib/resource/allocation.h"
#include "lib/resource/topology.h"

namespace hpcq::resource {

// How many oversubscribing jobs may share one core (Slurm's
// OverSubscribe=YES default of 4).
inline constexpr int kMaxSharers = 4;

class NodeState {
 public:
  Rank rank() const { return rank_; }
  const std::string& name() const { return static_->name; }
  const NodeTopology& topology() const { return static_->topology; }
  bool schedulable() const { return schedulable_; }

  int total_cores() const { return static_cast<int>(static_->topology.cores.size()); }
  // Cores free for an exclusive job: not in use, not shared, not reserved.
  int free_cores() const { return free_cores_; }
  // 0 for a domain that does not exist.
  int free_cores_in_numa(int numa) const;
  bool core_free(int core) const;
  // Cores an oversubscribing job may use: free ones and those shared by
  // fewer than kMaxSharers jobs.
  int shareable_cores() const;
  int shareable_cores_in_numa(int numa) const;
  int reserved_cores() const { return reserved_count_; }
  bool core_reserved(int core) const;
  // Nothing of the node in use: every core but the reserved ones free (none
  // shared either), every GPU, all of its memory and every gres unit. Only
  // such a node is given to an --exclusive request.
  bool idle() const;
  // Oversubscribing jobs on this core (0 when free or exclusive).
  int sharers(int core) const;
  std::uint64_t free_memory() const { return static_->topology.memory_bytes - used_memory_; }

  int total_gpus() const { return static_cast<int>(static_->topology.gpus.size()); }
  int free_gpus() const { return free_gpus_; }
  int free_gpus_in_numa(int numa) const;
  bool gpu_free(int gpu) const;

  // Generic resources ([[rank]] gres, Slurm's GRES): units by name, counted,
  // never given by id. GPUs are not among them (they are bound, by id).
  const std::map<std::string, int>& gres() const { return static_->gres; }
  // Units of `name` not in use; 0 for a name the node does not have.
  int free_gres(const std::string& name) const;

  // Bit views for the allocator: words of 64 cores (bit c of word c / 64).
  // The mask of the cores of NUMA domain `numa` (empty span when none), and
  // the cores an exclusive (or, with `shared`, an oversubscribing) job may
  // not take. Valid while this NodeState is neither changed nor destroyed.
  std::span<const std::uint64_t> numa_mask(int numa) const;
  std::span<const std::uint64_t> blocked(bool shared) const {
    return shared ? std::span<const std::uint64_t>(closed_)
                  : std::span<const std::uint64_t>(taken_);
  }

 private:
  friend class NodePool;

  // What never changes after add_node; shared between copies.
  struct Static {
    std::string name;
    NodeTopology topology;
    std::size_t words = 0;                  // words per core bitset
    std::vector<std::uint64_t> numa_masks;  // ndomains * words
    std::vector<int> gpus_per_numa;         // total GPUs by domain
    std::map<std::string, int> gres;        // units by name (set_gres)
  };

  Rank rank_ = 0;
  std::shared_ptr<const Static> static_;
  bool schedulable_ = true;
  std::vector<std::uint64_t> exclusive_;  // cores of exclusive jobs
  std::vector<std::uint64_t> reserved_;   // system cores
  std::vector<std::uint64_t> taken_;      // exclusive | reserved | shared by >= 1
  std::vector<std::uint64_t> closed_;     // exclusive | reserved | shared by kMaxSharers
  std::vector<std::uint8_t> sharers_;     // by core; empty until a core is first shared
  std::vector<std::uint64_t> gpu_used_;   // by GPU id
  std::vector<int> gres_used_;            // by position in static_->gres; empty: none
  std::vector<int> numa_free_;            // free (not taken) cores by NUMA domain id
  int free_cores_ = 0;
  int reserved_count_ = 0;
  int free_gpus_ = 0;
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

  // Sets the node's system cores (replacing any earlier set; empty clears
  // it): they are never given to jobs. All-or-nothing; a newly reserved core
  // must be free.
  Status reserve_cores(Rank rank, const std::vector<int>& cores);

  // Sets the node's generic resources (replacing any earlier set; empty
  // clears it). Units in use stay in use: a name keeps its count in use and
  // may not drop below it.
  Status set_gres(Rank rank, const std::map<std::string, int>& gres);

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

  // The same nodes (schedulable flags and reserved cores kept) with nothing
  // in use: what could run if every job ended.
  NodePool idle_copy() const;

  // Pool-wide free cores, for the allocator to turn away in O(1) or
  // O(log N) a request that cannot fit, instead of scanning every node.
  // Free cores over the schedulable nodes. O(1).
  std::int64_t total_free_cores() const { return free_total_; }
  // The index in nodes() of the first schedulable node at or after `from`
  // with at least `cores` free cores; nodes().size() when there is none.
  // O(log N).
  std::size_t next_with_free_cores(std::size_t from, std::int64_t cores) const;

 private:
  NodeState* find_mutable(Rank rank);
  // Checks a whole allocation against the current state; changes nothing.
  Status check(const Allocation& allocation, bool taking) const;
  // Applies an allocation that check() accepted.
  void apply(const Allocation& allocation, bool taking);
  // Brings core c's derived bits (taken, closed) and counters in line with
  // its exclusive, reserved and sharer state.
  static void refresh_core(NodeState& node, int c);
  // The free-core index: a max tree over nodes_ (a leaf holds the node's
  // free cores, 0 when not schedulable; leaves_ of them, a power of two)
  // and free_total_. note_node() after a node's free cores or flag change
  // (O(log N)); rebuild_index() after nodes_ is reshaped (O(N)).
  void note_node(std::size_t index);
  void rebuild_index();
  std::size_t find_free(std::size_t tree_node, std::size_t lo, std::size_t hi, std::size_t from,
                        std::int64_t cores) const;

  std::vector<NodeState> nodes_;  // sorted by rank
  std::vector<int> max_free_;     // 2 * leaves_; [1] is the root
  std::vector<int> leaf_value_;   // by node index: what its leaf counts in free_total_
  std::size_t leaves_ = 0;
  std::int64_t free_total_ = 0;
};

// Slurm's CoreSpecCount: `count` system cores taken from the highest core
// ids, alternating between packages (last package first) so that each
// package loses about the same number. Ascending; all cores when count
// exceeds them, none when count <= 0.
std::vector<int> spec_cores(const NodeTopology& topology, int count);

}  // namespace hpcq::resource
