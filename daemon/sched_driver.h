// The scheduling driver: a cycle builds the scheduler's snapshot (the
// queue's first queue_depth jobs, or the best by priority; the running
// jobs; reservations) from the job table and the pool, runs lib/sched, and
// carries out its decisions: starts (launched once committed), preemptions,
// moves, shrinks and expansions. Owns the scheduler and its options.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "daemon/checkpoints.h"
#include "daemon/context.h"
#include "daemon/job_actions.h"
#include "daemon/resizes.h"
#include "lib/sched/plugins/priority.h"
#include "lib/sched/scheduler.h"

namespace hpcq::daemon {

class SchedDriver {
 public:
  SchedDriver(Context& ctx, JobActions& actions, Checkpoints& checkpoints, Resizes& resizes)
      : ctx_(ctx), actions_(actions), checkpoints_(checkpoints), resizes_(resizes) {}
  SchedDriver(const SchedDriver&) = delete;
  SchedDriver& operator=(const SchedDriver&) = delete;

  // The scheduler of the configuration's actions, plugins and options.
  Status configure();
  // A cycle on an event (a submission, an end): shown the first
  // queue_depth pending jobs. A full cycle, run every
  // full_cycle_interval_s while more are pending: full_queue_depth.
  void run_cycle(bool full = false);
  bool wants_full_cycle() const;
  // Resizes wait out their rescale gap with no event to wake a cycle: the
  // leader asks for one every heartbeat while this says there may be work.
  bool wants_periodic_cycle() const;

 private:
  // The first `depth` pending jobs the scheduler may start, in queue order
  // or the best by priority.
  void fill_queue(sched::Snapshot& snapshot, std::size_t depth);
  void fill_running(sched::Snapshot& snapshot);
  void apply_decisions(sched::Decisions& decisions);
  // Whether a running elastic job is below its maximum and could grow.
  bool may_expand() const;
  // With the multifactor "priority" plugin, the pending jobs a cycle looks
  // at, best first: twice `depth` of the highest priority (as Slurm sorts
  // by priority first). O(pending). Without it a cycle walks the queue in
  // (submit time, id) order and stops after `depth`.
  std::vector<JobId> priority_window(const sched::Snapshot& snapshot, std::size_t depth);
  std::vector<sched::AdvanceReservation> current_reservations();
  // The running job `id` if it is not on its way out already; else null.
  JobEntry* stoppable(JobId id);
  // Dumped to be requeued and restored where it next starts (`to`: its
  // restore nodes; empty: any), its cores handed over at once. A dump that
  // cannot begin kills it: it is requeued from its last good checkpoint or
  // the start (JobTableCore::after_run).
  void leave_by_checkpoint(JobEntry& entry, job::Preemption preemption,
                           const std::vector<std::string>& to);
  void apply_preempt(const sched::Preempt& preempt);
  void apply_migrate(const sched::Migrate& migrate);
  // after_shrink: a Shrink of this cycle only asked for its nodes, so the
  // allocation may not be free yet; the job then waits (no error).
  void start_job(JobEntry& entry, resource::Allocation allocation, bool after_shrink = false);

  Context& ctx_;
  JobActions& actions_;
  Checkpoints& checkpoints_;
  Resizes& resizes_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  // Set when the "priority" plugin is configured: its weights rank the queue.
  std::optional<sched::MultifactorWeights> priority_weights_;
  bool frees_resources_ = false;  // a configured action may preempt or shrink: cycle even when full
  bool elastic_action_ = false;   // the "elastic" action is configured
};

}  // namespace hpcq::daemon
