// hpcq-rsh NODE COMMAND...: what an MPI launcher calls instead of ssh inside
// a job (Open MPI's plm_rsh_agent, MPICH hydra's -launcher-exec). It starts
// COMMAND, read by /bin/sh as ssh would, as a step of the caller's own job
// (HPCQ_JOB_ID) on NODE: inside the job's cgroups, on all of the job's cores
// there, ended with the job; hpcqd refuses a job that is not the caller's
// and a node that is not the job's. Its output and exit status come back as
// hpcq run's do. ssh's options before NODE are accepted and ignored.
//
// One word of COMMAND may be changed: MPICH hydra's (and Intel MPI's)
// proxies connect back to mpiexec at `--control-port HOST:PORT`, HOST being
// mpiexec's host name. Where that name does not resolve here (a minimal
// /etc/hosts), every proxy fails at once and mpiexec, which does not watch
// its launcher's exit, would wait for them until the job's time limit; so
// HOST is replaced by a numeric address of this node (mpiexec listens on
// all of them). A HOST that resolves is left as it is.
#pragma once

#include <string>
#include <vector>

namespace hpcq::cli {

int run_rsh(const std::vector<std::string>& args);

// The change above, on COMMAND's words (`node`: where it is to run, which
// picks the address where its name resolves). Looks names up (getaddrinfo).
void reach_launcher_through_an_address(std::vector<std::string>& words, const std::string& node);

}  // namespace hpcq::cli
