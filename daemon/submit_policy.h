// What the site's policy does to a submission before it is stored: resolve
// the queue (the default one for none), fill in and check the time limit
// against the queue's and the leader's, resolve and check the account
// (the user's association) and QOS, and refuse a raised --priority from
// anyone but an admin. Slurm does the same at sbatch time (partition,
// account association, QOS, PartitionTimeLimit); refusing here, with a
// one-line reason, beats a job that pends forever.
//
// Pure: reads only its arguments. Errors: kInvalidArgument naming the option
// (--queue, --time, --account, --qos), kPermissionDenied for --priority.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lib/core/config.h"
#include "lib/core/status.h"
#include "lib/job/job.h"

namespace hpcq::daemon {

// `groups`: the caller's group names (needed only where a queue has
// allow_groups); `is_admin`: the caller may raise priorities and use any
// queue. Changes `spec` in place: queue and account resolved, time limit
// filled in. Also refuses a job that asks for more nodes than the cluster
// has configured (or its queue's node set, -w and -x leave), more nodes or
// cores than its queue allows (in all, or per user), or a queue its groups
// or account may not use (kPermissionDenied).
Status apply_submit_policy(const ClusterConfig& config, std::uint32_t uid,
                           const std::vector<std::string>& groups, bool is_admin,
                           job::JobSpec& spec);

// A configured node as hpcqd knows it; nullopt while its shape is unknown
// (it has not said Hello since hpcqd started).
struct NodeShape {
  int cores = 0;
  std::uint64_t memory_bytes = 0;
  int gpus = 0;
  bool operator==(const NodeShape&) const = default;
};

// Refuses, naming the limit, a request that no set of the configured nodes
// could ever hold (Slurm: "Requested node configuration is not available"):
// a task wider than the largest node, more memory or GPUs than any node has,
// more tasks than the cluster (or its -N largest nodes) can hold. A node of
// unknown shape could be anything: with one, only what the known nodes rule
// out for certain is refused (nothing). kInvalidArgument naming the option.
Status check_fits(const std::vector<std::optional<NodeShape>>& nodes, const job::JobSpec& spec);

}  // namespace hpcq::daemon
