// What a job asks for and what it is given.
//
// A ResourceRequest is the shape of a job (nodes, tasks, cores per task,
// memory, GPUs) and how its tasks are laid out. An Allocation names, for each
// node, the logical cores, NUMA domains and GPUs given to the job and how
// many of its tasks run there. With node_distribution kBlock (the default)
// tasks are numbered block-wise across the allocation's nodes in order: node
// 0 runs tasks [0, n0), node 1 runs [n0, n0 + n1), ...; with kCyclic they are
// dealt round-robin over the nodes (task_ranks() in allocator.h lists them).
// On a node, local task j gets cores[j * cpus_per_task, (j + 1) *
// cpus_per_task) and, with gpus_per_task, gpus[j * gpus_per_task, (j + 1) *
// gpus_per_task) (task_layout() in allocator.h spells it out per task).
// A part may hold more cores and GPUs than its tasks take (a whole node of
// an --exclusive job, a `--whole` step): those after the tasks' are the
// job's, in its cpuset, bound to no task.
//
// Every field added after the first four of ResourceRequest defaults to
// today's behaviour: cores not shared, block layout, bind to cores, NUMA
// best effort.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lib/core/ids.h"

namespace hpcq::resource {

// Slurm's --distribution, one level: over nodes, or over NUMA domains within
// a node (block: fill one before the next; cyclic: deal round-robin).
enum class Distribution { kBlock, kCyclic };

// Slurm's --cpu-bind: kCores binds a task to every PU of its cores,
// kThreads to one PU (the first hardware thread) of each of its cores, so
// SMT siblings stay idle; kNone leaves tasks unbound inside the job's cpuset.
enum class CpuBind { kCores, kThreads, kNone };

// Kubernetes' topology manager policies, per task: kBestEffort prefers each
// task inside one NUMA domain (and the node's tasks in the fewest domains and
// packages) but spans domains when nothing else fits; kSingleNumaNode never
// lets a task's cores (or its gpus_per_task GPUs) leave one domain; kNone
// takes the lowest free cores in order, ignoring NUMA.
enum class NumaPolicy { kBestEffort, kSingleNumaNode, kNone };

struct ResourceRequest {
  int nodes = 0;  // 0: as few nodes as the tasks fit on
  int ntasks = 1;
  int cpus_per_task = 1;
  std::uint64_t mem_per_node_bytes = 0;  // 0: no memory request (no limit)
  int gpus_per_node = 0;                 // --gpus-per-node
  int gpus_per_task = 0;  // --gpus-per-task (a node then needs ntasks-on-node times this)
  // --mem-per-cpu: a node needs this times the cores it gives. Exclusive with
  // mem_per_node_bytes (check_request refuses both).
  std::uint64_t mem_per_cpu_bytes = 0;
  Distribution node_distribution = Distribution::kBlock;  // --distribution=X:*
  Distribution core_distribution = Distribution::kBlock;  // --distribution=*:X (over domains)
  CpuBind cpu_bind = CpuBind::kCores;
  NumaPolicy numa_policy = NumaPolicy::kBestEffort;
  // --oversubscribe: the cores may be shared with other oversubscribing jobs
  // (never with exclusive ones, never with reserved system cores).
  bool oversubscribe = false;
  // --exclusive (sbatch's): whole nodes. The job gets every core (but the
  // reserved system cores), GPU, gres unit and all the memory of each of
  // its nodes, idle ones only, and no other job runs there with it; its
  // tasks are as many as asked, each with an even share of the cores.
  bool exclusive = false;
  // --gres nvme:2 (Slurm's --gres): generic resources each node of the job
  // holds while it runs, units by name (NodePool's per-node counts).
  std::map<std::string, int> gres = {};
};

// One worker (container) of a job split by granularity (papers/000,
// Algorithm 2): the MPI ranks it runs and the cores of the node that hold
// them (each rank's cpus_per_task cores as the node's task layout gives
// them). Its group is the task group (Algorithm 3) that the node holds.
struct WorkerPlacement {
  int id = 0;
  int group = 0;
  std::vector<int> ranks;  // global MPI ranks, ascending; slots = ranks.size()
  std::vector<int> cores;  // logical core ids on this node, ascending
};

struct NodeAllocation {
  Rank rank = 0;
  std::string node;        // node name
  std::vector<int> cores;  // logical core ids, the tasks' ntasks * cpus_per_task first
  std::vector<int> numa;   // NUMA domains of those cores, ascending, unique
  std::uint64_t memory_bytes = 0;
  std::vector<int> gpus;  // GPU indices on the node (hwloc's order)
  // Units of the node's generic resources held (the request's gres); units
  // are counted, not named, so a part holds a count per resource name.
  std::map<std::string, int> gres = {};
  int ntasks = 0;
  int first_task = 0;  // global rank of this node's first task
  // The job's workers on this node (the "granularity" plugin); empty when
  // the job is not split into workers. Informational: cores, ntasks and the
  // task layout above keep their meaning.
  std::vector<WorkerPlacement> workers;
};

// One task's binding on its node, derived from an Allocation (task_layout()).
struct TaskPlacement {
  int rank = 0;            // global task rank
  std::vector<int> cores;  // logical core ids
  std::vector<int> cpus;   // logical PU ids to bind to (cpu_bind); empty for kNone
  std::vector<int> numa;   // NUMA domains of its cores, ascending
  std::vector<int> gpus;   // GPU indices (gpus_per_task), else empty
};

struct Allocation {
  std::vector<NodeAllocation> nodes;
  int cpus_per_task = 1;
  // Copied from the request so the layout can be rebuilt from the
  // allocation alone (agent, store).
  bool shared = false;  // cores taken as oversubscribed (NodePool counts sharers)
  int gpus_per_task = 0;
  Distribution node_distribution = Distribution::kBlock;
  CpuBind cpu_bind = CpuBind::kCores;

  bool empty() const { return nodes.empty(); }
  int total_cores() const {
    int n = 0;
    for (const auto& a : nodes) n += static_cast<int>(a.cores.size());
    return n;
  }
};

}  // namespace hpcq::resource
