// What a scheduling cycle decides; the daemon applies these in order.
//
// Start: run the job now on exactly this allocation (the cores are free in
// the snapshot and no two Starts of one cycle share a core). Reserve: the job
// is promised resources at `time` (backfill must not delay it).
// Preempt: stop the running job `job` so that `for_job` can start (in
// this or a later cycle); `mode` says whether it is requeued, cancelled or
// checkpointed. A preemption takes the whole job, never part of it; the
// Start that needs its cores comes in a later cycle, once they are free.
// Later policies add Shrink, Expand and Checkpoint alternatives.
//
// Plain values; not thread-safe.
#pragma once

#include <variant>
#include <vector>

#include "lib/core/ids.h"
#include "lib/resource/allocation.h"
#include "lib/sched/site_policy.h"

namespace hpcq::sched {

struct Start {
  JobId job = 0;
  resource::Allocation allocation;
};

struct Reserve {
  JobId job = 0;
  TimeUs time = 0;
};

struct Preempt {
  JobId job = 0;      // the running job to stop
  JobId for_job = 0;  // the pending job that needs its resources
  PreemptMode mode = PreemptMode::kRequeue;
};

using Decision = std::variant<Start, Reserve, Preempt>;

struct Decisions {
  std::vector<Decision> decisions;
};

}  // namespace hpcq::sched
