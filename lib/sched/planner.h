// The availability profile of one scheduling cycle ("planner", as Fluxion's
// resource/planner and Maui's reservation table): how many cores, how much
// memory, how many GPUs and how many units of each generic resource (gres)
// each node has free at every future time, given that running jobs give
// theirs back at their end estimate and reservations hold theirs over a
// window. Backfill asks it "from when, and where, does this request fit for
// this long?" and "how much of this node may a job started now take without
// delaying a reservation?".
//
// Model. Per node: the free cores and memory now (from the pool the planner
// was built on) plus a time-sorted list of changes (+ at a release or at a
// reservation's end, - at a reservation's start). GPUs and each gres name
// the node has are counted the same way, each in a list of its own
// ("track") that holds only the changes that move it: a cluster without
// GPUs or gres, or a job holding none, adds nothing to them, and a request
// asking none never reads them. A node has a gres track only for the names
// its pool entry has (none for most nodes). A change at time t counts
// from t on: a job ending at t frees its cores for a job starting at t, and
// what is free at t is what is left after all of t's changes, whatever order
// they came in (a release and a reservation start at the same time make no
// dip; before this planner they did, which the randomised reference test
// found).
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
// ties in preference order). A node holds a task only while it also has the
// request's GPUs (gpus_per_node, or gpus_per_task for each of its tasks) and
// every gres name it asks (the units on each node) free over the whole
// window, as task_capacity() in lib/resource/allocator.h counts them now.
// NUMA layout is not modelled (nor --mem-per-cpu: memory is
// mem_per_node_bytes).
//
// Whole nodes (request.exclusive, --exclusive): a node holds the request's
// tasks over a window only when all of it is free throughout: every core
// but the reserved ones, all memory, every GPU and every gres unit, and no
// oversubscribing job runs there (their shared cores are counted once per
// job, so free counts alone could show a node whole while a second
// sharer still runs: the planner keeps, per node, when its last
// oversubscribing job ends). earliest() then answers with whole nodes
// (each NodeShare is all of its node), so that a reservation holds all of
// it and limits() keeps every job off the node over the promise.
//
// Advance reservations ("blocks", add_block()): the whole of some nodes over
// [start, end) for the jobs a reservation does not admit. They are kept
// apart from the counted changes because whom they stop depends on the job:
// limits() and earliest() take the ids of the blocks that admit the job and
// treat every other block's nodes as having nothing free over its window.
// A block's end is a candidate start time for the jobs it stopped.
//
// earliest() is one sweep over time (as Mu'alem & Feitelson's conservative
// backfilling walks its profile), not a fresh scan of every node at every
// candidate time: the aggregate bound gives the first time worth trying; the
// capacity of every candidate node over [t, t + duration) is computed there
// once, and as t moves on only the nodes with a change (or a block edge)
// entering the window's end or passing its start are recomputed, keeping the
// running totals the request needs (tasks over all nodes for nodes = 0;
// nodes with room for the gang's base and base + 1 tasks for nodes = N). The
// first time whose totals suffice is the answer, and its nodes are picked
// from the capacities already at hand.
//
// Complexity (N nodes, E changes in all, e changes on one node, T distinct
// change times, B block edges that apply to the job):
//   build: O(N + the gres names of all nodes); add_release / start /
//     reserve: O(e) per node touched, plus O(log G) per gres name held
//     (sorted insert); the time-sorted change list takes new changes in one
//     merge, O(E + k log k) for k new ones, on the next query.
//   limits(): O(sum of e over nodes that carry a reservation or a block,
//     plus their GPU and gres changes).
//   A node's window minimum: O(log e) when the window reaches past the
//     node's last change (suffix minima kept per change), else O(log e +
//     changes in the window); the same again, on its own track, for GPUs
//     when the request asks for GPUs and for each gres name it asks (plus
//     O(log G) to find the name among the node's G names). A request
//     without GPUs or gres costs what it did before they were modelled.
//   earliest(): O(E) at worst for the aggregate bound (streamed up to the
//     first time that passes it), O(B log B) for the block edges, O(N log e)
//     for the capacities at that time, then one window minimum per node
//     change passed by the sweep (each change is passed at most twice) until
//     the answer, plus O(N log N) for a nodes = 0 request that no single
//     node can hold. So a cycle of conservative backfilling over Q queued
//     jobs costs O(Q * (N + E)) at worst, and E grows with the reservations
//     made: about linear in Q for a queue short against the node count,
//     tending to quadratic when the reservations dominate the changes.
//
// Ownership: plain value, built per cycle; keeps no reference to the pool.
// Not thread-safe (one cycle, one thread). No errors: malformed requests and
// allocations naming nodes it does not know are ignored (nothing fits them).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
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

