// The availability profile of one scheduling cycle ("planner", as Fluxion's
// resource/planner and Maui's reservation table): how many cores and how much
// memory each node has free at every future time, given that running jobs
// give theirs back at their end estimate and reservations hold theirs over a
// window. Backfill asks it "from when, and where, does this request fit for
// this long?" and "how much of this node may a job started now take without
// delaying a reservation?".
//
// Model. Per node: the free cores and memory now (from the pool the planner
// was built on) plus a time-sorted list of changes (+ at a release or at a
// reservation's end, - at a reservation's start). A change at time t counts
// from t on: a job ending at t frees its cores for a job starting at t.
// Amounts are counts, not core ids: where exactly a reserved job's cores lie
// on a node is the allocator's business when it starts, and the profile is
// rebuilt on every cycle anyway. Beside the per-node lists, an aggregate
// profile (total free cores of schedulable nodes over time) gives a cheap
// upper bound that rules out most candidate start times before any node is
// looked at.
//
// End estimates at or before now: a running job past its estimate still
// holds its cores, and nothing tells when it will give them back. The planner
// counts it as ending at now + 1 s (kOverdueGrace), the earliest end that is
// still in the future: a reservation built on it is the most optimistic one,
// and since every cycle rebuilds the profile the shadow time simply moves on
// while the job keeps running (what Maui and Slurm's backfill do too; EASY's
// guarantee assumes estimates are upper bounds). Counting the job as never
// ending would instead stop every reservation on its nodes and let backfill
// starve the blocked job.
//
// Placement in the future (earliest()) follows the allocator's rules on
// counts: nodes = N spreads the tasks evenly, the earliest nodes that fit
// getting the extra tasks; nodes = 0 takes as few nodes as the tasks fit on
// (the first node that holds them all, else the nodes with the most room,
// ties in preference order). NUMA layout is not modelled.
//
// Complexity (N nodes, E changes in all, e changes on one node, T distinct
// change times, T <= E):
//   build: O(N); add_release / start / reserve: O(e) per node touched
//     (sorted insert), the aggregate sorted once, O(E log E), on the next
//     query.
//   limits(): O(sum of e over nodes that carry a reservation).
//   earliest(): O(T) for the aggregate bound; for a gang (nodes = N) one
//     O(N + E) pass for the time its N-th node first has room, which skips
//     the start times at which the cores exist but too few nodes have them;
//     then O(N + E) node work for each candidate start the bounds let through
//     (typically one or two; worst case T of them), plus O(N log N) for a
//     nodes = 0 request that no single node can hold.
//
// Ownership: plain value, built per cycle; keeps no reference to the pool.
// Not thread-safe (one cycle, one thread). No errors: malformed requests and
// allocations naming nodes it does not know are ignored (nothing fits them).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "lib/core/ids.h"
#include "lib/resource/allocation.h"
#include "lib/resource/node_pool.h"

namespace hpcq::sched {

// "Never": the end of a job without a time limit.
constexpr TimeUs kForever = std::numeric_limits<TimeUs>::max();
// How long a job past its end estimate is still counted to run (see above).
constexpr TimeUs kOverdueGrace = kUsPerSecond;

// a + b, saturating at kForever (durations are never negative here).
constexpr TimeUs add_time(TimeUs a, TimeUs b) { return a > kForever - b ? kForever : a + b; }

// Part of one node: cores and memory held or free.
struct NodeShare {
  Rank rank = 0;
  int cores = 0;
  std::uint64_t memory_bytes = 0;
  bool operator==(const NodeShare&) const = default;
};

// Where and from when a request fits.
struct Slot {
  TimeUs start = 0;
  std::vector<NodeShare> nodes;  // in preference order
};

class Planner {
 public:
  // Free resources now are the pool's; nothing is released yet (call
  // add_release() for every running job).
  Planner(const resource::NodePool& pool, TimeUs now);

  TimeUs now() const { return now_; }
  // Free cores now over the schedulable nodes: an upper bound for any job
  // that is to start now.
  std::int64_t free_cores_now() const { return free_now_; }

  // The allocation, in use now, is given back at `end` (at now +
  // kOverdueGrace when end <= now; never when end is kForever).
  void add_release(const resource::Allocation& allocation, TimeUs end);
  // A job started now on `allocation`: taken now, given back at `end`.
  void start(const resource::Allocation& allocation, TimeUs end);
  // Holds the shares over [start, end); start >= now. The caller checks that
  // they fit (earliest() found them).
  void reserve(std::span<const NodeShare> shares, TimeUs start, TimeUs end);

  // Nodes where a job running from now until `end` may take less than what
  // is free now, because a reservation needs part of it before `end`: the
  // least that stays free over [now, end) (cores and memory), in rank order.
  // Empty when no reservation starts before `end`.
  std::vector<NodeShare> limits(TimeUs end) const;

  // The least free cores and memory on `rank` over [start, end); nullopt for
  // a rank the planner does not know.
  std::optional<NodeShare> min_free(Rank rank, TimeUs start, TimeUs end) const;

  // The earliest time t >= now at which `request` fits on `candidates` (in
  // preference order; nodes of the pool the planner was built on) during
  // [t, t + duration), and on which nodes. nullopt when it never does (a
  // malformed request, too few candidates, or resources held forever).
  std::optional<Slot> earliest(const resource::ResourceRequest& request, TimeUs duration,
                               std::span<const resource::NodeState* const> candidates) const;

 private:
  struct Change {
    TimeUs time;
    int cores;
    std::int64_t memory;
  };
  struct Node {
    Rank rank = 0;
    bool schedulable = true;
    int free_cores = 0;  // now
    std::uint64_t free_memory = 0;
    std::vector<Change> changes;  // by time; equal times in insertion order
    bool reserved = false;        // carries a reservation
  };

  Node* find(Rank rank);
  const Node* find(Rank rank) const;
  void add_change(Node& node, TimeUs time, int cores, std::int64_t memory);
  // The least free cores and memory of `node` over [start, end).
  NodeShare window_min(const Node& node, TimeUs start, TimeUs end) const;
  // Tasks of `request` that `node` holds throughout [start, end).
  int capacity(const Node& node, const resource::ResourceRequest& request, TimeUs start,
               TimeUs end) const;
  // The nodes and tasks for `request` at [start, end) over `order` (indexes
  // into nodes_), or empty when it does not fit.
  std::vector<NodeShare> pick(const resource::ResourceRequest& request, TimeUs start, TimeUs end,
                              const std::vector<std::size_t>& order) const;

  TimeUs now_;
  std::vector<Node> nodes_;  // in rank order, as the pool's
  std::int64_t free_now_ = 0;
  // Sorts and merges aggregate_ when changes came in since the last query.
  void settle() const;

  // Total free-core changes of schedulable nodes: once settled, one entry
  // per distinct time, sorted; the candidate start times and the aggregate
  // bound. Appended unsorted and settled on the next query, so building the
  // profile of thousands of running jobs costs one sort, not a sorted insert
  // each (mutable for that reason only).
  mutable std::vector<std::pair<TimeUs, std::int64_t>> aggregate_;
  mutable bool settled_ = true;
  std::vector<std::size_t> reserved_;  // indexes of nodes with reserved == true
};

}  // namespace hpcq::sched
