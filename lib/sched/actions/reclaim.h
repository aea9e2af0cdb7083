// Action "reclaim": Volcano's reclaim. A queue below its deserved share
// takes cores back from queues above theirs, by preempting whole jobs.
//
// Needs the "proportion" plugin's shares (Session::queue_shares(); without
// them the action does nothing). For each starving pending job in job order
// (not served earlier this cycle, ready, does not fit now, would fit on the
// idle cluster) whose queue's allocated cores plus the job's stay within
// its deserved share: candidate victims are the running jobs, not already
// preempted this cycle, of the other queues that are above their deserved
// share (allocated less what this action already took from them) and whose
// preempt_mode is not "off"; youngest first (latest start, then highest
// id). Victims are chosen as in "preempt" (preempt.h: the fewest that let
// the job fit, on a trial copy honouring predicates and reservations), but a
// queue gives up victims only while it stays above its deserved share
// before each victim. Emits Preempt{victim, job, mode} for each and
// Reserve{job, now}. Whole jobs only, each at most once per cycle.
//
// Options: max_reclaimers = N >= 1 (default 8): at most N jobs search for
// victims per cycle.
//
// Cost per cycle (Q queued, R running, N nodes, P = max_reclaimers): O(Q)
// cheap checks and an O(N) placement per starving job up to P of them, then
// per reclaimer O(R log R + queues) to rank candidates and O(V * N) for V
// victims tried, plus an O(N) pool copy.
#pragma once

#include <memory>
#include <string_view>

#include "lib/core/status.h"
#include "lib/sched/action.h"

namespace hpcq::sched {

struct ReclaimOptions {
  int max_reclaimers = 8;
};

class ReclaimAction final : public Action {
 public:
  static constexpr std::string_view kName = "reclaim";

  static Result<std::unique_ptr<Action>> create(const ActionOptions& options);

  explicit ReclaimAction(ReclaimOptions options = {}) : options_(options) {}
  std::string_view name() const override { return kName; }
  void execute(Session& session) override;

 private:
  ReclaimOptions options_;
};

}  // namespace hpcq::sched
