// What hpcq-agent needs from an executor: start a job's tasks on this node,
// kill them, and say when they ended. Two implementations:
//   ProcessExecutor (process_executor.h): real tasks in cgroups and a PID
//     namespace; the default.
//   TestExecutor (test_executor.h): runs nothing; a job "runs" for the
//     seconds in its HPCQ_TEST_DURATION variable (default 0), as Flux's test
//     execution mode, so that the control plane can be measured alone.
// Thread: the agent's loop thread only.
#pragma once

#include <vector>

#include "agent/executor/job_launch.h"
#include "lib/core/ids.h"
#include "lib/core/status.h"

namespace hpcq::agent {

class Executor {
 public:
  virtual ~Executor() = default;

  // Returns once the job's tasks have started (or failed to; then nothing of
  // the job is left).
  virtual Status launch(const JobLaunch& launch, TimeUs now) = 0;
  // The job is reported kCancelled by reap(); kNotFound if it is not here.
  virtual Status cancel(JobId id) = 0;
  // Ends the jobs past their time limit (reported kTimeout).
  virtual void check_timeouts(TimeUs now) = 0;
  // Non-blocking: the jobs that ended since the last call.
  virtual std::vector<JobExit> reap() = 0;
  // Fds that become readable when reap() may have something; fetch again
  // after each reap().
  virtual std::vector<int> wait_fds() const = 0;
  virtual std::vector<JobId> running() const = 0;
  // Ends every job (not reported by reap()) and cleans up.
  virtual void shutdown() = 0;
};

}  // namespace hpcq::agent
