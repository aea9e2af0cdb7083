// The job shell's layers of the job environment (job_env.h). Apart from
// job_env.cc because the job shells compile this file in and link no library:
// it needs nothing but the header.
#include "lib/job/job_env.h"

namespace hpcq::job {

bool is_slurm_environment(const Environment& env) { return env.count("SLURM_JOB_ID") > 0; }

void add_shell_environment(Environment& env, const std::string& hostfile,
                           const std::string& hostfile_mpich) {
  env.emplace("HPCQ_HOSTFILE", hostfile);
  env.emplace("HPCQ_HOSTFILE_MPICH", hostfile_mpich);
}

void add_task_environment(Environment& env, int rank, int local_task,
                          const std::string& logical_cpus) {
  env["HPCQ_TASK_RANK"] = std::to_string(rank);
  env["HPCQ_LOCAL_TASK"] = std::to_string(local_task);
  env["HPCQ_CPUS"] = logical_cpus;
  if (is_slurm_environment(env)) {
    env["SLURM_PROCID"] = std::to_string(rank);
    env["SLURM_LOCALID"] = std::to_string(local_task);
  }
}

}  // namespace hpcq::job
