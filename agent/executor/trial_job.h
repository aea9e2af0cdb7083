// The process a CRIU trial dump dumps (criu_trial_dump, checkpoint.h): a
// `sleep 600` made as a job is made, so that the trial meets what a job's
// dump meets. PID 1 of a PID namespace of its own, in the job's mount
// namespace (enter_job_mount_namespace, job_namespaces.h, as exec_shell
// enters it), stdio on /dev/null opened there, a session leader, running as
// the job's user; in a cgroup made as a job's is (CgroupHierarchy::create_job
// under the instance "criu-trial-<pid of this process>"), which CRIU freezes
// as it does a job's.
//
// Ownership: the TrialJob owns the sleep and its cgroup; its destructor kills
// the one and removes the other.
// Threads: any thread; the caller must not reap children it did not start.
// Errors: kInternal, "setting up the trial dump: ...", when the process or
// its cgroup cannot be made (not an answer about CRIU).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "agent/executor/cgroup.h"
#include "lib/core/status.h"

namespace hpcq::agent {

// The error of a trial that could not be set up: "setting up the trial
// dump: `why`" (kInternal).
Status trial_setup_failed(const std::string& why);

class TrialJob {
 public:
  // Makes the cgroup, starts the sleep as `uid` (its own group, no
  // supplementary ones) and puts it in the cgroup; returns once it runs.
  static Result<std::unique_ptr<TrialJob>> start(const CgroupHierarchy& cgroups, uid_t uid);
  ~TrialJob();
  TrialJob(const TrialJob&) = delete;
  TrialJob& operator=(const TrialJob&) = delete;

  pid_t pid() const { return pid_; }  // host PID of the sleep
  // Its cgroup's freezer directory (freezer_dir); empty: none (CRIU then
  // stops the sleep with ptrace).
  const std::string& freezer() const { return freezer_; }

 private:
  explicit TrialJob(const CgroupHierarchy& cgroups);
  Status start_sleep(uid_t uid);

  CgroupHierarchy cgroups_;
  std::string instance_;
  JobCgroup cgroup_;
  std::string freezer_;
  pid_t pid_ = -1;
};

}  // namespace hpcq::agent
