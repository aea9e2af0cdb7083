#include "lib/job/job_env.h"

#include <vector>

#include "lib/core/hostlist.h"

namespace hpcq::job {

namespace {

std::string join(const std::vector<int>& values) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

// Slurm's form of per-node counts: runs of equal values as VALUE(xN),
// "2(x3),1" (SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE).
std::string slurm_counts(const std::vector<int>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size();) {
    std::size_t run = 1;
    while (i + run < values.size() && values[i + run] == values[i]) ++run;
    out += (out.empty() ? "" : ",") + std::to_string(values[i]);
    if (run > 1) out += "(x" + std::to_string(run) + ")";
    i += run;
  }
  return out;
}

std::vector<int> tasks_per_node(const resource::Allocation& allocation) {
  std::vector<int> tasks;
  for (const auto& part : allocation.nodes) tasks.push_back(part.ntasks);
  return tasks;
}

// What sbatch and srun set for a whole job, from what hpcq knows of it;
// the step, node and task layers add theirs (header).
void add_slurm_job_environment(Environment& env, const Job& job) {
  const std::string id = std::to_string(job.id);
  const std::string nodes = nodelist(job.allocation);
  const std::string ntasks = std::to_string(task_count(job));
  const std::string nnodes = std::to_string(job.allocation.nodes.size());
  std::vector<int> cpus;
  for (const auto& part : job.allocation.nodes) cpus.push_back(static_cast<int>(part.cores.size()));
  env["SLURM_JOB_ID"] = env["SLURM_JOBID"] = id;
  env["SLURM_JOB_NAME"] = job.spec.name;
  env["SLURM_JOB_USER"] = job.user;
  env["SLURM_JOB_UID"] = std::to_string(job.uid);
  env["SLURM_JOB_GID"] = std::to_string(job.gid);
  env["SLURM_JOB_NODELIST"] = env["SLURM_NODELIST"] = nodes;
  env["SLURM_JOB_NUM_NODES"] = env["SLURM_NNODES"] = nnodes;
  env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = ntasks;
  env["SLURM_TASKS_PER_NODE"] = slurm_counts(tasks_per_node(job.allocation));
  env["SLURM_JOB_CPUS_PER_NODE"] = slurm_counts(cpus);
  // As sbatch: only what the job asked for.
  if (job.spec.ntasks_per_node > 0) {
    env["SLURM_NTASKS_PER_NODE"] = std::to_string(job.spec.ntasks_per_node);
  }
  if (job.spec.request.cpus_per_task > 1) {
    env["SLURM_CPUS_PER_TASK"] = std::to_string(job.spec.request.cpus_per_task);
  }
  constexpr std::uint64_t kMiB = 1024 * 1024;
  if (job.spec.request.mem_per_node_bytes > 0) {
    env["SLURM_MEM_PER_NODE"] = std::to_string(job.spec.request.mem_per_node_bytes / kMiB);
  }
  if (job.spec.request.mem_per_cpu_bytes > 0) {
    env["SLURM_MEM_PER_CPU"] = std::to_string(job.spec.request.mem_per_cpu_bytes / kMiB);
  }
  if (!job.spec.queue.empty()) env["SLURM_JOB_PARTITION"] = job.spec.queue;
  if (!job.spec.account.empty()) env["SLURM_JOB_ACCOUNT"] = job.spec.account;
  if (!job.spec.qos.empty()) env["SLURM_JOB_QOS"] = job.spec.qos;
  if (job.requeue_count > 0) env["SLURM_RESTART_COUNT"] = std::to_string(job.requeue_count);
  if (!job.spec.dependencies.empty()) {
    env["SLURM_JOB_DEPENDENCY"] = format_dependencies(job.spec.dependencies);
  }
  if (job.spec.array_job_id != 0) {
    env["SLURM_ARRAY_JOB_ID"] = std::to_string(job.spec.array_job_id);
    env["SLURM_ARRAY_TASK_ID"] = std::to_string(job.spec.array_task_id);
    if (auto array = parse_array(job.spec.array); array.is_ok() && !array->indices.empty()) {
      const std::vector<int>& at = array->indices;
      int step = at.size() > 1 ? at[1] - at[0] : 1;
      for (std::size_t i = 1; i < at.size(); ++i) {
        if (at[i] - at[i - 1] != step) step = 1;
      }
      env["SLURM_ARRAY_TASK_COUNT"] = std::to_string(at.size());
      env["SLURM_ARRAY_TASK_MIN"] = std::to_string(at.front());
      env["SLURM_ARRAY_TASK_MAX"] = std::to_string(at.back());
      env["SLURM_ARRAY_TASK_STEP"] = std::to_string(step);
    }
  }
}

// A step's view: srun sets these for its tasks (the job's own stay).
void add_slurm_step_environment(Environment& env, int step_id,
                                const resource::Allocation& allocation) {
  int ntasks = 0;
  for (const auto& part : allocation.nodes) ntasks += part.ntasks;
  const std::string nodes = nodelist(allocation);
  env["SLURM_STEP_ID"] = env["SLURM_STEPID"] = std::to_string(step_id);
  // SLURM_NODELIST stays the job's, as srun leaves it.
  env["SLURM_STEP_NODELIST"] = nodes;
  if (auto umask = env.find("HPCQ_UMASK"); umask != env.end()) env["SLURM_UMASK"] = umask->second;
  env["SLURM_STEP_NUM_NODES"] = env["SLURM_NNODES"] = std::to_string(allocation.nodes.size());
  env["SLURM_STEP_NUM_TASKS"] = env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = std::to_string(ntasks);
  env["SLURM_STEP_TASKS_PER_NODE"] = env["SLURM_TASKS_PER_NODE"] =
      slurm_counts(tasks_per_node(allocation));
}

}  // namespace

