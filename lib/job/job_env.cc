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
  return env;
}

Environment step_environment(const Job& job, const StepRecord& step) {
  Environment env = launch_environment(job);
  for (const auto& [k, v] : step.env) env[k] = v;
  // The caller's task's own, set again for each of the step's tasks.
  for (const char* name : {"HPCQ_HOSTFILE", "HPCQ_TASK_RANK", "HPCQ_LOCAL_TASK", "HPCQ_CPUS",
                           "HPCQ_NODEID", "HPCQ_NODENAME", "HPCQ_GPUS"}) {
    env.erase(name);
  }
  int ntasks = 0;
  for (const auto& node : step.allocation.nodes) ntasks += node.ntasks;
  env["HPCQ_STEP_ID"] = std::to_string(step.id);
  env["HPCQ_NODELIST"] = nodelist(step.allocation);
  env["HPCQ_NNODES"] = std::to_string(step.allocation.nodes.size());
  env["HPCQ_NTASKS"] = std::to_string(ntasks);
  env["HPCQ_CPUS_PER_TASK"] = std::to_string(step.allocation.cpus_per_task);
  return env;
}

void add_node_environment(Environment& env, int node_index, const std::string& node_name) {
  env["HPCQ_NODEID"] = std::to_string(node_index);
  env["HPCQ_NODENAME"] = node_name;
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

void add_gpu_environment(Environment& env, const std::vector<int>& gpus) {
  if (gpus.empty()) return;
  // CUDA counts devices in PCI order then, as hwloc and HPCQ_GPUS do.
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  env["CUDA_VISIBLE_DEVICES"] = join(gpus);
  env["HPCQ_GPUS"] = join(gpus);
}

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
}

}  // namespace hpcq::job
