// Job steps (lib/job/steps.h): hpcq run inside a batch job. This room owns
// the steps of the running jobs: placing each within its job's allocation (or
// keeping it pending until cores are free), launching it on its nodes
// (repeated until each reports STARTED), its parts' ends (JobUpdate.step),
// cancelling and signalling one step, its record in the store ("step",
// "<job>/<step>", written at each change) and the end of its output stream
// (ctx.output). A job's run ending ends its steps.
#pragma once

#include <string>

#include "daemon/context.h"
#include "daemon/job_actions.h"
#include "lib/job/steps.h"
#include "proto/hpcq.pb.h"

namespace hpcq::daemon {

class Steps {
 public:
  Steps(Context& ctx, JobActions& actions) : ctx_(ctx), actions_(actions) {}
  Steps(const Steps&) = delete;
  Steps& operator=(const Steps&) = delete;

  // A new step of `entry` (LaunchStep): started now, or pending until cores
  // are free; kUnavailable with `immediate` instead of pending;
  // kFailedPrecondition for a job that is not a running batch job;
  // kInvalidArgument for a step that can never fit.
  Result<v1::Step> launch(JobEntry& entry, job::StepRecord step, bool immediate);
  // A JobUpdate about a step (update.step() != 0) from `rank`.
  void on_update(Rank rank, const overlay::JobUpdate& update);
  // A task of the running step's MPI world ended it (PMI_Abort, a failure;
  // before its part's end; seen by its shell at `seen_at`): unless a part
  // has decided already, the step fails with that code and reason, and its
  // other parts are killed; an earlier-seen failure replaces one that
  // decided (job::replaces_world_failure).
  void world_failed(JobEntry& entry, job::StepId id, int exit_code, const std::string& reason,
                    TimeUs seen_at);
  // Whether Output from `rank` for this step is current.
  static bool is_running_on(const JobEntry& entry, job::StepId id, Rank rank);
  // The job's step `id` while it runs; kNotFound if there is no such step,
  // kFailedPrecondition if it is not running.
  static Result<const job::StepRecord*> running(const JobEntry& entry, job::StepId id);
  Status cancel(JobEntry& entry, job::StepId id, const std::string& by);
  Status signal(JobEntry& entry, job::StepId id, int signo);
  // The node of the step's task 0 (its input goes there); kNotFound,
  // kFailedPrecondition when it has ended, kUnavailable until it runs there.
  Result<Rank> first_node(const JobEntry& entry, job::StepId id) const;
  // The job's run ended (it finished or was requeued): its steps end too.
  void on_run_end(JobEntry& entry);
  // Repeats the launches that nodes have not confirmed (heartbeat timer);
  // after a leader restart, starts the pending steps that fit once the
  // job's nodes have confirmed it.
  void repeat_unconfirmed();
  // After a leader restart: the cores the job's running steps hold, steps
  // of a job that no longer runs ended, pending ones marked to be tried.
  static void restore(JobEntry& entry);

 private:
  job::StepRecord* find(JobEntry& entry, job::StepId id);
  void start(JobEntry& entry, job::StepRecord& step);
  // The step's Launch (every node of it gets the same), sent to `ranks`.
  overlay::Launch launch_of(const JobEntry& entry, const job::StepRecord& step) const;
  void send_launch(const JobEntry& entry, const job::StepRecord& step,
                   const std::vector<Rank>& ranks);
  void send_kill(const JobEntry& entry, const job::StepRecord& step, Rank rank);
  void end(JobEntry& entry, job::StepRecord& step, job::JobState state, const std::string& reason);
  void start_pending(JobEntry& entry);
  void persist(const JobEntry& entry, const job::StepRecord& step);

  Context& ctx_;
  JobActions& actions_;
};

}  // namespace hpcq::daemon
