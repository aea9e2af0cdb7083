// Plugin "limits": the queue limits of the SitePolicy (Slurm's partition
// and association limits, Volcano's queue capability): per queue and per
// user within the queue, the running jobs, cores and nodes, and the longest
// time limit a job may ask for (QueueLimits; 0 means no limit).
//
// Counting: the snapshot's running jobs of the queue (by queue and uid) plus
// the jobs started earlier in this cycle (on-allocate; a discarded Statement
// gives them back). Cores are an allocation's cores; nodes are each job's
// node count, summed over jobs. A multi-node job counts whole: it starts
// only if all of it fits under every limit.
//
// Hooks:
//   job ready    false for a job naming an unknown queue (never started; the
//                daemon rejects those at submit), a time limit above
//                max_time_limit_s (a limit <= 0 asks for forever), or one
//                more job / its cores / its requested node count (at least
//                1) above a limit;
//   allocatable  false when the placement's node count goes above a node
//                limit (a job with nodes = 0 learns its count only here);
//   enqueueable  as job ready, also counting the jobs "enqueue" already
//                admitted this cycle.
// Without a site policy or with no queues it registers nothing.
//
// State: this cycle's counters, reset by on_session_open; the hooks borrow
// the plugin (the Scheduler owns it and outlives the Session). Cost: O(R)
// at session open (R running jobs), O(log Q) per hook call.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "lib/sched/plugin.h"

namespace hpcq::sched {

class LimitsPlugin final : public Plugin {
 public:
  static constexpr std::string_view kName = "limits";
  std::string_view name() const override { return kName; }
  void on_session_open(Session& session) override;

 private:
  struct Usage {
    std::int64_t jobs = 0;
    std::int64_t cores = 0;
    std::int64_t nodes = 0;
  };
  struct Counters {
    std::map<std::string, Usage> queue;
    std::map<std::pair<std::string, std::uint32_t>, Usage> user;
  };

  // Whether one more job with these cores and nodes stays within `config`'s
  // limits over the counts in `counters` (plus `extra`, when given).
  bool fits(const QueueConfig& config, const PendingJob& job, std::int64_t cores,
            std::int64_t nodes, const Counters& counters, const Counters* extra) const;
  static void add(Counters& counters, const std::string& queue, std::uint32_t uid, Usage usage,
                  int sign);

  const SitePolicy* site_ = nullptr;
  Counters running_;   // at the snapshot + started this cycle
  Counters admitted_;  // admitted by "enqueue" this cycle
};

}  // namespace hpcq::sched
