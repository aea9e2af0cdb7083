// hpcq-rsh NODE COMMAND...: what an MPI launcher calls instead of ssh inside
// a job (Open MPI's plm_rsh_agent, MPICH hydra's -launcher-exec). It starts
// COMMAND, read by /bin/sh as ssh would, as a step of the caller's own job
// (HPCQ_JOB_ID) on NODE: inside the job's cgroups, on all of the job's cores
// there, ended with the job; hpcqd refuses a job that is not the caller's
// and a node that is not the job's. Its output and exit status come back as
// hpcq run's do. ssh's options before NODE are accepted and ignored.
#pragma once

#include <string>
#include <vector>

namespace hpcq::cli {

int run_rsh(const std::vector<std::string>& args);

}  // namespace hpcq::cli
