// Freezing a job's cgroup for a dump, and putting a restored job's processes
// back where their tasks belong: each into its worker's cgroup, each thread
// onto its task's CPUs (CRIU restores neither the cgroup nor the affinity of
// a job that moved). Called on the executor's threads; no shared state.
#pragma once

#include <sys/types.h>

#include <string>

#include "agent/executor/cgroup.h"
#include "lib/core/status.h"
#include "shell/contract.h"

namespace hpcq::agent {

// The directory whose freezer holds the job: v1 freezer.state, v2
// cgroup.freeze; empty if none of its directories has one.
std::string freezer_dir(const JobCgroup& cgroup);

// Freezes (or thaws) the cgroup at `dir` and waits until the kernel says it
// is done (up to 10 s).
Status set_frozen(const std::string& dir, bool frozen);

// Moves every process of the job's cgroups into its task's worker cgroup (a
// split job) and pins every thread to its task's CPUs; `shell` is the job
// shell's host PID.
Status pin_tasks(const JobCgroup& cgroup, pid_t shell, const JobLaunch& launch);

// The same for a restored image job: the processes of each worker's
// container go to their task's CPUs.
Status pin_container_tasks(const JobCgroup& job_cgroup, const JobLaunch& launch);

}  // namespace hpcq::agent
