// What a Shrink or Expand decision (decision.h) does to a running job's
// allocation, for whoever applies the decisions (the Session's working copy,
// the simulator, later hpcqd) so that they all agree.
//
// shrunk(): the allocation without its parts on `ranks`; the parts left keep
// their order. expanded(): the allocation with `added`'s parts appended. In
// both the tasks are renumbered block-wise over the parts (first_task is the
// sum of the ntasks before it), which is what an elastic application that
// restarts on its new node list sees (Charm++'s shrink/expand restarts from
// an in-memory checkpoint; ../shared/papers/001, section 2.2).
//
// Errors: kInvalidArgument when a rank to take away is not in the
// allocation, is named twice, or would leave no node; when an added rank is
// already in the allocation (or twice in `added`), or `added` is empty.
// Pure functions; safe from any thread.
#pragma once

#include <span>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "lib/resource/allocation.h"

namespace hpcq::sched {

Result<resource::Allocation> shrunk(const resource::Allocation& allocation,
                                    std::span<const Rank> ranks);
Result<resource::Allocation> expanded(const resource::Allocation& allocation,
                                      const resource::Allocation& added);
// The parts of `allocation` on `ranks` (in the allocation's order), to give
// back to a pool; ranks not in it are ignored.
resource::Allocation parts_on(const resource::Allocation& allocation, std::span<const Rank> ranks);

}  // namespace hpcq::sched
