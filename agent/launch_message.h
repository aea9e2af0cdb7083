// Turning the leader's Launch message into this node's JobLaunch: which of the
// job's nodes this is, its tasks and their logical cores, and the host CPUs
// and memory nodes they are pinned to.
//
// Emulated nodes: a synthetic topology may be larger than the host. Logical
// core i is pinned to host CPU (i mod host CPUs) and NUMA domain m to host
// memory node (m mod host NUMA nodes); on the real host topology a core maps
// to its own PUs, so the pinned CPUs equal the allocation.
//
// Pure; the message is checked against this node's own topology, since it is
// data from another process: a malformed one is refused with the reason.
#pragma once

#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "lib/resource/topology.h"
#include "proto/overlay.pb.h"
#include "shell/contract.h"

namespace hpcq::agent {

// How a node's logical cores map to its host's CPUs and memory nodes. On an
// emulated node (a synthetic or XML topology) core i is pinned to host CPU
// (i + fold_start) mod host_cpus: each agent sharing a host starts at another
// CPU (its rank's turn), so that one-core jobs on four emulated nodes do not
// all share CPU 0 while the other CPUs idle.
struct HostMapping {
  const resource::NodeTopology* topology = nullptr;  // this node's logical topology
  bool host_topology = false;                        // the logical topology is the host's own
  int host_cpus = 1;
  int host_numa = 1;
  int fold_start = 0;  // an emulated node's first host CPU
  // Other nodes run on this host too ([agent] shared_host: hpcq start's):
  // the tasks get what MPI needs there (job::add_shared_host_environment).
  bool shared_host = false;

  // Host CPUs of logical cores (all valid for `topology`), sorted, unique.
  std::vector<int> cpus_of(const std::vector<int>& cores) const;
  // Host memory nodes of logical cores' NUMA domains, sorted, unique.
  std::vector<int> mems_of(const std::vector<int>& cores) const;
  // Each core's first host CPU, by core id (what the Hello tells the
  // leader); empty if a core has none (an XML topology without PUs).
  std::vector<int> first_cpu_of_each_core() const;
};

Result<JobLaunch> job_launch_from_message(const overlay::Launch& launch, Rank self,
                                          const std::string& node_name, const HostMapping& host);

}  // namespace hpcq::agent
