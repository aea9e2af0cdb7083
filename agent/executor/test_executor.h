// The test executor: runs no process. A job "runs" for the seconds in its
// HPCQ_TEST_DURATION environment variable (a decimal, default 0) or until
// its time limit, whichever is first, then ends COMPLETED (or TIMEOUT,
// CANCELLED). Selected per agent (hpcq-agent --executor test), as Flux's test
// execution mode: it lets benchmarks measure the control plane alone.
// Checkpoint and restore are refused (see below), not emulated.
// Thread: the agent's loop thread only.
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "agent/executor/executor.h"

namespace hpcq::agent {

class TestExecutor final : public Executor {
 public:
  static Result<std::unique_ptr<TestExecutor>> create();
  ~TestExecutor() override;

  Status launch(const JobLaunch& launch, TimeUs now) override;
  Status cancel(JobId id) override;
  void check_timeouts(TimeUs now) override;
  std::vector<JobExit> reap() override;
  // Its jobs start as they are launched.
  std::vector<LaunchStarted> take_started() override { return std::exchange(started_, {}); }
  std::vector<TaskOutput> take_output() override { return {}; }  // no tasks, no output
  Status grant_output(JobId, std::uint32_t, int, bool, std::uint64_t) override {
    return Status::ok();  // no tasks, nothing to hold back
  }
  std::vector<PmiEvent> take_pmi_events() override { return {}; }
  Status fence_done(JobId id, std::uint32_t, std::uint32_t, const std::string&) override {
    return not_found("job " + std::to_string(id) + " runs no tasks here");
  }
  Status fence_failed(JobId id, std::uint32_t, std::uint32_t, const std::string&) override {
    return fence_done(id, 0, 0, "");
  }
  Status deliver_modex(JobId id, std::uint32_t, const ModexFrame&) override {
    return fence_done(id, 0, 0, "");
  }
  // It runs no steps (launch refuses them).
  Status cancel_step(JobId id, std::uint32_t) override {
    return not_found("job " + std::to_string(id) + " has no steps here");
  }
  Status signal_step(JobId id, std::uint32_t, int) override { return cancel_step(id, 0); }
  Status set_time_limit(JobId id, std::int64_t seconds) override;
  Result<LiveUsage> usage(JobId id,
                          std::uint32_t /*step*/) const override {  // it runs no processes
    if (!jobs_.count(id)) return not_found("job " + std::to_string(id) + " is not running here");
    return LiveUsage{};
  }
  Status write_input(JobId id, std::uint32_t, const TaskInput&) override {
    return failed_precondition("job " + std::to_string(id) + ": the test executor runs no tasks");
  }
  std::vector<int> wait_fds() const override { return {timer_fd_}; }
  std::vector<JobId> running() const override;
  // Nothing runs to be signalled: OK for a job it runs.
  Status signal(JobId id, int signo) override;
  void shutdown() override { jobs_.clear(); }
  // Its jobs live in this process only: they end with it.
  void detach() override { jobs_.clear(); }
  std::vector<RunId> take_adopted() override { return {}; }

  // No processes, nothing to dump: these answer kFailedPrecondition
  // ("the test executor cannot checkpoint: it runs no processes"), so that
  // an agent run with --executor test reports itself not checkpoint-capable.
  Status checkpoint_capability() override;
  Status checkpoint_of_other_users() override { return checkpoint_capability(); }
  Status begin_checkpoint(JobId id, const std::string& image_dir, CheckpointThen then) override;
  std::vector<CheckpointOutcome> finished_checkpoints() override { return {}; }
  Status begin_restore(const JobLaunch&, const std::string&, TimeUs) override {
    return checkpoint_capability();
  }
  std::vector<RestoreOutcome> finished_restores() override { return {}; }

 private:
  struct Job {
    TimeUs end = 0;       // when it completes by itself
    TimeUs deadline = 0;  // time limit; 0: none
    TimeUs launched = 0;
    bool cancelled = false;
  };
  explicit TestExecutor(int timer_fd) : timer_fd_(timer_fd) {}
  void arm();  // the timer fires at the next end (now, if something has ended)

  int timer_fd_;
  std::map<JobId, Job> jobs_;
  std::vector<LaunchStarted> started_;  // launched, not yet taken
};

}  // namespace hpcq::agent
