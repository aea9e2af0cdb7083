// Action "gap": a migratable gap queue that fills the holes backfilling
// leaves (Polyakov & Dubenskaya, papers/004, Mode B).
//
// Gap jobs are the jobs of queues with migratable = true. With this action
// configured (after "backfill": actions = ["allocate", "backfill", "gap"])
// the other actions leave them alone (Session::separate_gap_jobs), and
// backfill plans as if their cores were free now. Each cycle this action:
//   1. evicts: for every job that backfill reserved (Reserve{job, T}) with
//      T <= now + save_deadline_s, the gap jobs holding cores that job
//      needs at T are stopped -- Preempt{gap job, reserved job, kCheckpoint}
//      (evict = "checkpoint", default: dumped and requeued, restored where
//      it next starts, which is how it migrates to another hole) or
//      kRequeue (evict = "requeue": killed, its work lost). The cores it
//      needs are found by placing it on the pool as it will be at T: the
//      gap jobs gone and the regular jobs that end by T gone;
//   2. starts gap jobs, in job order, in any cores idle now -- including
//      cores promised to a reserved job -- except where a job reserved
//      within the save deadline will need them (it would be evicted again
//      at once). A gap job that does not fit does not stop the ones behind
//      it.
// So a regular job starts at its reserved time or as soon as the gap jobs
// in its way have been saved: the save deadline must cover a checkpoint
// (bench/checkpoint_cost.py) for it never to start later because of them.
//
// Options: save_deadline_s = S >= 0 (default 60), evict = checkpoint |
// requeue (default checkpoint).
//
// Cost per cycle (R running, N nodes, V reserved jobs within the deadline,
// G gap jobs queued): O(R + V * (N + R)) for evictions (a pool copy and a
// placement per reserved job) and one O(N) placement per gap job.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "lib/core/status.h"
#include "lib/sched/action.h"
#include "lib/sched/site_policy.h"

namespace hpcq::sched {

struct GapOptions {
  std::int64_t save_deadline_s = 60;
  PreemptMode evict = PreemptMode::kCheckpoint;
};

class GapAction final : public Action {
 public:
  static constexpr std::string_view kName = "gap";

  static Result<std::unique_ptr<Action>> create(const ActionOptions& options);
  explicit GapAction(GapOptions options) : options_(options) {}

  std::string_view name() const override { return kName; }
  void on_session_open(Session& session) override { session.separate_gap_jobs(); }
  void execute(Session& session) override;

 private:
  GapOptions options_;
};

}  // namespace hpcq::sched
