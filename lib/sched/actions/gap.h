// Action "gap": a migratable gap queue that fills the holes backfilling
// leaves (Polyakov & Dubenskaya, papers/004).
//
// Gap jobs are the jobs of queues with migratable = true. With this action
// configured (after "backfill": actions = ["allocate", "backfill", "gap"])
// the other actions leave them alone (Session::separate_gap_jobs), and
// backfill plans as if their cores were free now. Each cycle this action:
//   0. Mode A (mode = "a"): every gap job that has run a whole slot (slot_s)
//      is saved: Preempt{job, 0, kCheckpoint} -- dumped, requeued, restored
//      in whatever hole comes next; step 1 applies as well.
//   1. evicts: for every job that backfill reserved (Reserve{job, T}) with
//      T <= now + save_deadline_s, the gap jobs holding cores that job
//      needs at T leave them. The cores it needs are found by placing it on
//      the pool as it will be at T: the gap jobs gone, the regular jobs
//      that end by T gone, and the cores of the earlier reservations that
//      still hold at T taken (reservations in time order: backfill's own
//      plan, approximately). Mode B (the default) moves such a job to a hole
//      that lasts -- idle cores that no reservation of this cycle needs
//      before its expected end -- with Migrate{job, cores} (migrate = true,
//      the default); where there is none, or with evict = "requeue", it is
//      stopped: Preempt{job, reserved job, kCheckpoint} (evict =
//      "checkpoint", the default: dumped and requeued, restored where it
//      next starts) or kRequeue (killed, its work lost);
//   2. starts gap jobs, in job order, in any cores idle now -- including
//      cores promised to a reserved job -- except where a job reserved
//      within the save deadline will need them (it would be evicted again
//      at once) or where a migration of this cycle goes. A gap job that does
//      not fit does not stop the ones behind it.
// Running jobs that are leaving already (RunningJob::leaving: being saved)
// get no decision. A gap job being saved gives its cores back at once (CRIU
// freezes it before the dump; hpcqd's hand_over_cores, and the simulator as
// well): its memory stays taken until the dump ends, but the job it leaves
// for starts without waiting for it. So a regular job starts at its
// reserved time, whether its start was planned beyond the save deadline
// (the gap jobs left then) or moved closer (a job ended before its limit:
// they leave at once) -- papers/004's Mode B risk, a regular job delayed or
// a gap job's work lost, does not arise. The deadline still spares the
// dump's I/O from the regular job's start, and keeps new gap jobs out of
// cores needed soon. bench/gap_paper.py measures it job by job.
//
// Options: save_deadline_s = S >= 0 (default 60); evict = checkpoint |
// requeue (default checkpoint); migrate = true | false (default true);
// mode = a | b (default b); slot_s = seconds > 0 (mode A's slot, default
// 3600, the one-hour slot of the paper's estimate).
//
// Cost per cycle (R running, N nodes, V reserved jobs within the deadline,
// M migrations, W reservations before a migrating job's end, G gap jobs
// queued): O(R + V * (N + R)) for evictions (a pool copy and a placement per
// reserved job), O(W * (N + R)) more for the first migration's hole, and one
// O(N) placement per gap job tried while cores are open to them (the queue
// is not walked past the point where none is).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "lib/core/site_policy.h"
#include "lib/core/status.h"
#include "lib/sched/action.h"

namespace hpcq::sched {

struct GapOptions {
  std::int64_t save_deadline_s = 60;
  PreemptMode evict = PreemptMode::kCheckpoint;
  bool migrate = true;
  bool mode_a = false;
  std::int64_t slot_s = 3600;
};

class GapAction final : public Action {
 public:
  static constexpr std::string_view kName = "gap";

  static Result<std::unique_ptr<Action>> create(const ActionOptions& options);
  explicit GapAction(GapOptions options) : options_(options) {}

  std::string_view name() const override { return kName; }
  void on_session_open(Session& session) override { session.separate_gap_jobs(); }
  void execute(Session& session) override;
  const GapOptions& options() const { return options_; }

 private:
  GapOptions options_;
};

}  // namespace hpcq::sched