int task_count(const Job& job) {
  int ntasks = 0;
  for (const auto& part : job.allocation.nodes) ntasks += part.ntasks;
  return ntasks > 0 ? ntasks : job.spec.request.ntasks;
}

std::string nodelist(const resource::Allocation& allocation) {
  std::vector<std::string> names;
  names.reserve(allocation.nodes.size());
  for (const auto& part : allocation.nodes) names.push_back(part.node);
  return compress_hostlist(names);
}

Environment launch_environment(const Job& job) {
  Environment env(job.spec.env.begin(), job.spec.env.end());
  env["HPCQ_JOB_ID"] = std::to_string(job.id);
  env["HPCQ_JOB_NAME"] = job.spec.name;
  env["HPCQ_NODELIST"] = nodelist(job.allocation);
  env["HPCQ_NNODES"] = std::to_string(job.allocation.nodes.size());
  env["HPCQ_NTASKS"] = std::to_string(task_count(job));
  // The node says where its hostfile is (an elastic job's first node: one
  // the agent rewrites on resizes); a value inherited from the submitter's
  // own job must not hide it.
  env.erase("HPCQ_HOSTFILE");
  env["HPCQ_CPUS_PER_TASK"] = std::to_string(job.spec.request.cpus_per_task);
  if (job.spec.ntasks_per_node > 0) {
    env["HPCQ_NTASKS_PER_NODE"] = std::to_string(job.spec.ntasks_per_node);
  }
  env["HPCQ_SUBMIT_DIR"] = job.spec.cwd;
  if (!job.spec.queue.empty()) env["HPCQ_QUEUE"] = job.spec.queue;
  if (!job.spec.account.empty()) env["HPCQ_ACCOUNT"] = job.spec.account;
  if (job.spec.array_job_id != 0) {
    env["HPCQ_ARRAY_JOB_ID"] = std::to_string(job.spec.array_job_id);
    env["HPCQ_ARRAY_TASK_ID"] = std::to_string(job.spec.array_task_id);
  }
  if (job.spec.slurm_environment) {
    add_slurm_job_environment(env, job);
    // A job that is not a batch script is what srun makes outside an
    // allocation: a job whose tasks are its step 0.
    if (!job.spec.batch) add_slurm_step_environment(env, 0, job.allocation);
  }
  return env;
}

