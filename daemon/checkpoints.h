// Checkpoints of running jobs (CRIU on each node): asked by hpcq checkpoint
// and migrate, by --checkpoint-interval, and by the scheduler's preemption
// by checkpoint and moves. A checkpoint is sent to every node of the job,
// finished once each has answered or its deadline passed, recorded, and
// then leaves the job running, or requeues it (to be restored where it next
// starts), or holds it. Owns JobEntry::checkpointing and the checkpoint
// records' life (pruning periodic ones).
#pragma once

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "daemon/context.h"
#include "daemon/job_actions.h"
#include "lib/job/records.h"

namespace hpcq::daemon {

using CheckpointPromise = std::shared_ptr<std::promise<Result<job::CheckpointRecord>>>;

class Checkpoints {
 public:
  Checkpoints(Context& ctx, JobActions& actions) : ctx_(ctx), actions_(actions) {}
  Checkpoints(const Checkpoints&) = delete;
  Checkpoints& operator=(const Checkpoints&) = delete;

  // hpcq checkpoint / migrate. to: the node names the restore may use
  // (requeue/stop only; empty: any); elsewhere: `to` becomes other nodes
  // that can take it now (a migration without --to).
  void request(JobEntry& entry, job::CheckpointThen then, std::vector<std::string> to,
               bool elsewhere, CheckpointPromise promise);
  // Whether the job can be checkpointed now.
  Status checkpointable(const JobEntry& entry, job::CheckpointThen then) const;
  // Sends the Checkpoint to every node of the job; `promise` (null for a
  // periodic or preemption checkpoint) gets the record once every node has
  // answered.
  Status begin_checkpoint(JobEntry& entry, job::CheckpointThen then, CheckpointPromise promise,
                          const std::vector<std::string>& to = {}, bool periodic = false);
  void on_checkpoint_done(Rank rank, const overlay::CheckpointDone& done);
  // A job being dumped to leave its nodes gives its cores back at once
  // (see the definition).
  void hand_over_cores(JobEntry& entry);
  // --checkpoint-interval: a running job whose last checkpoint of this run
  // (or its start) is older than its interval is checkpointed now.
  void checkpoint_due_jobs();
  // Every heartbeat: checkpoints some node has not answered in time.
  void check_deadlines();
  // After a leader restart: a checkpoint that was in flight is waited for
  // again (see the definition).
  static void resume_in_flight(JobEntry& entry, TimeUs now);

 private:
  // Every node has answered (or the deadline passed): record it, then
  // requeue, hold or leave the job as asked.
  void finish_checkpoint(JobEntry& entry, bool timed_out);
  void prune_periodic_checkpoints(JobEntry& entry);
  std::string checkpoint_root() const;
  // Nodes other than the job's own, up and free enough now to take each of
  // its parts (a migration without --to); kFailedPrecondition saying what
  // it needs when there are not enough.
  Result<std::vector<std::string>> other_nodes_for(const JobEntry& entry) const;

  Context& ctx_;
  JobActions& actions_;
};

}  // namespace hpcq::daemon
