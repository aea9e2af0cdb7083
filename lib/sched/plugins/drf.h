// Plugin "drf": dominant resource fairness across users, as Volcano's drf
// plugin (Ghodsi et al., "Dominant Resource Fairness", NSDI 2011). A user's
// dominant share is the largest of their running jobs' share of the cluster's
// cores, memory and GPUs; the job of the user with the lower dominant share
// goes first (equal shares: no opinion, the Session orders by submit time,
// then job id).
//
// Cluster totals: cores, memory and GPUs from the snapshot's pool (every
// node, schedulable or not, as Slurm counts configured resources). The option
// total_gpus overrides the GPU count (for pools whose nodes were imported
// without GPU discovery); when neither knows any GPU but running jobs hold
// some, the GPUs in use stand in (each GPU user's GPU share is then their
// part of the GPUs in use). A running job's use: its allocation's cores, memory bytes and GPU
// indices; where the allocation names no memory or no GPUs its request per node times its nodes
// stands in.
//
// Limitation: the order is computed once when the Session opens; jobs started
// earlier in the same cycle do not raise their user's share until the next
// cycle (the Session has no allocation event hook to follow them).
//
// Options ("drf.<name>"): total_gpus, a non-negative integer (default 0: the
// pool's count).
//
// Cost: O(running jobs + nodes + queue) per cycle; a comparison is two array
// reads. Per-cycle state lives in the hook and dies with the Session.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "lib/core/status.h"
#include "lib/sched/plugin.h"
#include "lib/sched/snapshot.h"

namespace hpcq::sched {

struct DrfResources {
  double cores = 0;
  double memory_bytes = 0;
  double gpus = 0;
};

// What one running job holds.
DrfResources drf_job_use(const RunningJob& job);
// The dominant share of each user with running jobs; users not in the map
// have 0. `total_gpus` 0: the pool's GPUs, else the GPUs running jobs hold.
std::unordered_map<std::uint32_t, double> drf_dominant_shares(const Snapshot& snapshot,
                                                              std::int64_t total_gpus);

class DrfPlugin final : public Plugin {
 public:
  static constexpr std::string_view kName = "drf";
  // kInvalidArgument naming the option for an unknown option or a bad value.
  static Result<std::unique_ptr<Plugin>> create(const PluginOptions& options);

  explicit DrfPlugin(std::int64_t total_gpus = 0) : total_gpus_(total_gpus) {}
  std::string_view name() const override { return kName; }
  void on_session_open(Session& session) override;

 private:
  std::int64_t total_gpus_;
};

}  // namespace hpcq::sched
