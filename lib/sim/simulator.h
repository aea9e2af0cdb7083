// Discrete-event simulation of a cluster on a virtual clock, driving the
// same sched::Scheduler that hpcqd drives on the wall clock.
//
// Events are job arrivals (at the trace's submit time) and job ends (at
// start + actual runtime), in a priority queue ordered by (time, kind, job
// id) with ends before arrivals, so equal times always unfold the same way.
// At each distinct event time every event of that time is applied (an end
// releases the job's cores, an arrival queues the job), then one
// Scheduler::cycle() runs on a Snapshot of: now, the NodePool, the running
// jobs with end_estimate = start + requested time (Estimates::kUser) or
// + actual runtime (Estimates::kExact), and the queue in (submit, id) order.
// Start decisions are applied to the pool at once and the job's end is
// queued at start + its actual runtime (a job ending at the same time, i.e.
// runtime 0, gives another cycle at that time).
//
// What the scheduler sees of a job: ntasks = size, cpus_per_task = 1,
// nodes = 0 (as few nodes as fit), no memory; time_limit_s = the requested
// time (kUser) or the actual runtime (kExact). A job runs exactly its actual
// runtime whatever its request (trace semantics, README block A), unless
// kill_at_limit: then it runs min(runtime, requested time), and that is also
// what kExact tells the scheduler.
//
// The jobs' states (queued, running, ended) are kept in a job::JobTable, the
// one hpcqd drives (lib/job/job_table.h): arrivals are admitted, starts,
// ends and requeues are its transitions, and what a preemption makes of a
// job is its after_run(), as in the daemon. Ended jobs leave the table.
//
// Preempt decisions are applied as they come: the victim's cores are
// released at once (an "end" event at that time) and it is queued again
// with its original submit time (requeue: its work is lost; checkpoint:
// kept, below) or ends there (cancel: its outcome is the run cut short).
// A cycle that preempted is followed by another at the same time, so the
// freed cores are used at once (at most 64 such rounds per time). A
// requeued job's outcome is its last run.
//
// Fair-share usage: the simulation owns one sched::UsageLedger (half-life
// SimOptions.half_life_s) and every snapshot points at it. A job is charged
// its cores x seconds run, to (its user, account ""), when its run ends,
// preempted runs included (the work was done though it is lost), as the
// daemon charges it; decay is linear, so charging at the end gives the same
// usage at any later time as charging every cycle would.
//
// Shrink and Expand decisions (the "elastic" action) are applied as they
// come to jobs on whole nodes (SimJob.min_nodes): the nodes are released or
// taken at once, the work done so far is kept and the end recomputed by the
// model of elastic_model.h (as is the end estimate, scaled from the
// request), and the job's usage so far is charged. A job's outcome records
// its final end and the core-seconds it used over all its sizes.
//
// "Backfilled": a job whose start came while a job before it in (submit,
// id) order was still waiting after that cycle.
//
// Cost: the snapshot is kept between cycles and updated by the events
// (running jobs: O(1) per start/end; queue: appended on arrival, compacted
// once per cycle that started something), so a cycle's overhead here is
// O(started + ended); what the scheduler does with the queue is its own cost
// (see the actions' headers).
//
// Ownership: simulate() copies what it needs; the event callback is called
// synchronously, in event order. Pure: no clock, no I/O, no threads.
// Errors: kInvalidArgument for a bad cluster (fewer than 1 node or core, a
// group whose topology the node pool refuses),
// a duplicate job id, a job larger than the cluster (unless skip_impossible:
// then skipped and counted), a scheduler configuration Scheduler::create()
// rejects; kInternal if the scheduler's decision cannot be applied (a bug:
// a Start for a job not queued or on cores not free, a Preempt of a job not
// running).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "lib/resource/allocation.h"
#include "lib/resource/granularity.h"
#include "lib/resource/topology.h"
#include "lib/sched/scheduler.h"
#include "lib/sched/usage.h"

