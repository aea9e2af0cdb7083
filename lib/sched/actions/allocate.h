// Action "allocate": start pending jobs in job order while they fit.
//
// Strict order: the first job that does not fit now stops the walk (nothing
// jumps ahead of it; that is the later "backfill" action's job), which keeps
// a cycle over a long queue on a full cluster at one placement attempt. One
// exception: a job that would not fit even on the idle cluster (more cores
// than the schedulable nodes have, a node count larger than the cluster) is
// passed over, since waiting for running jobs cannot help it and it would
// otherwise block the queue until the nodes change.
//
// Jobs that are not ready this cycle (Session::job_ready: held by
// "enqueue", over a queue limit or a proportional share) are passed over
// too: they cannot start whatever ends. Advance reservations and the
// plugins' allocatable hooks apply through Session::place().
//
// Each job is placed with its own Statement, so a multi-node job starts on
// all its nodes or on none.
//
// Cost per cycle (Q queued, N nodes): O(Q) job-ready checks plus one
// O(N) placement per job tried; on a full cluster one placement in all.
#pragma once

#include <string_view>

#include "lib/sched/action.h"

namespace hpcq::sched {

class AllocateAction final : public Action {
 public:
  static constexpr std::string_view kName = "allocate";
  std::string_view name() const override { return kName; }
  void execute(Session& session) override;
};

}  // namespace hpcq::sched
