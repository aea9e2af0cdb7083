// Action "elastic": the priority-based elastic policy of Bhosale, Kale and
// Kokkila-Schumacher (../shared/papers/001, section 3.2.1, figures 2 and 3)
// over jobs with a node range (PendingJob.max_nodes; hpcq issue 7).
//
// Standing: higher PendingJob/RunningJob.priority first, then earlier submit
// time, then lower job id (the paper's "equal priority: the earlier
// submission first", with the project's tie-break). The plugins' job order
// is not consulted: the policy is defined on the user's priority.
//
// One walk per cycle over the ready pending jobs and the running elastic
// jobs together, in standing order (the paper's completeJob walks "all
// running and queued jobs" this way; its newJob is the same step for one
// job):
//   - A pending job starts on what is free now, at the largest size of its
//     range that fits (at least its minimum; a job without a range as
//     requested), without shrinking anyone -- even below its maximum.
//   - Otherwise it is admitted by shrinking running elastic jobs of lower
//     or equal priority (the paper's loop breaks only at a strictly higher
//     priority), lowest standing first (equal priority: the newest first,
//     the oldest last), each down to its minimum at most, until the job
//     would fit at its maximum (the paper's second pass frees "enough to
//     run the new job at its maximum replicas"). Then it starts at the
//     largest size that fits; nodes freed but not used by it are left to
//     their job (no shrink for them). A gang: if it would not fit even at
//     its minimum, nobody is shrunk and it waits.
//   - A running elastic job below its maximum is expanded on free nodes it
//     does not have yet, up to its maximum.
//   No job is resized (shrunk or expanded) when its last resize or its
//   start was less than rescale_gap ago, or twice in one cycle; a job
//   without a range or without `elastic` is never resized (moldable:
//   its size is picked at start and then fixed). A pending job that does not
//   fit is passed over: later jobs may start out of order (the paper's
//   "out-of-order allocations", no reservation; list "backfill" after this
//   action for reservations).
//
// A job it starts is held (Session::hold) for the rest of the cycle, so
// that "allocate" listed after it does not start it again.
//
// Decisions: Shrink{victim, ranks} (a victim's last nodes first, so its
// first node stays) before the Start that needs them, Expand{job, nodes
// added}. All are applied to the Session's working copy at once
// (Session::shrink/expand, Statement), so later actions ("allocate",
// "backfill") see the resized jobs: backfill releases a running job's
// current allocation (Session::allocation_of) at its end estimate. A
// shrunk job's end estimate is not recomputed within the cycle (the
// snapshot's is used; the caller recomputes it for the next one).
//
// Differences from the paper, on purpose: its pseudo-code never shrinks the
// highest-priority running job (`index > 0`) and keeps one slot free for
// the MPI launcher pod (`freeSlots - 1`); neither is done here. Its newJob
// hands free slots to an arriving job before expanding running ones; here a
// running job whose rescale gap ended since the last cycle is offered free
// nodes in its standing order, as at a job's end.
//
// Options: rescale_gap_s = N >= 0 seconds (default 60; 0: any cycle).
// Anything else fails Scheduler::create().
//
// Cost per cycle (Q queued, R running, N nodes, W = the widest range):
// O((Q + R) log(Q + R)) to order, then per job up to W placements of O(N)
// when a size does not fit; a job admitted by shrinking adds an O(N) pool
// copy and one O(N) placement per node taken back.
#pragma once

#include <memory>
#include <string_view>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "lib/sched/action.h"

namespace hpcq::sched {

struct ElasticOptions {
  TimeUs rescale_gap = 60 * kUsPerSecond;
};

class ElasticAction final : public Action {
 public:
  static constexpr std::string_view kName = "elastic";
  static constexpr std::string_view kRescaleGap = "rescale_gap_s";

  // From configuration options (see above).
  static Result<std::unique_ptr<Action>> create(const ActionOptions& options);

  explicit ElasticAction(ElasticOptions options = {}) : options_(options) {}
  std::string_view name() const override { return kName; }
  void execute(Session& session) override;

 private:
  ElasticOptions options_;
};

}  // namespace hpcq::sched
