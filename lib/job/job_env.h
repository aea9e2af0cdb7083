// The job environment contract: every HPCQ_* variable a task sees is set
// here, in layers, each added where its facts are known. man/hpcq.1 (JOB
// ENVIRONMENT) documents them for users.
//
//   launch_environment     hpcqd, from the job and its allocation, over the
//                          submitter's environment (which brings HPCQ_UMASK
//                          from hpcq submit): HPCQ_JOB_ID, _JOB_NAME,
//                          _NODELIST, _NNODES, _NTASKS, _CPUS_PER_TASK,
//                          _SUBMIT_DIR, _QUEUE, _ACCOUNT, _ARRAY_JOB_ID,
//                          _ARRAY_TASK_ID
//   step_environment       hpcqd, for a step of a batch job: the job's, the
//                          step's caller's over it, then HPCQ_STEP_ID and the
//                          step's _NODELIST, _NNODES, _NTASKS, _CPUS_PER_TASK
//   add_node_environment   the agent: HPCQ_NODEID, _NODENAME
//   add_elastic_environment  the agent, on an elastic job's first node:
//                          HPCQ_NODELIST_FILE, _HOSTFILE, _HOSTFILE_MPICH,
//                          _RESIZE_SOCKET
//   add_gpu_environment    the agent, per task with GPUs: HPCQ_GPUS,
//                          CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER
//   add_shared_host_environment  the agent of a node that shares its host
//                          with others ([agent] shared_host): Open MPI's
//                          OMPI_MCA_pml, _btl, _mpi_yield_when_idle, where
//                          the job set none
//   add_shell_environment  the job shell: HPCQ_HOSTFILE where the agent set
//                          none (the job directory's hostfile: Open MPI's
//                          "NODE slots=N"), HPCQ_HOSTFILE_MPICH ("NODE:N")
//   add_task_environment   the job shell, per task: HPCQ_TASK_RANK,
//                          _LOCAL_TASK, _CPUS
//
// A job submitted through the Slurm commands (JobSpec::slurm_environment)
// also gets Slurm's variables, each layer those it knows (docs/slurm.md
// lists them): the job's (SLURM_JOB_ID, _JOB_NODELIST, _TASKS_PER_NODE as
// "2(x3),1", _ARRAY_*, ...), a step's (SLURM_STEP_*, and SLURM_NTASKS,
// _NNODES, _NODELIST as the step's; a job that is not a batch script is
// step 0, as srun's), the node's (SLURM_NODEID, SLURMD_NODENAME,
// SLURM_CPUS_ON_NODE), the GPUs' (SLURM_JOB_GPUS, _GPUS_ON_NODE) and the
// task's (SLURM_PROCID, _LOCALID). The later layers add theirs when the
// environment has SLURM_JOB_ID.
//
// Plain functions of their arguments. The job shells compile shell_env.cc,
// the last two layers, in (they link no library).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lib/job/job.h"
#include "lib/job/steps.h"

namespace hpcq::job {

using Environment = std::map<std::string, std::string>;

// The job's nodes in hostlist form ("node[1-3,5]"), in allocation order:
// expanded, the first is the first node (HPCQ_NODELIST, as Slurm's
// SLURM_JOB_NODELIST; `hpcq hostnames` expands it).
std::string nodelist(const resource::Allocation& allocation);
// The tasks of the job's allocation (a range job's size, not its minimum's),
// or the request's before it has one (HPCQ_NTASKS).
int task_count(const Job& job);

Environment launch_environment(const Job& job);
Environment step_environment(const Job& job, const StepRecord& step);
// The job's environment is a Slurm job's (it has SLURM_JOB_ID).
bool is_slurm_environment(const Environment& env);
void add_node_environment(Environment& env, int node_index, const std::string& node_name,
                          int cpus_on_node);
void add_elastic_environment(Environment& env, const std::string& nodelist_file,
                             const std::string& hostfile, const std::string& hostfile_mpich,
                             const std::string& resize_socket);
// `slurm`: the job's environment is a Slurm job's (is_slurm_environment).
void add_gpu_environment(Environment& env, const std::vector<int>& gpus, bool slurm);
void add_shared_host_environment(Environment& env);
void add_shell_environment(Environment& env, const std::string& hostfile,
                           const std::string& hostfile_mpich);
void add_task_environment(Environment& env, int rank, int local_task,
                          const std::string& logical_cpus);

}  // namespace hpcq::job
