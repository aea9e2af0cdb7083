// What one scheduling cycle sees: the time, the free resources, the running
// jobs and the queue.
//
// The daemon (or the simulator) builds a Snapshot for every cycle, hands it
// to Scheduler::cycle() and applies the Decisions it gets back. Building it
// must stay cheap for thousands of queued jobs: the pool is borrowed, not
// copied, and a PendingJob carries only what policies read.
//
// Ownership: `pool` is borrowed and must outlive the cycle() call and not
// change during it. Everything else is owned by value. Not thread-safe (a
// plain value used by one thread at a time).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/site_policy.h"
#include "lib/resource/allocation.h"
#include "lib/resource/granularity.h"
#include "lib/resource/node_pool.h"

namespace hpcq::sched {

class UsageLedger;  // lib/sched/usage.h: decayed past usage for fair-share

struct PendingJob {
  JobId id = 0;
  std::uint32_t uid = 0;
  TimeUs submit_time = 0;
  resource::ResourceRequest request;
  std::int64_t time_limit_s = 0;
  std::string queue;    // empty: the default queue
  std::string account;  // fair-share account; empty: the user's association, else "root"
  std::string qos;      // empty: none
  // Set by users (--priority, as for elastic jobs) or admins (Slurm's
  // --nice inverted); policies that order by priority add it last.
  std::int32_t priority = 0;
  // A node range (hpcq issue 7): with max_nodes > request.nodes >= 1 and
  // request.ntasks a multiple of request.nodes, the job may run on any node
  // count from request.nodes (its minimum) to max_nodes, each node running
  // request.ntasks / request.nodes tasks (request_at()). Anything else is no
  // range: the job is rigid, as requested. Only the "elastic" action uses
  // ranges; the others start the job at its minimum. Without `elastic` a
  // range is moldable: the size is picked at start and then fixed; with it
  // the running job may also be shrunk and expanded within the range.
  int max_nodes = 0;
  bool elastic = false;
  // An MPI job's application profile (papers/000): the "granularity"
  // plugin shapes only jobs that name one. workers: the user's worker
  // (container) count, 0 for none given.
  std::optional<resource::Profile> profile;
  int workers = 0;
  // The only nodes the job may run on (hpcq migrate --to), ascending;
  // empty: any node.
  std::vector<Rank> nodelist;
  // -L: the cluster-wide licenses it holds while it runs, by name.
  std::map<std::string, int> licenses;
};

struct RunningJob {
  JobId id = 0;
  resource::Allocation allocation;
  TimeUs end_estimate = 0;  // start + time limit: when backfill may count on its cores
  // Who and what it is, for fair-share, limits and preemption.
  std::uint32_t uid = 0;
  TimeUs submit_time = 0;
  TimeUs start_time = 0;
  resource::ResourceRequest request;
  std::int64_t time_limit_s = 0;
  std::string queue;
  std::string account;
  std::string qos;
  std::int32_t priority = 0;
  // The node range and flag it was submitted with (PendingJob); its current
  // size is allocation.nodes.size() (nodes()).
  int max_nodes = 0;
  bool elastic = false;
  // Its start or its last shrink/expand, whichever is later: the "elastic"
  // action resizes no job more often than its rescale gap.
  TimeUs last_resize = 0;
  // As submitted (PendingJob); its workers are in allocation.nodes[].workers.
  std::optional<resource::Profile> profile;
  int workers = 0;
  std::map<std::string, int> licenses;  // as submitted (PendingJob)
  // Already on its way out (preempted or migrating, being saved): its cores
  // are not free yet, but no action decides anything more about it.
  bool leaving = false;
  // Leaving to be restored on these nodes (a move to a hole, Migrate): the
  // cores it will take there are not open to other gap jobs meanwhile.
  std::vector<Rank> moving_to;

  int nodes() const { return static_cast<int>(allocation.nodes.size()); }
};

// Whether the request with this max_nodes is a node range (see PendingJob).
bool has_node_range(const resource::ResourceRequest& request, int max_nodes);
inline bool has_node_range(const PendingJob& job) {
  return has_node_range(job.request, job.max_nodes);
}
inline bool has_node_range(const RunningJob& job) {
  return has_node_range(job.request, job.max_nodes);
}
// A range job's request at `nodes` nodes: request.ntasks / request.nodes
// tasks on each. Only for a request that has_node_range().
resource::ResourceRequest request_at(const resource::ResourceRequest& request, int nodes);

// The running job that `job` becomes when it starts at `start` on
// `allocation`, expected to end at `end_estimate`.
RunningJob running_from(const PendingJob& job, resource::Allocation allocation, TimeUs start,
                        TimeUs end_estimate);

// An advance reservation (`hpcq reserve`, Slurm's scontrol create
// reservation): the whole of `nodes` is kept for [start, end) for the listed
// users and accounts. Every action honours it: a job not admitted to it may
// use those nodes only if it ends (now + time limit) by `start`, or after
// `end`; an admitted job is not restricted by it.
struct AdvanceReservation {
  std::string name;
  std::vector<Rank> nodes;
  TimeUs start = 0;
  TimeUs end = 0;
  std::vector<std::uint32_t> uids;
  std::vector<std::string> accounts;

  bool admits(const PendingJob& job) const;
};

struct Snapshot {
  TimeUs now = 0;
  // Free/used state of every node; nullptr schedules nothing.
  const resource::NodePool* pool = nullptr;
  std::vector<RunningJob> running;
  // Any order; cheapest when already in (submit_time, id) order, as the
  // daemon keeps its pending set.
  std::vector<PendingJob> queue;
  // Queues, QOS and accounts; nullptr: one queue, no limits, no accounts.
  const SitePolicy* site = nullptr;
  // Past usage for fair-share; nullptr: nobody has used anything.
  const UsageLedger* usage = nullptr;
  std::vector<AdvanceReservation> reservations;
};

}  // namespace hpcq::sched
