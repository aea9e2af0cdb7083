// The site's scheduling policy as data: queues (Slurm partitions, Volcano
// queues) with their weights, limits and preemption mode, QOS levels, and
// the fair-share account tree. Loaded from hpcq.toml by the daemon, from a
// cluster file by the simulator, and borrowed by every cycle's Snapshot.
//
// Numbers of 0 in QueueLimits mean "no limit". A job whose queue is empty
// goes to `default_queue` (or, with no queues configured, to one implicit
// queue without limits). Plain values; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hpcq {

// What happens to a job of this queue when a preemptor needs its resources
// (Slurm's PreemptMode): kOff never preempted; kRequeue killed and put back
// in the queue; kCancel killed for good; kCheckpoint checkpointed and
// requeued (falls back to kRequeue where the job cannot be checkpointed).
enum class PreemptMode { kOff, kRequeue, kCancel, kCheckpoint };

const char* preempt_mode_name(PreemptMode mode);  // "off", "requeue", ...

struct QueueLimits {
  // Per queue, over all users.
  std::int64_t max_running_jobs = 0;
  std::int64_t max_cores = 0;
  std::int64_t max_nodes = 0;
  // Per user within the queue.
  std::int64_t max_running_jobs_per_user = 0;
  std::int64_t max_cores_per_user = 0;
  std::int64_t max_nodes_per_user = 0;
  // The longest time limit a job may ask for (seconds).
  std::int64_t max_time_limit_s = 0;
};

struct QueueConfig {
  std::string name;
  // Share of the cluster under proportional sharing (Volcano's queue weight):
  // a queue deserves weight / sum(weights) of the cores.
  double weight = 1.0;
  // Slurm's PriorityJobFactor: feeds the multifactor "queue" factor,
  // normalised over the queues to [0,1].
  std::int32_t priority = 0;
  // Slurm's PriorityTier: jobs of a higher tier may preempt jobs of lower
  // tiers (preemption by queue) when those queues' mode allows it.
  std::int32_t priority_tier = 0;
  PreemptMode preempt_mode = PreemptMode::kOff;
  QueueLimits limits;
  std::int64_t default_time_limit_s = 0;  // 0: the leader's default
  // A gap queue (checkpoint issue): its jobs may run in any idle cores,
  // including those reserved for a later job, and are migrated or
  // checkpointed before the reservation starts.
  bool migratable = false;
  // The nodes its jobs run on, as Slurm's partition Nodes= (a hostlist in
  // the config, expanded here); empty: every node.
  std::vector<std::string> nodes;
  // Who may submit to it, as Slurm's AllowGroups and AllowAccounts (the
  // job's account once resolved); empty: anyone. Root and admins too.
  std::vector<std::string> allow_groups;
  std::vector<std::string> allow_accounts;
};

// A Slurm QOS: a priority factor and the QOS levels it may preempt.
struct QosConfig {
  std::string name;
  std::int32_t priority = 0;
  std::vector<std::string> preempt;
};

// A node of the fair-share tree. The root account is "root" and has no
// parent; every other account names its parent.
struct AccountConfig {
  std::string name;
  std::string parent;  // empty: "root"
  double shares = 1.0;
};

// A user's association with an account (Slurm's user association).
struct UserShare {
  std::uint32_t uid = 0;
  std::string account;
  double shares = 1.0;
};

struct SitePolicy {
  std::vector<QueueConfig> queues;
  std::string default_queue;  // empty with queues: the first one
  std::vector<QosConfig> qos;
  std::vector<AccountConfig> accounts;
  std::vector<UserShare> users;
  // [licenses]: cluster-wide counts of each license (Slurm's Licenses=),
  // what a job's -L/--licenses takes while it runs.
  std::map<std::string, int> licenses;

  // The queue a job of queue `name` runs in: `name`, or the default queue
  // for an empty name; nullptr for an unknown name or no queues at all.
  const QueueConfig* find_queue(const std::string& name) const;
  const QosConfig* find_qos(const std::string& name) const;
};

}  // namespace hpcq
