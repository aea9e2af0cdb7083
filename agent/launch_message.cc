#include "agent/launch_message.h"

#include <algorithm>
#include <set>

#include "lib/resource/cpu_list.h"

namespace hpcq::agent {
namespace {

// Far above any real node, low enough that a corrupt count cannot make the
// agent build billions of tasks.
constexpr int kMaxTasksPerNode = 1 << 16;

}  // namespace

std::vector<int> HostMapping::cpus_of(const std::vector<int>& cores) const {
  std::set<int> cpus;
  for (int core : cores) {
    if (host_topology) {
      for (int pu : topology->cores[static_cast<std::size_t>(core)].pus) cpus.insert(pu);
    } else {
      cpus.insert(core % host_cpus);
    }
  }
  return {cpus.begin(), cpus.end()};
}

Result<JobLaunch> job_launch_from_message(const overlay::Launch& launch, Rank self,
                                          const std::string& node_name, const HostMapping& host) {
  const overlay::NodeAlloc* mine = nullptr;
  std::string hostfile;
  int node_index = 0;
  for (int i = 0; i < launch.allocation_size(); ++i) {
    const overlay::NodeAlloc& a = launch.allocation(i);
    hostfile += a.node() + " slots=" + std::to_string(a.ntasks()) + "\n";
    if (a.rank() == self && mine == nullptr) {
      mine = &a;
      node_index = i;
    }
  }
  if (!mine) return invalid_argument("this node is not in the job's allocation");

  const int num_cores = host.topology->num_cores();
  const int num_numa = static_cast<int>(host.topology->numa.size());
  std::vector<int> cores(mine->cores().begin(), mine->cores().end());
  for (int core : cores) {
    if (core < 0 || core >= num_cores) {
      return invalid_argument("the allocation names core " + std::to_string(core) +
                              " of a node with " + std::to_string(num_cores));
    }
  }
  for (int numa : mine->numa()) {
    if (numa < 0 || numa >= num_numa) {
      return invalid_argument("the allocation names NUMA domain " + std::to_string(numa) +
                              " of a node with " + std::to_string(num_numa));
    }
  }
  if (mine->ntasks() < 1 || mine->ntasks() > kMaxTasksPerNode) {
    return invalid_argument("bad task count " + std::to_string(mine->ntasks()) + " for this node");
  }
  if (mine->first_task() < 0) {
    return invalid_argument("bad first task rank " + std::to_string(mine->first_task()));
  }
  if (launch.cpus_per_task() > num_cores) {
    return invalid_argument("bad cpus per task " + std::to_string(launch.cpus_per_task()));
  }

  JobLaunch job;
  job.id = launch.job_id();
  job.uid = launch.uid();
  job.gid = launch.gid();
  job.user = launch.user();
  job.argv.assign(launch.argv().begin(), launch.argv().end());
  job.script = launch.script();
  for (const auto& [k, v] : launch.env()) job.env[k] = v;
  job.env["HPCQ_NODEID"] = std::to_string(node_index);
  job.env["HPCQ_NODENAME"] = node_name;
  job.cwd = launch.cwd();
  job.stdout_path = launch.stdout_path();
  job.stderr_path = launch.stderr_path();
  job.hostfile = std::move(hostfile);
  const int cpt = std::max(1, launch.cpus_per_task());
  for (int t = 0; t < mine->ntasks(); ++t) {
    TaskSpec task;
    task.rank = mine->first_task() + t;
    std::vector<int> task_cores;
    for (std::size_t k = static_cast<std::size_t>(t) * static_cast<std::size_t>(cpt);
         k < (static_cast<std::size_t>(t) + 1) * static_cast<std::size_t>(cpt) && k < cores.size();
         ++k) {
      task_cores.push_back(cores[k]);
    }
    task.host_cpus = host.cpus_of(task_cores);
    task.logical_cpus = resource::format_cpu_list(task_cores);
    job.tasks.push_back(std::move(task));
  }
  job.host_cpus = host.cpus_of(cores);
  std::set<int> mems;
  for (int m : mine->numa()) mems.insert(m % host.host_numa);
  job.host_mems.assign(mems.begin(), mems.end());
  job.memory_limit_bytes = mine->memory_bytes();
  job.time_limit_s = launch.time_limit_s();
  return job;
}

}  // namespace hpcq::agent