namespace hpcq::sim {

enum class Estimates { kUser, kExact };

// Identical nodes, `count` of them.
struct NodeGroup {
  int count = 1;
  resource::NodeTopology topology;
  std::vector<std::string> features = {};  // what a job's constraint matches
  std::map<std::string, int> gres = {};    // units per node, what a job's gres takes
};

// nodes x cores_per_node flat nodes (one NUMA domain), or, when `groups` is
// set (`hpcq simulate --cluster FILE`), those groups' nodes in order.
struct Cluster {
  int nodes = 1;
  int cores_per_node = 1;
  std::vector<NodeGroup> groups;
  std::map<std::string, int> licenses = {};  // [licenses] of a --cluster file
  std::int64_t node_count() const;
  std::int64_t total_cores() const;
};

// The node of `cores` cores in one NUMA domain that --cores describes.
resource::NodeTopology flat_node_topology(int cores);

// One job to simulate; times in seconds.
struct SimJob {
  JobId id = 0;
  std::int64_t user = -1;
  std::int64_t submit_s = 0;
  std::int64_t runtime_s = 0;    // actual: the job runs exactly this long (>= 0)
  std::int64_t requested_s = 0;  // the user's estimate (> 0 for kUser)
  int size = 1;                  // cores
  int line = 0;                  // trace line for messages (0: none)
  std::string queue = {};        // PendingJob.queue; empty: the default queue
  // -C/--constraint (lib/job/constraint.h) over the groups' features, -L,
  // and --gres (per node, over the groups' gres): a job set's "constraint",
  // "licenses" and "gres".
  std::string constraint = {};
  std::map<std::string, int> licenses = {};
  std::map<std::string, int> gres = {};
  // A job on whole nodes (hpcq issue 7) when min_nodes >= 1: it runs `size`
  // cores on each of its nodes, from min_nodes to max_nodes of them
  // (max_nodes <= min_nodes: exactly min_nodes, rigid), elastic or moldable
  // (PendingJob.max_nodes, .elastic). runtime_s and requested_s are then its
  // times on min_nodes; on other sizes, and across Shrink/Expand, it runs by
  // the Amdahl model of elastic_model.h with this serial fraction.
  int min_nodes = 0;
  int max_nodes = 0;
  bool elastic = false;
  std::int32_t priority = 0;      // PendingJob.priority
  double serial_fraction = 0.05;  // kDefaultSerialFraction
  // An MPI job of papers/000 (PendingJob.profile, .workers): `size` ranks
  // of one core; mpi_class names its benchmark for the runtime model of
  // granularity_model.h ("" none).
  std::optional<resource::Profile> profile = {};
  int workers = 0;
  std::string mpi_class = {};
};

struct SimOptions {
  Cluster cluster;
  sched::SchedulerConfig scheduler;
  Estimates estimates = Estimates::kUser;
  bool skip_impossible = false;
  // End a job at its requested time when it runs longer, as Batsim does with
  // walltimes; off by default (README block A: a job runs its trace runtime).
  bool kill_at_limit = false;
  // Half-life of past usage for fair-share (priority, fairshare and drf
  // plugins); <= 0: usage never decays.
  std::int64_t half_life_s = sched::UsageLedger::kDefaultHalfLifeS;
  // When set, called instead of the configured scheduler's cycle() (which
  // is still created, so `scheduler` must be valid): the seam for deciding
  // policies that are not lib/sched actions, such as a test's fake
  // preemptor. Called synchronously; the snapshot is valid during the call.
  std::function<sched::Decisions(const sched::Snapshot&)> decide = {};
  // When set, a job that starts runs this many seconds instead of its
  // runtime_s (jobs on whole nodes excepted: elastic_model.h), given where
  // it was placed and the jobs running at that moment (those started
  // earlier in the same cycle included): the seam for runtime models such
  // as granularity_model.h. kill_at_limit still cuts it at its request.
  std::function<std::int64_t(const SimJob& job, const resource::Allocation& allocation,
                             std::span<const sched::RunningJob> running)>
      runtime = {};
  // The site's queues (the gap queue of papers/004: a queue with migratable
  // = true); empty: none. Every snapshot points at it.
  SitePolicy site = {};
  // A job preempted by checkpoint (PreemptMode::kCheckpoint, the "gap"
  // action's evictions and moves) keeps the work it did. Its dump takes
  // checkpoint_s, during which it keeps its cores (a reserved job waits for
  // them; RunningJob::leaving), and its next run takes what is left plus
  // checkpoint_s for the restore: 2 x checkpoint_s is the paper's t, in
  // seconds. A Migrate is such a save whose restore is bound to the nodes
  // of the hole the action found.
  // Gap jobs run in containers at efficiency container_efficiency (the
  // paper's c): their work takes 1/c as long.
  std::int64_t checkpoint_s = 0;
  double container_efficiency = 1.0;
};

// What happened to one job.
struct JobOutcome {
  JobId id = 0;
  std::int64_t user = -1;
  std::int64_t submit_s = 0;
  std::int64_t start_s = 0;
  std::int64_t end_s = 0;
  int size = 0;
  bool backfilled = false;
  std::string queue = {};
  // Cores x seconds it used, resizes counted (0: size x run, as for a job
  // recorded without it).
  double core_seconds = 0;
};

// One line of the event log.
struct SimEvent {
  std::int64_t time_s = 0;
  JobId job = 0;
  bool start = true;                                 // false: end
  const resource::Allocation* allocation = nullptr;  // valid during the callback only
};

// "time job start|end node:cores [node:cores ...]", cores as ranges
// ("15 7 start n0:0-3,8 n1:0-1"); times in seconds.
std::string format_event(const SimEvent& event);

struct SimResult {
  std::vector<JobOutcome> jobs;  // in order of start
  std::size_t skipped = 0;       // impossible jobs skipped
  std::size_t cycles = 0;        // scheduler cycles run
  std::size_t preempted = 0;     // Preempt decisions applied
  std::size_t shrinks = 0;       // Shrink decisions applied
  std::size_t expands = 0;       // Expand decisions applied
  std::size_t checkpointed = 0;  // preemptions by checkpoint (work kept)
  std::size_t migrated = 0;      // of those, moves to a hole that lasts (Migrate)
  // Cores x seconds of runs cut short by a preemption (their outcomes are
  // not in `jobs`): busy time all the same. Of it, what a requeue or cancel
  // lost (a checkpoint keeps it, less its own cost).
  double preempted_core_seconds = 0;
  double lost_core_seconds = 0;
  // Every (user, account)'s usage as charged, for reports (decay it to a
  // time with UsageLedger::restore() and usage()).
  std::vector<sched::UsageEntry> usage;
};

// Runs the jobs to completion. `on_event`, when set, sees every start and
// end in the order they happen.
Result<SimResult> simulate(const std::vector<SimJob>& jobs, const SimOptions& options,
                           const std::function<void(const SimEvent&)>& on_event = {});

}  // namespace hpcq::sim
