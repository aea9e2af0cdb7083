// Action "enqueue": Volcano's enqueue. Decides, before any placement, which
// pending jobs are considered this cycle: in job order, a job is admitted
// when every enqueueable hook accepts it (the "limits" plugin: its queue and
// user stay within the limits counting the jobs admitted before it;
// "proportion": its queue stays within its deserved share counting them),
// and the on-enqueue hooks then count it. A job not admitted is held
// (Session::hold): it is not ready for the rest of the cycle, so allocate,
// backfill, preempt and reclaim skip it -- in particular backfill promises
// it no reservation and preempt evicts nobody for it, which the per-job
// job-ready check alone would allow (it does not count jobs that have not
// started). With no enqueueable hooks (no site policy, or neither plugin)
// every job is admitted.
//
// List it first: actions = ["enqueue", "allocate", "backfill"].
//
// Cost per cycle: O(Q * H) for Q queued jobs and H hooks.
#pragma once

#include <string_view>

#include "lib/sched/action.h"

namespace hpcq::sched {

class EnqueueAction final : public Action {
 public:
  static constexpr std::string_view kName = "enqueue";
  std::string_view name() const override { return kName; }
  void execute(Session& session) override;
};

}  // namespace hpcq::sched
