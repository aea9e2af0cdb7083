// The one applier of the job table's effects, and the actions every room
// takes on a job: storing and publishing it, launching and killing its
// parts, ending or requeueing it once its run has stopped (releasing its
// part of the pool, closing its placement, charging its usage), restarting
// it from a checkpoint, and asking for a scheduling cycle.
//
// "How a job is requeued" is here: requeue_job() and
// requeue_from_checkpoint(), after the table's after_run() or
// after_node_lost() has decided it (carry_out).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <set>
#include <string>

#include <google/protobuf/message.h>

#include "daemon/context.h"

namespace hpcq::daemon {

class JobActions {
 public:
  explicit JobActions(Context& ctx) : ctx_(ctx) {}
  JobActions(const JobActions&) = delete;
  JobActions& operator=(const JobActions&) = delete;

  // What schedule_soon() runs (the scheduling driver's cycle).
  void set_cycle(std::function<void()> cycle) { cycle_ = std::move(cycle); }
  // Called as a run's resources are released, before the job ends or is
  // requeued (the resizes give up a resize in flight).
  void set_run_end(std::function<void(JobEntry&)> run_end) { run_end_ = std::move(run_end); }

  // Carries out what a change of the job table asks for, in order.
  void apply(const job::Effects& effects);
  // Posted rather than run now, so that a burst of submissions or ends that
  // are already queued on the loop is scheduled in one cycle.
  void schedule_soon();

  // Every part has ended: finished, requeued or cancelled as the table's
  // after_run() says.
  void all_parts_ended(JobEntry& entry, TimeUs end_time);
  // The job's part on `rank` is gone (node down, or not found after a
  // leader restart): the rest is killed and the job restarted from a
  // checkpoint, requeued (--requeue) or failed.
  void lose_part(JobEntry& entry, Rank rank, const std::string& why);
  // Kill of a part that may no longer be the leader's (an attempt it gave
  // up, a job it forgot): the agent ends it if it still runs it.
  void kill_part(Rank rank, JobId id, std::uint32_t attempt);
  // The job's launch sent (again) to `rank`, which has not confirmed it;
  // made first for a job adopted without one.
  void launch_again(JobEntry& entry, Rank rank);
  // What the table decided for a job none of whose parts runs any more.
  void carry_out(JobEntry& entry, const job::AfterRun& after, TimeUs end_time);
  // end_time: when the job ended on its last node (the agent's clock), or 0 for now.
  void finish_job(JobEntry& entry, job::JobState state, const std::string& reason,
                  TimeUs end_time = 0);
  void requeue_job(JobEntry& entry, const std::string& reason);
  // Requeues the job to be restored from restart_checkpoint() where it has
  // one (kept as restore_pending, so a restarted leader does the same), else
  // to run from the start.
  void requeue_from_checkpoint(JobEntry& entry, const std::string& why);
  // The checkpoint a job that lost a node restarts from: the image its run
  // was restored from, or for --checkpoint-interval its newest good one of
  // this run; -1 for none (then it is requeued or fails as before).
  std::optional<std::size_t> restart_checkpoint(const JobEntry& entry) const;

  // The Launch message of a job's current attempt (every node gets the same).
  overlay::Launch make_launch(const job::Job& job) const;
  // Sends a started job's Launch to its nodes, once its start is committed.
  void send_launches(JobId id, int attempt);
  void kill_job_parts(JobEntry& entry);
  void send_kill(JobEntry& entry, Rank rank);
  // Sends `signo` to the job's tasks (and its steps') on `ranks`, or with
  // `step` set to that step's only.
  void send_signal(JobEntry& entry, const std::set<Rank>& ranks, std::uint32_t step, int signo);
  // Standard input for task 0 (on `rank`) of the job or of a step.
  Status send_input(JobEntry& entry, Rank rank, std::uint32_t step, overlay::Input input);
  // The job's current time limit (after hpcq update).
  void send_time_limit(const JobEntry& entry, Rank rank);
  // A node that took another way to the leader (the tree healed) runs the
  // job and reports what arrived of its signals and input: the rest is sent
  // again, and an updated time limit.
  void send_again(JobEntry& entry, Rank rank, const overlay::RunningJob& running);
  // Repeats the Launch or Kill messages that nodes have not confirmed.
  void repeat_unconfirmed();

  void persist(const job::Job& job, const std::string& event, const std::string& detail);
  void publish(const job::Job& job);
  // A job's record "<job>/<number>" of `kind` ("checkpoint", "placement",
  // "resize"), as protobuf JSON (recovery.cc reads them).
  void persist_job_record(JobId id, const char* kind, std::size_t number,
                          const google::protobuf::Message& record);
  // Checkpoint records are kept under "<job>/<n>", n counting from 1 in the
  // order they were taken.
  void persist_checkpoint(const JobEntry& entry, std::size_t index);
  // The checkpoint in flight, under the number its finished record will
  // have, with no outcome yet: a leader restarted before the answers came
  // waits for them again (Checkpoints::resume_in_flight).
  void persist_checkpoint_in_flight(const JobEntry& entry);
  // Resize records: "<job>/<n>", n counting from 1 in the order they ended.
  void persist_resize(const JobEntry& entry, std::size_t index);
  // Placements: opened at a start, closed at the run's end (persisted).
  void open_placement(JobEntry& entry);
  void close_placement(JobEntry& entry, const std::string& outcome);

  // Fair-share usage: the job's cores for the time it held them, from
  // `from` (at least the job's start) to `end`, at its current allocation.
  void charge_usage(const job::Job& job, TimeUs from, TimeUs end);
  // The current allocation charged up to now, before a resize changes it.
  void charge_segment(JobEntry& entry);
  // Usage is advisory (it orders the queue): written every 10 s rather than
  // with every job end, so a crash forgets at most the last 10 s of it.
  void persist_usage();

 private:
  // The run's resources, placement and usage end (before the table ends or
  // requeues the job): `outcome` is the placement's.
  void end_run(JobEntry& entry, const std::string& outcome, TimeUs end_time);
  void release_held(JobEntry& entry);
  void persist_placement(const JobEntry& entry, std::size_t index);
  void send_signal_to(const JobEntry& entry, const JobEntry::SentSignal& sent, Rank rank);

  Context& ctx_;
  std::function<void()> cycle_;
  bool cycle_posted_ = false;
  std::function<void(JobEntry&)> run_end_;
};

// An allocation as the overlay's Launch and Resize carry it.
void fill_node_allocs(const resource::Allocation& allocation,
                      google::protobuf::RepeatedPtrField<overlay::NodeAlloc>* out);

}  // namespace hpcq::daemon