Environment step_environment(const Job& job, const StepRecord& step) {
  Environment env = launch_environment(job);
  for (const auto& [k, v] : step.env) env[k] = v;
  // The caller's task's own, set again for each of the step's tasks.
  for (const char* name :
       {"HPCQ_HOSTFILE", "HPCQ_TASK_RANK", "HPCQ_LOCAL_TASK", "HPCQ_CPUS", "HPCQ_NODEID",
        "HPCQ_NODENAME", "HPCQ_GPUS", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",
        "SLURMD_NODENAME", "SLURM_CPUS_ON_NODE", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE"}) {
    env.erase(name);
  }
  int ntasks = 0;
  for (const auto& node : step.allocation.nodes) ntasks += node.ntasks;
  env["HPCQ_STEP_ID"] = std::to_string(step.id);
  env["HPCQ_NODELIST"] = nodelist(step.allocation);
  env["HPCQ_NNODES"] = std::to_string(step.allocation.nodes.size());
  env["HPCQ_NTASKS"] = std::to_string(ntasks);
  env["HPCQ_CPUS_PER_TASK"] = std::to_string(step.allocation.cpus_per_task);
  // Slurm numbers a job's steps from 0, hpcq from 1 (0 is the job itself).
  if (job.spec.slurm_environment) add_slurm_step_environment(env, step.id - 1, step.allocation);
  return env;
}

void add_node_environment(Environment& env, int node_index, const std::string& node_name,
                          int cpus_on_node) {
  env["HPCQ_NODEID"] = std::to_string(node_index);
  env["HPCQ_NODENAME"] = node_name;
  if (is_slurm_environment(env)) {
    env["SLURM_NODEID"] = std::to_string(node_index);
    env["SLURMD_NODENAME"] = node_name;
    env["SLURM_CPUS_ON_NODE"] = std::to_string(cpus_on_node);
  }
}

// Emulated nodes share a host name and /dev/shm: Open MPI would take ranks
// of different nodes for neighbours and pair them over shared memory, whose
// segments' names then collide (SIGSEGV in MPI_Init), and its ranks, more
// than the host's CPUs, would spin. As on separate machines: TCP between
// ranks, and yielding while they wait. MPICH needs nothing (its ranks in
// different PID namespaces use TCP).
void add_shared_host_environment(Environment& env) {
  env.emplace("OMPI_MCA_pml", "ob1");
  env.emplace("OMPI_MCA_btl", "self,tcp");
  env.emplace("OMPI_MCA_mpi_yield_when_idle", "1");
}

void add_elastic_environment(Environment& env, const std::string& nodelist_file,
                             const std::string& hostfile, const std::string& hostfile_mpich,
                             const std::string& resize_socket) {
  env["HPCQ_NODELIST_FILE"] = nodelist_file;
  env["HPCQ_HOSTFILE"] = hostfile;
  env["HPCQ_HOSTFILE_MPICH"] = hostfile_mpich;
  env["HPCQ_RESIZE_SOCKET"] = resize_socket;
}

void add_gpu_environment(Environment& env, const std::vector<int>& gpus, bool slurm) {
  if (gpus.empty()) return;
  // CUDA counts devices in PCI order then, as hwloc and HPCQ_GPUS do.
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  env["CUDA_VISIBLE_DEVICES"] = join(gpus);
  env["HPCQ_GPUS"] = join(gpus);
  if (slurm) {
    env["SLURM_JOB_GPUS"] = join(gpus);
    env["SLURM_GPUS_ON_NODE"] = std::to_string(gpus.size());
  }
}

}  // namespace hpcq::job
