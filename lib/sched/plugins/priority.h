// Plugin "priority": Slurm's priority/multifactor. Each pending job gets
//   priority = w_age * age + w_size * size + w_fairshare * fairshare
//            + w_queue * queue + w_qos * qos + job.priority
// with every factor in [0, 1]:
//   age       min(1, (now - submit) / max_age)  (Slurm's PriorityMaxAge)
//   size      cores asked / cores in the pool; 1 - that with favor_small
//             (Slurm's PriorityFavorSmall)
//   fairshare the classic fair-share factor of the job's association
//             (fairshare.h)
//   queue     the queue's priority / the highest queue priority (Slurm's
//             PriorityJobFactor of the partition); 0 without queues
//   qos       the QOS's priority / the highest QOS priority; 0 without QOS
// PendingJob.priority is added last as a plain offset (the user's --priority,
// Slurm's nice with the sign turned: larger runs sooner), so one unit of it
// weighs as one unit of weight.
//
// Job order: higher priority first; equal priorities give no opinion (the
// Session then orders by submit time, then job id).
//
// Options ("priority.<name>" in SchedulerConfig.options), each rejected with
// kInvalidArgument and a line naming it:
//   weight_age        non-negative integer, default 1000
//   weight_size       non-negative integer, default 0 (job size is a site's
//                     choice: off unless asked for, as in Slurm)
//   weight_fairshare  non-negative integer, default 10000 (fair-share
//                     dominates, as most Slurm sites configure it)
//   weight_queue      non-negative integer, default 1000
//   weight_qos        non-negative integer, default 1000
//   max_age           duration: seconds, or a number with s, m, h or d;
//                     > 0; default 7d (Slurm's default PriorityMaxAge)
//   favor_small       true or false, default false
//
// Cost: on_session_open computes every queued job's factors once (the
// fair-share tree once, O(queue + accounts + associations)); a comparison is
// two array reads. Plugin state lives in the hooks for one cycle.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "lib/core/status.h"
#include "lib/sched/fairshare.h"
#include "lib/sched/plugin.h"
#include "lib/sched/snapshot.h"

namespace hpcq::sched {

struct MultifactorWeights {
  std::uint32_t age = 1000;
  std::uint32_t size = 0;
  std::uint32_t fairshare = 10000;
  std::uint32_t queue = 1000;
  std::uint32_t qos = 1000;
  std::int64_t max_age_s = 7 * 24 * 3600;
  bool favor_small = false;
};

// One job's factors, each in [0, 1] (what `hpcq queue` may show beside the
// priority, as Slurm's sprio).
struct MultifactorFactors {
  double age = 0;
  double size = 0;
  double fairshare = 0;
  double queue = 0;
  double qos = 0;
};

// The multifactor priority of the jobs of one snapshot. Computes the
// snapshot-wide parts (pool cores, highest queue and QOS priorities) once:
// O(nodes + queues + QOS) to build, O(log associations) per job.
// Borrows the snapshot and the tree (either may not change while in use);
// a null tree gives every job a fair-share factor of 1.
class MultifactorPriority {
 public:
  MultifactorPriority(const Snapshot& snapshot, const MultifactorWeights& weights,
                      const FairShareTree* fairshare);

  MultifactorFactors factors(const PendingJob& job) const;
  double priority(const PendingJob& job) const;

 private:
  const Snapshot& snapshot_;
  MultifactorWeights weights_;
  const FairShareTree* fairshare_;
  double pool_cores_ = 0;
  double max_queue_priority_ = 0;
  double max_qos_priority_ = 0;
};

// One job's priority: builds a MultifactorPriority (O(nodes + queues) per
// call); to rank many jobs build the class once.
double multifactor_priority(const PendingJob& job, const Snapshot& snapshot,
                            const MultifactorWeights& weights, const FairShareTree* fairshare);

// Parses the options above; kInvalidArgument naming the first bad one.
Result<MultifactorWeights> parse_multifactor_options(const PluginOptions& options);

class PriorityPlugin final : public Plugin {
 public:
  static constexpr std::string_view kName = "priority";
  static Result<std::unique_ptr<Plugin>> create(const PluginOptions& options);

  explicit PriorityPlugin(MultifactorWeights weights) : weights_(weights) {}
  std::string_view name() const override { return kName; }
  void on_session_open(Session& session) override;
  const MultifactorWeights& weights() const { return weights_; }

 private:
  MultifactorWeights weights_;
};

}  // namespace hpcq::sched
