// A resize's transitions as scenarios: an elastic job on nodes 1-3 is
// shrunk to 1-2 or expanded to 1-4; the answer (or its absence) settles it.
#include "lib/job/resize_run.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hpcq::job {
namespace {

using Step = ResizeEnd::Step;
constexpr TimeUs kNow = 1000 * kUsPerSecond;
constexpr TimeUs kTimeout = 30 * kUsPerSecond;

resource::Allocation on(std::vector<Rank> ranks) {
  resource::Allocation allocation;
  for (Rank r : ranks) {
    resource::NodeAllocation part;
    part.rank = r;
    part.node = "n" + std::to_string(r);
    allocation.nodes.push_back(part);
  }
  return allocation;
}

ResizeRun shrink() {
  return begin_resize_run(1, on({1, 2, 3}), on({1, 2}), ResizeKind::kShrink, ResizeBy::kUser, kNow,
                          kTimeout);
}
ResizeRun expand() {
  return begin_resize_run(2, on({1, 2, 3}), on({1, 2, 3, 4}), ResizeKind::kExpand,
                          ResizeBy::kScheduler, kNow, kTimeout);
}

TEST(ResizeRun, BeginRecordsWhatIsAsked) {
  ResizeRun run = expand();
  EXPECT_EQ(run.seq, 2u);
  EXPECT_EQ(run.record.from, 3);
  EXPECT_EQ(run.record.to, 4);
  EXPECT_EQ(run.record.kind, ResizeKind::kExpand);
  EXPECT_EQ(run.record.by, ResizeBy::kScheduler);
  EXPECT_EQ(run.record.outcome, ResizeOutcome::kNone);
  EXPECT_EQ(run.added, std::set<Rank>{4});
  EXPECT_FALSE(run.notified);
  // The expansion's deadline covers the new parts' start.
  EXPECT_EQ(run.deadline, kNow + kTimeout + kResizeMarginUs);
  EXPECT_TRUE(shrink().added.empty());
}

TEST(ResizeRun, AnExpansionIsToldOnceEveryAddedNodeHasStarted) {
  ResizeRun run = expand();
  EXPECT_FALSE(all_added_started(run, {1, 2, 3}));
  EXPECT_TRUE(all_added_started(run, {1, 2, 3, 4}));
  notice_sent(run, kNow + kUsPerSecond, kTimeout);
  EXPECT_EQ(run.deadline, kNow + kUsPerSecond + kTimeout + kResizeMarginUs);
  EXPECT_FALSE(all_added_started(run, {1, 2, 3, 4}));  // told once
  EXPECT_FALSE(all_added_started(shrink(), {1, 2, 3}));
}

TEST(ResizeRun, OnlyTheCurrentAnswerCounts) {
  ResizeRun run = shrink();
  EXPECT_FALSE(answer_is_current(run, 1, 1, 0, 0));  // not told yet
  notice_sent(run, kNow, kTimeout);
  EXPECT_TRUE(answer_is_current(run, 1, 1, 0, 0));
  EXPECT_FALSE(answer_is_current(run, 2, 1, 0, 0));  // not the first node
  EXPECT_FALSE(answer_is_current(run, 1, 2, 0, 0));  // another resize
  EXPECT_FALSE(answer_is_current(run, 1, 1, 0, 1));  // an earlier run of the job
}

struct Scenario {
  const char* name;
  ResizeRun run;
  bool forced;
  // How it is settled: an answer (with its outcome), or one of the others.
  enum class By { kAnswer, kDeadline, kAddedNodeFailed, kRunEnd } by;
  ResizeOutcome answer = ResizeOutcome::kNone;
  // Expected:
  Step step = Step::kKeep;
  ResizeOutcome outcome = ResizeOutcome::kNone;
  std::vector<Rank> removed = {};
  std::string event = {};
};

TEST(ResizeRun, EachWayAResizeIsSettled) {
  using By = Scenario::By;
  using O = ResizeOutcome;
  const std::vector<Scenario> scenarios = {
      {"shrink acknowledged: node 3 is taken away",
       shrink(),
       false,
       By::kAnswer,
       O::kAcknowledged,
       Step::kTakeAway,
       O::kAcknowledged,
       {3},
       "shrink"},
      {"shrink declined: nothing changes", shrink(), false, By::kAnswer, O::kDeclined, Step::kKeep,
       O::kDeclined},
      {"shrink timed out in the application: nothing changes", shrink(), false, By::kAnswer,
       O::kTimedOut, Step::kKeep, O::kTimedOut},
      {"shrink not answered: timed out, nothing changes", shrink(), false, By::kDeadline, O::kNone,
       Step::kKeep, O::kTimedOut},
      {"expansion acknowledged: node 4 stays", expand(), false, By::kAnswer, O::kAcknowledged,
       Step::kKeep, O::kAcknowledged},
      {"expansion declined: undone",
       expand(),
       false,
       By::kAnswer,
       O::kDeclined,
       Step::kUndo,
       O::kDeclined,
       {4},
       "expand_undone"},
      {"expansion the application could not take: undone",
       expand(),
       false,
       By::kAnswer,
       O::kFailed,
       Step::kUndo,
       O::kFailed,
       {4},
       "expand_undone"},
      {"expansion timed out in the application: its nodes stay", expand(), false, By::kAnswer,
       O::kTimedOut, Step::kKeep, O::kTimedOut},
      {"expansion not answered: its nodes stay", expand(), false, By::kDeadline, O::kNone,
       Step::kKeep, O::kTimedOut},
      {"expansion whose node did not start in time: undone",
       expand(),
       false,
       By::kDeadline,
       O::kNone,
       Step::kUndo,
       O::kFailed,
       {4},
       "expand_undone"},
      {"expansion whose node failed to start: undone",
       expand(),
       false,
       By::kAddedNodeFailed,
       O::kNone,
       Step::kUndo,
       O::kFailed,
       {4},
       "expand_failed"},
      {"a node lost (forced shrink), acknowledged: nothing more", shrink(), true, By::kAnswer,
       O::kAcknowledged, Step::kKeep, O::kAcknowledged},
      {"the job ended first", expand(), false, By::kRunEnd, O::kNone, Step::kKeep, O::kFailed},
  };
  for (Scenario s : scenarios) {
    SCOPED_TRACE(s.name);
    s.run.forced = s.forced;
    // Told, except an expansion settled before its nodes all started.
    const bool told =
        !(s.by == By::kAddedNodeFailed || (s.by == By::kDeadline && s.step == Step::kUndo));
    if (told) notice_sent(s.run, kNow, kTimeout);
    ResizeEnd end;
    switch (s.by) {
      case By::kAnswer: end = on_answer(s.run, s.answer, "said so"); break;
      case By::kDeadline: end = on_deadline(s.run); break;
      case By::kAddedNodeFailed:
        ASSERT_TRUE(undone_by_added_node(s.run, 4));
        end = on_added_node_failed(s.run, "n4: no such file");
        break;
      case By::kRunEnd: end = on_run_end(); break;
    }
    EXPECT_EQ(end.step, s.step);
    EXPECT_EQ(end.outcome, s.outcome);
    EXPECT_EQ(end.removed, s.removed);
    EXPECT_EQ(end.event, s.event);
    EXPECT_FALSE(end.reason.empty());
    const ResizeRecord record =
        settled_record(s.run, end, kNow + 2 * kUsPerSecond, 0.25, {"n1", "n2"});
    EXPECT_EQ(record.outcome, s.outcome);
    EXPECT_EQ(record.answered_us, kNow + 2 * kUsPerSecond);
    EXPECT_EQ(record.nodes, (std::vector<std::string>{"n1", "n2"}));
    EXPECT_EQ(record.from, 3);
  }
  // Past the notice an added node is the job's like any other.
  ResizeRun told = expand();
  notice_sent(told, kNow, kTimeout);
  EXPECT_FALSE(undone_by_added_node(told, 4));
  EXPECT_FALSE(undone_by_added_node(expand(), 2));
}

}  // namespace
}  // namespace hpcq::job
