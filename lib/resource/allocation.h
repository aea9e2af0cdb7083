// What a job asks for and what it is given.
//
// A ResourceRequest is the shape of a job (nodes, tasks, cores per task,
// memory). An Allocation names, for each node, the logical cores and NUMA
// domains given to the job and how many of its tasks run there. Tasks are
// numbered block-wise across the allocation's nodes in order: node 0 runs
// tasks [0, n0), node 1 runs [n0, n0 + n1), ... and on a node, task j (local
// index) gets cores[j * cpus_per_task, (j + 1) * cpus_per_task).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/core/ids.h"

namespace hpcq::resource {

struct ResourceRequest {
  int nodes = 0;  // 0: as few nodes as the tasks fit on
  int ntasks = 1;
  int cpus_per_task = 1;
  std::uint64_t mem_per_node_bytes = 0;  // 0: no memory request (no limit)
  int gpus_per_node = 0;  // --gpus-per-node
  int gpus_per_task = 0;  // --gpus-per-task (a node then needs ntasks-on-node times this)
};

struct NodeAllocation {
  Rank rank = 0;
  std::string node;        // node name
  std::vector<int> cores;  // logical core ids, ntasks * cpus_per_task of them
  std::vector<int> numa;   // NUMA domains of those cores, ascending, unique
  std::uint64_t memory_bytes = 0;
  std::vector<int> gpus;   // GPU indices on the node (hwloc's order)
  int ntasks = 0;
  int first_task = 0;      // global rank of this node's first task
};

struct Allocation {
  std::vector<NodeAllocation> nodes;
  int cpus_per_task = 1;

  bool empty() const { return nodes.empty(); }
  int total_cores() const {
    int n = 0;
    for (const auto& a : nodes) n += static_cast<int>(a.cores.size());
    return n;
  }
};

}  // namespace hpcq::resource