// When a running job estimated to end at `end` is counted to give its cores
// back: at `end`, or at now + `grace` once that has passed (see above).
constexpr TimeUs expected_end(TimeUs end, TimeUs now, TimeUs grace = kOverdueGrace) {
  return end <= now ? add_time(now, grace) : end;
}

// Part of one node: cores, memory, GPUs and gres units held or free.
struct NodeShare {
  Rank rank = 0;
  int cores = 0;
  std::uint64_t memory_bytes = 0;
  int gpus = 0;
  // Units by gres name. Held (reserve(), earliest()): the units of each
  // name held; free (limits(), min_free()): every name the node has.
  std::map<std::string, int> gres = {};
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

  // The allocation, in use now, is given back at `end` (at now + `grace`
  // when end <= now; never when end is kForever). A grace of 0 is for
  // resources that are certain to be given back now (a gap job's cores:
  // it is made to leave).
  void add_release(const resource::Allocation& allocation, TimeUs end,
                   TimeUs grace = kOverdueGrace);
  // A job started now on `allocation`: taken now, given back at `end`.
  void start(const resource::Allocation& allocation, TimeUs end);
  // Holds the shares over [start, end); start >= now. The caller checks that
  // they fit (earliest() found them).
  void reserve(std::span<const NodeShare> shares, TimeUs start, TimeUs end);

  // Keeps the whole of `ranks` over [start, end) for an advance
  // reservation; returns its id (0, 1, ... in call order). Ranks the
  // planner does not know are ignored; an empty window blocks nothing.
  std::size_t add_block(std::span<const Rank> ranks, TimeUs start, TimeUs end);

  // Nodes where a job running from now until `end` may take less than what
  // is free now, because a reservation needs part of it before `end` or a
  // block (other than those in `admitted`, sorted ids) overlaps [now, end):
  // the least that stays free over [now, end) of each of cores, memory,
  // GPUs and every gres name of the node (nothing on a blocked node), in
  // rank order. Empty when neither applies.
  std::vector<NodeShare> limits(TimeUs end, std::span<const std::size_t> admitted = {}) const;

  // The least free cores, memory, GPUs and units of each gres name of
  // `rank` over [start, end) (each on its own: the least of one may come at
  // another time than the least of another), blocks aside; nullopt for a
  // rank the planner does not know.
  std::optional<NodeShare> min_free(Rank rank, TimeUs start, TimeUs end) const;

  // The earliest time t >= now at which `request` fits on `candidates` (in
  // preference order; nodes of the pool the planner was built on) during
  // [t, t + duration), and on which nodes. nullopt when it never does (a
  // malformed request, too few candidates, or resources held forever).
  // Blocks stop it except those in `admitted` (sorted ids).
  std::optional<Slot> earliest(const resource::ResourceRequest& request, TimeUs duration,
                               std::span<const resource::NodeState* const> candidates,
                               std::span<const std::size_t> admitted = {}) const;

 private:
  struct Change {
    TimeUs time;
    int cores;
    std::int64_t memory;
    // Sums of the changes up to this one, and their least from this one to
    // the last (kept on insert), so that a window reaching past a node's
    // last change needs no scan: the free amount after change k is the free
    // amount now plus its sum.
    std::int64_t cores_sum = 0;
    std::int64_t memory_sum = 0;
    std::int64_t cores_least = 0;
    std::int64_t memory_least = 0;
  };
  // One change of a track: GPUs, or the units of one gres name, by the
  // same rules as Change (sum and suffix least of the amounts).
  struct Step {
    TimeUs time;
    int amount;
    std::int64_t sum = 0;
    std::int64_t least = 0;
  };
  // One counted resource of a node other than cores and memory over time:
  // free now, and its steps (sorted up to `settled`, as Node::changes). A
  // step always comes with a Change of the node at the same time, so the
  // node's changes and events_ are where the sweep learns of it.
  struct Track {
    int free = 0;
    mutable std::vector<Step> steps;
    mutable std::size_t settled = 0;
  };
  struct Gres {
    std::string name;
    int total = 0;  // units the node has
    Track track;
  };
  struct Block {
    TimeUs start;
    TimeUs end;
    std::size_t id;
  };
  struct Node {
    Rank rank = 0;
    bool schedulable = true;
    int free_cores = 0;  // now
    std::uint64_t free_memory = 0;
    // By time (equal times in insertion order) up to `settled`; those after
    // it were added since the last query, unsorted, and have no sums yet
    // (mutable: a const query folds them in first, see settle()).
    mutable std::vector<Change> changes;
    mutable std::size_t settled = 0;
    Track gpus;
    std::vector<Gres> gres;  // by name, the names the node has; empty for most
    // All of the node (for whole-node requests): its cores less the
    // reserved ones, its memory and its GPUs.
    int whole_cores = 0;
    std::uint64_t whole_memory = 0;
    int whole_gpus = 0;
    // When its last oversubscribing job gives its cores back (0: none runs).
    TimeUs shared_until = 0;
    std::vector<Block> blocks;
    bool reserved = false;  // carries a reservation
  };
  // A change of a schedulable node, in the time-sorted list the sweep and
  // the aggregate bound walk.
  struct Event {
    TimeUs time;
    std::uint32_t node;  // index into nodes_
    int cores;
  };
  // One earliest() query's view of the nodes.
  struct Query;

