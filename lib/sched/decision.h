// What a scheduling cycle decides; the daemon applies these in order.
//
// Start: run the job now on exactly this allocation (the cores are free in
// the snapshot and no two Starts of one cycle share a core). Reserve: the job
// is promised resources at `time` (backfill must not delay it).
// Later policies add Shrink, Expand, Checkpoint and Preempt alternatives.
//
// Plain values; not thread-safe.
#pragma once

#include <variant>
#include <vector>

#include "lib/core/ids.h"
#include "lib/resource/allocation.h"

namespace hpcq::sched {

struct Start {
  JobId job = 0;
  resource::Allocation allocation;
};

struct Reserve {
  JobId job = 0;
  TimeUs time = 0;
};

using Decision = std::variant<Start, Reserve>;

struct Decisions {
  std::vector<Decision> decisions;
};

}  // namespace hpcq::sched
