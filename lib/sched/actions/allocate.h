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
// Each job is placed with its own Statement, so a multi-node job starts on
// all its nodes or on none.
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
