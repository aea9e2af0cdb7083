#include "agent/launch_message.h"

#include <algorithm>
#include <set>

#include "lib/core/units.h"
#include "lib/job/job_env.h"
#include "lib/overlay/messages.h"
#include "lib/resource/allocator.h"
#include "lib/resource/cpu_list.h"
#include "shell/pmi.h"

namespace hpcq::agent {
namespace {

// Far above any real node, low enough that a corrupt count cannot make the
// agent build billions of tasks.
constexpr int kMaxTasksPerNode = 1 << 16;
constexpr int kMaxNodesPerJob = 100'000;

// The MPI hostfile: "HOST slots=N" per worker of a split job, in worker id
// order (papers/000, Algorithm 2), else per node.
std::string hostfile_of(const overlay::Launch& launch) {
  std::vector<std::pair<int, std::string>> lines;
  for (const overlay::NodeAlloc& a : launch.allocation()) {
    if (a.workers_size() == 0) {
      lines.emplace_back(static_cast<int>(lines.size()),
                         a.node() + " slots=" + std::to_string(a.ntasks()) + "\n");
    }
    for (const overlay::Worker& w : a.workers()) {
      lines.emplace_back(w.id(), a.node() + " slots=" + std::to_string(w.ranks_size()) + "\n");
    }
  }
  std::stable_sort(lines.begin(), lines.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::string text;
  for (const auto& line : lines) text += line.second;
  return text;
}

// The PMI world of a job's (or step's) tasks: all of its ranks, on all of
// its nodes.
JobLaunch::PmiWorld pmi_world_of(const overlay::Launch& launch,
                                 const resource::Allocation& allocation, int node_index) {
  JobLaunch::PmiWorld world;
  world.api = launch.mpi();
  world.node = node_index;
  for (const overlay::NodeAlloc& a : launch.allocation()) {
    world.node_names.push_back(a.node());
    world.node_ranks.push_back(a.rank());
  }
  world.kvsname = "hpcq_" + std::to_string(launch.job_id()) + "_" + std::to_string(launch.step());
  world.nodes = launch.allocation_size();
  world.size = launch.ntasks();
  // One task has no peer to exchange with (MPI starts it as a singleton):
  // the PMIx server, 4 ms of CPU a job here, is for worlds that need it.
  if (world.api == kMpiBoth && world.size == 1) world.api = "pmi1";
  // The mapping's size is bounded by the tasks the message itself lists (a
  // corrupt ntasks must not size an allocation): a larger world gets none.
  long long listed = 0;
  for (const overlay::NodeAlloc& a : launch.allocation()) listed += a.ntasks();
  if (world.size < 1 || world.size > listed) return world;
  std::vector<int> node_of_rank(static_cast<std::size_t>(world.size), -1);
  for (int i = 0; i < launch.allocation_size(); ++i) {
    const overlay::NodeAlloc& a = launch.allocation(i);
    std::vector<int> ranks;
    for (const overlay::Worker& w : a.workers()) {
      ranks.insert(ranks.end(), w.ranks().begin(), w.ranks().end());
    }
    if (a.workers_size() == 0)
      ranks = resource::task_ranks(allocation, static_cast<std::size_t>(i));
    for (int r : ranks) {
      if (r >= 0 && r < world.size) node_of_rank[static_cast<std::size_t>(r)] = i;
    }
  }
  // A mapping that misses a rank would mislead MPI: none then.
  const bool complete =
      std::find(node_of_rank.begin(), node_of_rank.end(), -1) == node_of_rank.end();
  if (complete) {
    world.process_mapping = pmi::process_mapping(node_of_rank);
    world.node_of_rank = std::move(node_of_rank);
  }
  return world;
}

}  // namespace

std::vector<int> HostMapping::mems_of(const std::vector<int>& cores) const {
  std::set<int> mems;
  for (int core : cores) {
    mems.insert(topology->cores[static_cast<std::size_t>(core)].numa % host_numa);
  }
  return {mems.begin(), mems.end()};
}

std::vector<int> HostMapping::cpus_of(const std::vector<int>& cores) const {
  std::set<int> cpus;
  for (int core : cores) {
    if (host_topology) {
      for (int pu : topology->cores[static_cast<std::size_t>(core)].pus) cpus.insert(pu);
    } else {
      cpus.insert((core + fold_start) % host_cpus);
    }
  }
  return {cpus.begin(), cpus.end()};
}

std::vector<int> HostMapping::first_cpu_of_each_core() const {
  std::vector<int> out;
  for (int core = 0; core < topology->num_cores(); ++core) {
    const std::vector<int> cpus = cpus_of({core});
    if (cpus.empty()) return {};
    out.push_back(cpus.front());
  }
  return out;
}

namespace {

// This node's part of the launch, checked against the node (its cores, NUMA
// domains and GPUs) and the job (its task counts); `node_index`: its place.
Result<const overlay::NodeAlloc*> my_part(const overlay::Launch& launch, Rank self,
                                          const HostMapping& host, int& node_index) {
  const overlay::NodeAlloc* mine = nullptr;
  for (int i = 0; i < launch.allocation_size(); ++i) {
    const overlay::NodeAlloc& a = launch.allocation(i);
    if (a.rank() == self && mine == nullptr) {
      mine = &a;
      node_index = i;
    }
  }
  if (!mine) return invalid_argument("this node is not in the job's allocation");
  if (launch.allocation_size() > kMaxNodesPerJob) {
    return invalid_argument("bad node count " + std::to_string(launch.allocation_size()));
  }
  for (const overlay::NodeAlloc& a : launch.allocation()) {
    // Every node's count matters here: a cyclic layout deals ranks over all.
    if (a.ntasks() < 1 || a.ntasks() > kMaxTasksPerNode) {
      return invalid_argument("bad task count " + std::to_string(a.ntasks()) + " for node " +
                              a.node());
    }
  }
  const auto within = [](const auto& ids, int count, const char* what) -> Status {
    for (int id : ids) {
      if (id < 0 || id >= count) {
        return invalid_argument(std::string("the allocation names ") + what + " " +
                                std::to_string(id) + " of a node with " + std::to_string(count));
      }
    }
    return Status::ok();
  };
  HPCQ_RETURN_IF_ERROR(within(mine->cores(), host.topology->num_cores(), "core"));
  HPCQ_RETURN_IF_ERROR(
      within(mine->numa(), static_cast<int>(host.topology->numa.size()), "NUMA domain"));
  HPCQ_RETURN_IF_ERROR(within(mine->gpus(), host.topology->num_gpus(), "GPU"));
  if (mine->first_task() < 0) {
    return invalid_argument("bad first task rank " + std::to_string(mine->first_task()));
  }
  if (launch.cpus_per_task() > host.topology->num_cores()) {
    return invalid_argument("bad cpus per task " + std::to_string(launch.cpus_per_task()));
  }
  if (launch.gpus_per_task() < 0 || launch.gpus_per_task() > host.topology->num_gpus()) {
    return invalid_argument("bad GPUs per task " + std::to_string(launch.gpus_per_task()));
  }
  return mine;
}

// A split job: every local task belongs to one worker, in order, and each
// worker's cores are the node's.
Status check_workers(const overlay::Launch& launch, const overlay::NodeAlloc& mine) {
  int worker_slots = 0;
  const std::set<int> node_cores(mine.cores().begin(), mine.cores().end());
  for (const overlay::Worker& w : mine.workers()) {
    const std::string which = "worker " + std::to_string(w.id());
    if (w.ranks_size() < 1) return invalid_argument(which + " has no ranks");
    for (int r : w.ranks()) {
      if (r < 0 || r >= launch.ntasks()) {
        return invalid_argument(which + " names rank " + std::to_string(r) + " of a job of " +
                                std::to_string(launch.ntasks()) + " tasks");
      }
    }
    for (int c : w.cores()) {
      if (!node_cores.count(c)) {
        return invalid_argument(which + " names core " + std::to_string(c) +
                                " outside the node's allocation");
      }
    }
    worker_slots += w.ranks_size();
  }
  if (mine.workers_size() > 0 && worker_slots != mine.ntasks()) {
    return invalid_argument("the workers hold " + std::to_string(worker_slots) +
                            " ranks; the node runs " + std::to_string(mine.ntasks()) + " tasks");
  }
  return Status::ok();
}

// The layout the leader chose, rebuilt from the message (allocation.h).
Result<resource::Allocation> allocation_of(const overlay::Launch& launch) {
  resource::Allocation allocation;
  allocation.cpus_per_task = std::max(1, launch.cpus_per_task());
  allocation.gpus_per_task = launch.gpus_per_task();
  auto distribution = overlay::from_message(launch.distribution());
  if (!distribution.is_ok()) return distribution.status();
  allocation.node_distribution = *distribution;
  auto bind = overlay::from_message(launch.cpu_bind());
  if (!bind.is_ok()) return bind.status();
  allocation.cpu_bind = *bind;
  for (const overlay::NodeAlloc& a : launch.allocation()) {
    resource::NodeAllocation part;
    part.rank = a.rank();
    part.node = a.node();
    part.cores.assign(a.cores().begin(), a.cores().end());
    part.numa.assign(a.numa().begin(), a.numa().end());
    part.memory_bytes = a.memory_bytes();
    part.gpus.assign(a.gpus().begin(), a.gpus().end());
    part.ntasks = a.ntasks();
    part.first_task = a.first_task();
    allocation.nodes.push_back(std::move(part));
  }
  return allocation;
}

// The node's workers: its whole part (one that the scheduler did not
// split), or each worker on its cores with memory in proportion to them
// (papers/000, Algorithm 2).
void add_workers(JobLaunch& job, const overlay::NodeAlloc& mine, int node_index,
                 const HostMapping& host) {
  if (mine.workers_size() == 0) {
    WorkerSpec whole;
    whole.id = node_index;
    whole.group = node_index;
    whole.host_cpus = job.host_cpus;
    whole.host_mems = job.host_mems;
    whole.memory_limit_bytes = job.memory_limit_bytes;
    job.workers.push_back(std::move(whole));
    return;
  }
  for (const overlay::Worker& w : mine.workers()) {
    WorkerSpec worker;
    worker.id = w.id();
    worker.group = w.group();
    const std::vector<int> worker_cores(w.cores().begin(), w.cores().end());
    worker.host_cpus = host.cpus_of(worker_cores);
    worker.host_mems = host.mems_of(worker_cores);
    if (mine.cores_size() > 0) {
      worker.memory_limit_bytes = static_cast<std::uint64_t>(
          static_cast<long double>(mine.memory_bytes()) * static_cast<long double>(w.cores_size()) /
          static_cast<long double>(mine.cores_size()));
    }
    job.workers.push_back(std::move(worker));
  }
}

// The node's tasks as task_layout places them, each in its worker, on its
// CPUs, with its GPUs.
Status add_tasks(JobLaunch& job, const resource::Allocation& allocation,
                 const overlay::NodeAlloc& mine, int node_index, const HostMapping& host,
                 bool slurm) {
  int worker = 0, worker_first_slot = 0;
  int local = 0;
  // GPUs: CUDA numbers devices fastest-first unless told PCI order; hwloc
  // (and so our GPU ids) follows the PCI tree, so ask CUDA for that order.
  const std::vector<int> node_gpus(mine.gpus().begin(), mine.gpus().end());
  for (const resource::TaskPlacement& placed :
       resource::task_layout(allocation, static_cast<std::size_t>(node_index), *host.topology)) {
    TaskSpec task;
    task.rank = placed.rank;
    if (mine.workers_size() > 0) {
      while (local - worker_first_slot >= mine.workers(worker).ranks_size()) {
        worker_first_slot += mine.workers(worker).ranks_size();
        ++worker;
      }
      const overlay::Worker& w = mine.workers(worker);
      task.rank = w.ranks(local - worker_first_slot);
      task.worker = worker;
      for (int c : placed.cores) {
        if (std::find(w.cores().begin(), w.cores().end(), c) == w.cores().end()) {
          return invalid_argument("task " + std::to_string(task.rank) + "'s core " +
                                  std::to_string(c) + " is not among worker " +
                                  std::to_string(w.id()) + "'s cores");
        }
      }
    }
    ++local;
    task.logical_cpus = resource::format_cpu_list(placed.cores);
    if (allocation.cpu_bind != resource::CpuBind::kNone) {
      // On the host topology the PUs are the host's CPUs; an emulated node
      // folds its cores onto the host (header).
      task.host_cpus = host.host_topology ? placed.cpus : host.cpus_of(placed.cores);
    }
    const std::vector<int>& gpus = allocation.gpus_per_task > 0 ? placed.gpus : node_gpus;
    job::add_gpu_environment(task.env, gpus, slurm);
    task.gpus = gpus;
    job.tasks.push_back(std::move(task));
  }
  return Status::ok();
}

// A batch job: the script runs once, as task 0 on the first node, on all of
// the node's part; the other nodes (all, for hpcq alloc's job, which has no
// script) hold theirs for the job's steps.
void keep_the_script_alone(JobLaunch& job, const overlay::NodeAlloc& mine, int node_index,
                           bool bind, bool slurm) {
  job.tasks.resize(node_index == 0 && !job.tasks.empty() && !job.script.empty() ? 1 : 0);
  if (job.tasks.empty()) return;
  const std::vector<int> node_gpus(mine.gpus().begin(), mine.gpus().end());
  const std::vector<int> cores(mine.cores().begin(), mine.cores().end());
  TaskSpec& script = job.tasks.front();
  script.rank = 0;
  script.worker = 0;
  script.gpus = node_gpus;
  script.env.clear();
  job::add_gpu_environment(script.env, node_gpus, slurm);
  script.logical_cpus = resource::format_cpu_list(cores);
  if (bind) script.host_cpus = job.host_cpus;
}

}  // namespace

Result<JobLaunch> job_launch_from_message(const overlay::Launch& launch, Rank self,
                                          const std::string& node_name, const HostMapping& host) {
  int node_index = 0;
  auto found = my_part(launch, self, host, node_index);
  if (!found.is_ok()) return found.status();
  const overlay::NodeAlloc& mine = **found;
  HPCQ_RETURN_IF_ERROR(check_workers(launch, mine));
  auto allocation = allocation_of(launch);
  if (!allocation.is_ok()) return allocation.status();
  const auto warn_target = job::parse_warn_target(launch.warn_target());
  if (!warn_target) return invalid_argument("warn_target: unknown " + quote(launch.warn_target()));

  JobLaunch job;
  job.id = launch.job_id();
  job.uid = launch.uid();
  job.gid = launch.gid();
  job.user = launch.user();
  job.argv.assign(launch.argv().begin(), launch.argv().end());
  job.script = launch.script();
  for (const auto& [k, v] : launch.env()) job.env[k] = v;
  job::add_node_environment(job.env, node_index, node_name, mine.cores_size());
  if (host.shared_host) job::add_shared_host_environment(job.env);
  const bool slurm = job::is_slurm_environment(job.env);
  job.cwd = launch.cwd();
  job.stdout_path = launch.stdout_path();
  job.stderr_path = launch.stderr_path();
  job.hostfile = hostfile_of(launch);
  job.image = launch.image();
  job.host_cpus = host.cpus_of(std::vector<int>(mine.cores().begin(), mine.cores().end()));
  std::set<int> mems;
  for (int m : mine.numa()) mems.insert(m % host.host_numa);
  job.host_mems.assign(mems.begin(), mems.end());
  job.memory_limit_bytes = mine.memory_bytes();
  add_workers(job, mine, node_index, host);
  HPCQ_RETURN_IF_ERROR(add_tasks(job, *allocation, mine, node_index, host, slurm));
  job.time_limit_s = launch.time_limit_s();
  job.forward_output = launch.forward_output();
  job.warn_signal = launch.warn_signal();
  job.warn_seconds = launch.warn_seconds();
  job.warn_script = !launch.batch() || *warn_target != job::WarnTarget::kSteps;
  job.warn_steps = *warn_target != job::WarnTarget::kScript;
  job.pty = launch.pty();
  job.batch = launch.batch();
  if (known_mpi(launch.mpi()) && launch.mpi() != "none" && !job.batch && launch.image().empty()) {
    job.pmi = pmi_world_of(launch, *allocation, node_index);
  }
  if (job.batch) {
    keep_the_script_alone(job, mine, node_index, allocation->cpu_bind != resource::CpuBind::kNone,
                          slurm);
  }
  return job;
}

}  // namespace hpcq::agent
