// Plugin "granularity": fine-grained placement of MPI jobs, after Liu &
// Guitart, "Fine-Grained Scheduling for Containerized HPC Workloads in
// Kubernetes Clusters" (../shared/papers/000).
//
// Only jobs that name a profile (PendingJob.profile) are touched; others are
// placed as requested. For such a job, each cycle:
//   shape   Algorithm 1 (resource::choose_granularity) with the policy of
//           option `granularity.policy` (scale | granularity | none; default
//           none), N_t = request.ntasks, N_n = the schedulable nodes of the
//           snapshot, usable cores per node = the largest node's cores less
//           its reserved ones, divided by cpus_per_task, and the user's worker
//           count (PendingJob.workers). The request becomes N_g nodes (one
//           task group per node, Algorithm 3) of N_t tasks spread evenly.
//           A user's worker count that cannot be dealt evenly over N_g
//           groups (3 workers on 2 nodes) gets fewer groups, down to the
//           fewest nodes the ranks fit on, where it can be; otherwise one
//           worker per group. A job whose ranks need more nodes than the
//           cluster has is left as requested (it cannot run anyway).
//   placed  Algorithm 2 (resource::split_workers): the ranks dealt round-
//           robin to N_w workers, workers to the group with the fewest ranks;
//           group g goes to the allocation's node whose task count equals the
//           group's ranks (the allocator's even spread and the groups' are
//           the same multiset), and its workers take that node's task slots
//           in id order, each slots() consecutive ones, so that a worker's
//           cores are contiguous in the node's layout (one NUMA domain when
//           it fits). The workers land in NodeAllocation.workers.
//   node score (option `granularity.task_group`, true by default; Algorithm
//           4's step 3, "avoid other groups in the node"): minus the number
//           of task groups already on the node, counting the snapshot's
//           running jobs (one group per worker group, or one per job part
//           when the job has no workers) and the jobs placed this cycle, so a
//           job's groups go to the least crowded nodes. Steps 1-2 (keep a
//           group's workers together) hold by construction: a group is one
//           node's part of the allocation.
//
// State: this cycle's groups per node rank, reset by on_session_open and
// updated by on-allocate/on-deallocate; the hooks borrow the plugin (the
// Scheduler owns it and outlives the Session). Cost per hook call: O(nodes)
// for shape (counting schedulable nodes once per cycle), O(N_t) for placed.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string_view>

#include "lib/core/status.h"
#include "lib/resource/granularity.h"
#include "lib/sched/plugin.h"

namespace hpcq::sched {

class GranularityPlugin final : public Plugin {
 public:
  static constexpr std::string_view kName = "granularity";
  static constexpr std::string_view kPolicy = "policy";
  static constexpr std::string_view kTaskGroup = "task_group";

  // kInvalidArgument for an unknown option or value (one line naming it).
  static Result<std::unique_ptr<Plugin>> create(const PluginOptions& options);

  GranularityPlugin(resource::GranularityPolicy policy, bool task_group)
      : policy_(policy), task_group_(task_group) {}

  std::string_view name() const override { return kName; }
  void on_session_open(Session& session) override;

  // Algorithm 1 for `job` on a cluster of `nodes` nodes with
  // `usable_cores` usable cores each (groups adjusted as described above);
  // nullopt when the job names no profile or the granularity is an error.
  std::optional<resource::Granularity> shape(const PendingJob& job, int nodes,
                                             int usable_cores) const;

 private:
  void count(const resource::Allocation& allocation, int sign);

  resource::GranularityPolicy policy_;
  bool task_group_;
  // This cycle: N_n and usable cores per node of the snapshot.
  int nodes_ = 0;
  int usable_cores_ = 0;
  // Node rank -> task groups on it (running and placed this cycle).
  std::map<Rank, int> groups_on_;
};

}  // namespace hpcq::sched
