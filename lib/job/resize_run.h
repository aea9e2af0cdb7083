// A resize of a running elastic job in flight and what its answer makes of
// the job's allocation: the protocol's transitions, pure (no I/O, no clock).
//
// A shrink is asked of the application at once (notice_sent); an expansion
// first launches the job on the added nodes and tells the application once
// every one has started (all_added_started). The application's answer
// through the job's first node (answer_is_current, on_answer), the deadline
// (on_deadline), an added node that cannot start its part
// (on_added_part_failed) or the job's end (on_run_end) settle it: the
// allocation asked for stands, the parts a shrink let go are taken away, or
// an expansion is undone. A node lost under an elastic job shrinks it at
// once (forced: the application is only told).
//
// The caller (hpcqd's Resizes room) computes the allocations (lib/sched's
// shrunk/expanded), holds the pool, sends the messages and kills parts, as
// the results say.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/job/records.h"
#include "lib/resource/allocation.h"

namespace hpcq::job {

// The answer is awaited this long past the application's own timeout (the
// agent's timer), for the messages' way back.
inline constexpr TimeUs kResizeMarginUs = 5 * kUsPerSecond;

struct ResizeRun {
  std::uint32_t seq = 0;        // numbers the resizes of one run of the job
  ResizeRecord record;          // time, from, to, kind, by; the outcome once settled
  resource::Allocation before;  // the allocation when it was asked
  resource::Allocation after;   // the allocation asked for
  std::set<Rank> added;         // expand: launched, awaiting STARTED before the notice
  bool notified = false;        // the application has been told (through the first node)
  bool forced = false;          // a node died: the allocation shrank already; tell only
  TimeUs deadline = 0;          // past it: on_deadline
};

// A resize from `before` to `after`, numbered `seq`. An expansion's
// deadline covers the new parts' start (`timeout_us` is the application's).
ResizeRun begin_resize_run(std::uint32_t seq, resource::Allocation before,
                           resource::Allocation after, ResizeKind kind, ResizeBy by, TimeUs now,
                           TimeUs timeout_us);
// The notice went to the application: its answer is awaited from now.
void notice_sent(ResizeRun& run, TimeUs now, TimeUs timeout_us);
// An expansion whose added nodes have all started their parts is told to
// the application now.
bool all_added_started(const ResizeRun& run, const std::set<Rank>& started_on);
// An answer is this resize's: told already, from the first node it was
// told through, of this run of the job and this resize.
bool answer_is_current(const ResizeRun& run, Rank from, std::uint32_t seq, std::uint32_t attempt,
                       int requeue_count);

// What settles a resize, and what it makes of the allocation.
struct ResizeEnd {
  enum class Step {
    kKeep,      // the allocation stays as it is now (`after`, or `before` for a declined shrink)
    kTakeAway,  // an acknowledged shrink: `after` stands
    kUndo,      // an expansion that did not take: `before` again
  };
  Step step = Step::kKeep;
  ResizeOutcome outcome = ResizeOutcome::kFailed;
  std::string reason;
  // The parts taken away (killed; their cores return as each ends): for
  // kTakeAway the nodes `before` has and `after` has not, for kUndo the
  // added ones.
  std::vector<Rank> removed;
  // The job event the allocation's change is stored as ("shrink",
  // "expand_undone", "expand_failed"); empty for kKeep.
  std::string event;
  bool operator==(const ResizeEnd&) const = default;
};

// The application's answer. A timeout keeps an expansion's nodes (the nodes
// are the job's either way) and a shrink's (nothing changes).
ResizeEnd on_answer(const ResizeRun& run, ResizeOutcome outcome, const std::string& reason);
// The deadline passed: an expansion never told (its nodes did not all
// start) is undone; a told resize that got no answer timed out.
ResizeEnd on_deadline(const ResizeRun& run);
// An added node could not start its part (`why` names it), or went down,
// before the application was told: the expansion is undone. Past the
// notice the nodes are the job's: the caller handles them as any part.
bool undone_by_added_node(const ResizeRun& run, Rank rank);
ResizeEnd on_added_node_failed(const ResizeRun& run, const std::string& why);
// The job's run ended first.
ResizeEnd on_run_end();

// The record of a settled resize: outcome, reason, when, the agent's
// measure of the answer, and the job's nodes after it.
ResizeRecord settled_record(ResizeRun run, const ResizeEnd& end, TimeUs now, double answer_seconds,
                            std::vector<std::string> nodes_after);

}  // namespace hpcq::job