  Node* find(Rank rank);
  const Node* find(Rank rank) const;
  // `sign` times these amounts come to the node from `time` on (the gres
  // map by reference: a share's or an allocation part's, not copied).
  void add_change(Node& node, TimeUs time, int sign, int cores, std::uint64_t memory, int gpus,
                  const std::map<std::string, int>& gres);
  // The node's track for a gres name; nullptr for a name it does not have.
  static const Track* find_gres(const Node& node, const std::string& name);
  static Track* find_gres(Node& node, const std::string& name);
  // The least free cores and memory of a node over a window: what the sweep
  // computes per node, kept apart from NodeShare (whose gres map it does
  // not need).
  struct Least {
    int cores;
    std::uint64_t memory;
  };
  // The least free cores and memory of `node` over [start, end).
  static Least window_min(const Node& node, TimeUs start, TimeUs end);
  // window_min() with the least free GPUs and gres units too.
  static NodeShare least_free(const Node& node, TimeUs start, TimeUs end);
  // Whether `least` is below what the node has free now in any dimension.
  static bool below_now(const Node& node, const NodeShare& least);
  // The least free amount of a track over [start, end).
  static int track_min(const Track& track, TimeUs start, TimeUs end);
  // Whether a block not in `admitted` holds `node` somewhere in [start, end).
  static bool blocked(const Node& node, TimeUs start, TimeUs end,
                      std::span<const std::size_t> admitted);
  // Whether all of `node` is free throughout [start, end) (blocks aside).
  static bool whole_free(const Node& node, TimeUs start, TimeUs end);
  // Tasks of `request` that `node` holds throughout [start, end).
  int capacity(const Node& node, const resource::ResourceRequest& request, TimeUs start, TimeUs end,
               std::span<const std::size_t> admitted) const;
  // The nodes and tasks for `request` given each candidate's capacity
  // (caps[pos] for order[pos]), or empty when they do not suffice.
  std::vector<NodeShare> pick(const resource::ResourceRequest& request,
                              const std::vector<std::size_t>& order,
                              const std::vector<int>& caps) const;
  // Merges the changes added since the last query into events_ and into
  // each node's sorted changes.
  void settle() const;
  // Sorts the node's new changes into its list and brings its sums and
  // suffix minima up to date: O(k log k + e) for k new ones.
  static void settle_node(const Node& node);
  // The same for one track.
  static void settle_track(const Track& track);

  TimeUs now_;
  std::vector<Node> nodes_;  // in rank order, as the pool's
  // rank -> index into nodes_ (-1: none) when ranks are dense enough; else
  // empty and find() searches.
  std::vector<std::int32_t> index_;
  std::int64_t free_now_ = 0;
  std::size_t blocks_ = 0;

  // Changes of schedulable nodes by time (equal times in insertion order),
  // and those added since the last query, unsorted: building the profile of
  // thousands of running jobs costs one sort, and a reservation one merge,
  // not a sorted insert each (mutable for that reason only).
  mutable std::vector<Event> events_;
  mutable std::vector<Event> fresh_;
  mutable std::vector<std::size_t> unsettled_;  // indexes of nodes with unsettled changes
  std::vector<std::size_t> reserved_;           // indexes of nodes with reserved == true
  std::vector<std::size_t> block_nodes_;        // indexes of nodes with blocks
};

}  // namespace hpcq::sched
