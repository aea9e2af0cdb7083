// What a scheduling cycle decides; the daemon applies these in order.
//
// Start: run the job now on exactly this allocation (the cores are free in
// the snapshot and no two Starts of one cycle share a core). Reserve: the job
// is promised resources at `time` (backfill must not delay it).
// Preempt: stop the running job `job` so that `for_job` can start (in
// this or a later cycle); `mode` says whether it is requeued, cancelled or
// checkpointed. A preemption takes the whole job, never part of it; the
// Start that needs its cores comes in a later cycle, once they are free.
// Shrink: take the running job's parts on `nodes` (ranks) away; it keeps
// running on the rest, in their order, its tasks renumbered block-wise
// (resize.h). Expand: add `allocation` (nodes the job does not have yet) to
// the running job; its tasks are numbered after the job's current ones.
// Both come from the "elastic" action (actions/elastic.h) and only for jobs
// with a node range that are elastic; a later Start of the same cycle may use
// what a Shrink freed, so they must be applied in order.
// Migrate: move the running job `job` (a gap job: actions/gap.h) to
// `allocation`, idle cores that no reservation needs before its expected end
// (a hole that lasts): checkpointed, then restored there. Where there is no
// such hole the gap action checkpoints and requeues instead (a Preempt with
// mode kCheckpoint, `for_job` the job that needs its cores, or 0 for a
// Mode A save at the end of its slot).
//
// Plain values; not thread-safe.
#pragma once

#include <variant>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/site_policy.h"
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

struct Preempt {
  JobId job = 0;      // the running job to stop
  JobId for_job = 0;  // the pending job that needs its resources
  PreemptMode mode = PreemptMode::kRequeue;
};

struct Shrink {
  JobId job = 0;
  std::vector<Rank> nodes;  // the ranks taken away
};

struct Expand {
  JobId job = 0;
  resource::Allocation allocation;  // the nodes added
};

struct Migrate {
  JobId job = 0;
  resource::Allocation allocation;  // where it goes (cores idle now)
};

using Decision = std::variant<Start, Reserve, Preempt, Shrink, Expand, Migrate>;

struct Decisions {
  std::vector<Decision> decisions;
};

}  // namespace hpcq::sched
