#include "agent/part_table.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>

namespace hpcq::agent {
namespace {

constexpr JobId kJob = 7;

overlay::Launch launch_of(std::uint32_t attempt, std::uint32_t part = 0, std::uint32_t step = 0) {
  overlay::Launch launch;
  launch.set_job_id(kJob);
  launch.set_attempt(attempt);
  launch.set_part(part);
  launch.set_step(step);
  return launch;
}

overlay::Kill kill_of(std::uint32_t attempt, std::uint32_t step = 0, bool only_part = false,
                      std::uint32_t part = 0) {
  overlay::Kill kill;
  kill.set_job_id(kJob);
  kill.set_attempt(attempt);
  kill.set_step(step);
  kill.set_only_part(only_part);
  kill.set_part(part);
  return kill;
}

// Where the table's parts get to, from the agent's calls.
void running(PartTable& t, std::uint32_t attempt = 1, std::uint32_t part = 0) {
  t.starting(launch_of(attempt, part), {});
  ASSERT_TRUE(t.started(kJob, 0));
}
void starting(PartTable& t) { t.starting(launch_of(1), {}); }
void in_prolog(PartTable& t) { t.start_prolog(launch_of(1), {}); }
void restoring(PartTable& t) { t.restoring(launch_of(1), {}, "/ckpt/part-0"); }
void held(PartTable& t) {
  t.epilog_began();
  ASSERT_EQ(t.launch(launch_of(1)), PartTable::Launch::kHold);
}
void ended(PartTable& t) {
  running(t);
  ASSERT_TRUE(t.ended(kJob));
}

std::optional<PartState> state(const PartTable& t) {
  const Part* part = t.find(kJob);
  return part ? std::optional(part->state) : std::nullopt;
}

struct LaunchCase {
  const char* name;
  std::function<void(PartTable&)> before;
  overlay::Launch launch;
  PartTable::Launch decision;
  std::optional<PartState> after;  // nullopt: not in the table
};

TEST(PartTable, LaunchOfAPart) {
  using L = PartTable::Launch;
  using S = PartState;
  const LaunchCase cases[] = {
      {"new", [](PartTable&) {}, launch_of(1), L::kStart, std::nullopt},
      {"repeat of a running part", [](PartTable& t) { running(t); }, launch_of(1),
       L::kReportStarted, S::kRunning},
      {"repeat while its tasks start", starting, launch_of(1), L::kIgnore, S::kStarting},
      {"repeat in its prolog", in_prolog, launch_of(1), L::kIgnore, S::kInProlog},
      {"repeat while restoring", restoring, launch_of(1), L::kIgnore, S::kRestoring},
      {"repeat while held", held, launch_of(1), L::kIgnore, S::kHeld},
      {"a new part of the attempt while the earlier one ends",
       [](PartTable& t) { running(t, 1, 0); }, launch_of(1, 1), L::kRefuse, S::kRunning},
      {"another attempt while an older runs", [](PartTable& t) { running(t, 1); }, launch_of(2),
       L::kIgnore, S::kRunning},
      {"repeat of a part that ended here", ended, launch_of(1), L::kIgnore, std::nullopt},
      {"a new part of the attempt after the earlier ended", ended, launch_of(1, 1), L::kStart,
       std::nullopt},
      {"the next attempt after one ended", ended, launch_of(2), L::kStart, std::nullopt},
      {"while an epilog runs", [](PartTable& t) { t.epilog_began(); }, launch_of(1), L::kHold,
       S::kHeld},
  };
  for (const LaunchCase& c : cases) {
    SCOPED_TRACE(c.name);
    PartTable t;
    c.before(t);
    EXPECT_EQ(t.launch(c.launch), c.decision);
    EXPECT_EQ(state(t), c.after);
  }
}

TEST(PartTable, LaunchOfAStep) {
  using L = PartTable::Launch;
  struct Case {
    const char* name;
    std::function<void(PartTable&)> before;
    overlay::Launch launch;
    L decision;
  };
  const Case cases[] = {
      {"the job does not run here", [](PartTable&) {}, launch_of(1, 0, 1), L::kRefuse},
      {"the job is in its prolog", in_prolog, launch_of(1, 0, 1), L::kRefuse},
      {"another attempt runs", [](PartTable& t) { running(t, 2); }, launch_of(1, 0, 1), L::kRefuse},
      {"new", [](PartTable& t) { running(t); }, launch_of(1, 0, 1), L::kStart},
      {"repeat while its tasks start",
       [](PartTable& t) {
         running(t);
         t.step_starting(kJob, 1);
       },
       launch_of(1, 0, 1), L::kIgnore},
      {"repeat of a running step",
       [](PartTable& t) {
         running(t);
         t.step_starting(kJob, 1);
         ASSERT_TRUE(t.started(kJob, 1));
       },
       launch_of(1, 0, 1), L::kReportStarted},
      {"repeat of a step that ended",
       [](PartTable& t) {
         running(t);
         t.step_starting(kJob, 1);
         EXPECT_EQ(t.step_ended(kJob, 1), 1u);
       },
       launch_of(1, 0, 1), L::kIgnore},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    PartTable t;
    c.before(t);
    EXPECT_EQ(t.step_launch(c.launch), c.decision);
  }
}

TEST(PartTable, Kill) {
  using K = PartTable::Kill::Kind;
  struct Case {
    const char* name;
    std::function<void(PartTable&)> before;
    overlay::Kill kill;
    K kind;
    std::optional<PartState> after;
  };
  const Case cases[] = {
      {"not here", [](PartTable&) {}, kill_of(1), K::kIgnore, std::nullopt},
      {"held", held, kill_of(1), K::kCancelledBeforeStart, std::nullopt},
      {"in its prolog", in_prolog, kill_of(1), K::kCancelledBeforeStart, std::nullopt},
      {"in its prolog, another attempt", in_prolog, kill_of(2), K::kIgnore, PartState::kInProlog},
      {"restoring", restoring, kill_of(1), K::kIgnore, PartState::kRestoring},
      {"starting", starting, kill_of(1), K::kCancelPart, PartState::kStarting},
      {"running", [](PartTable& t) { running(t); }, kill_of(1), K::kCancelPart,
       PartState::kRunning},
      {"a step", [](PartTable& t) { running(t); }, kill_of(1, 3), K::kCancelStep,
       PartState::kRunning},
      {"a step of another attempt", [](PartTable& t) { running(t); }, kill_of(2, 3), K::kIgnore,
       PartState::kRunning},
      {"the part a resize took", [](PartTable& t) { running(t, 1, 2); }, kill_of(1, 0, true, 2),
       K::kCancelPart, PartState::kRunning},
      {"an earlier part than the one running", [](PartTable& t) { running(t, 1, 3); },
       kill_of(1, 0, true, 2), K::kIgnore, PartState::kRunning},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    PartTable t;
    c.before(t);
    EXPECT_EQ(t.kill(c.kill).kind, c.kind);
    EXPECT_EQ(state(t), c.after);
  }
}

TEST(PartTable, AKilledPartNotStartedIsNotStartedByARepeat) {
  PartTable t;
  in_prolog(t);
  EXPECT_EQ(t.kill(kill_of(1)).kind, PartTable::Kill::Kind::kCancelledBeforeStart);
  EXPECT_FALSE(t.prolog_ended(kJob, 1, true));  // its outcome is ignored
  EXPECT_EQ(t.launch(launch_of(1)), PartTable::Launch::kIgnore);
}

TEST(PartTable, PrologPassesThenTheTasksStart) {
  PartTable t;
  t.start_prolog(launch_of(1), {{"HPCQ_JOB_ID", "7"}});
  EXPECT_FALSE(t.runs(kJob, 1));
  auto launch = t.prolog_ended(kJob, 1, true);
  ASSERT_TRUE(launch);
  EXPECT_EQ(launch->attempt(), 1u);
  t.starting(*launch, {{"HPCQ_JOB_ID", "7"}});
  EXPECT_TRUE(t.runs(kJob, 1));
  EXPECT_FALSE(t.started(kJob, 1));  // no such step
  auto started = t.started(kJob, 0);
  ASSERT_TRUE(started);
  EXPECT_EQ(started->state, PartState::kRunning);
  EXPECT_FALSE(t.started(kJob, 0));  // reported once
  EXPECT_EQ(t.find(kJob)->script_env.at("HPCQ_JOB_ID"), "7");
}

TEST(PartTable, AFailedPrologEndsThePartForGood) {
  PartTable t;
  in_prolog(t);
  EXPECT_FALSE(t.prolog_ended(kJob, 2, false));  // another attempt's prolog
  ASSERT_TRUE(t.prolog_ended(kJob, 1, false));
  EXPECT_EQ(state(t), std::nullopt);
  EXPECT_TRUE(t.remembers(kJob, 1, 0));
  EXPECT_EQ(t.launch(launch_of(1)), PartTable::Launch::kIgnore);
}

TEST(PartTable, ARefusedStartIsForgottenNotRemembered) {
  PartTable t;
  in_prolog(t);
  ASSERT_TRUE(t.prolog_ended(kJob, 1, true));
  t.start_failed(kJob);
  EXPECT_EQ(state(t), std::nullopt);
  EXPECT_FALSE(t.remembers(kJob, 1, 0));
}

TEST(PartTable, Restore) {
  PartTable ok;
  restoring(ok);
  EXPECT_FALSE(ok.runs(kJob, 1));
  EXPECT_FALSE(ok.started(kJob, 0));  // its start is the restore's
  auto restored = ok.restored(kJob, true);
  ASSERT_TRUE(restored);
  EXPECT_EQ(restored->image_dir, "/ckpt/part-0");
  EXPECT_EQ(state(ok), PartState::kRunning);
  EXPECT_FALSE(ok.restored(kJob, true));  // once

  PartTable failed;
  restoring(failed);
  ASSERT_TRUE(failed.restored(kJob, false));
  EXPECT_EQ(state(failed), std::nullopt);
}

TEST(PartTable, EndRemembersThePartAndDropsItsSteps) {
  PartTable t;
  running(t, 3, 1);
  t.step_starting(kJob, 1);
  EXPECT_TRUE(t.step_runs(kJob, 1));
  EXPECT_TRUE(t.runs(kJob, 3, 1));
  EXPECT_TRUE(t.runs(kJob, 3, 0));
  EXPECT_FALSE(t.runs(kJob, 3, 2));  // no such step
  EXPECT_FALSE(t.runs(kJob, 2, 1));  // another attempt
  EXPECT_EQ(t.steps_of(kJob), std::vector<std::uint32_t>{1});
  EXPECT_EQ(t.step_ended(kJob, 1), 3u);
  EXPECT_FALSE(t.step_runs(kJob, 1));
  auto part = t.ended(kJob);
  ASSERT_TRUE(part);
  EXPECT_EQ(part->attempt, 3u);
  EXPECT_EQ(part->part, 1u);
  EXPECT_FALSE(t.ended(kJob));
  EXPECT_TRUE(t.remembers(kJob, 3, 1));
  EXPECT_EQ(t.step_ended(kJob, 2), 0u);  // the part is gone
  EXPECT_FALSE(t.any_running());
}

TEST(PartTable, LaunchesHeldByEpilogsStartOnceTheLastEnds) {
  PartTable t;
  t.epilog_began();
  t.epilog_began();
  ASSERT_EQ(t.launch(launch_of(1)), PartTable::Launch::kHold);
  EXPECT_TRUE(t.epilog_ended().empty());  // one still runs
  auto released = t.epilog_ended();
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].attempt(), 1u);
  EXPECT_EQ(state(t), std::nullopt);
  EXPECT_EQ(t.launch(released[0]), PartTable::Launch::kStart);
  EXPECT_EQ(t.epilogs_running(), 0);
}

TEST(PartTable, SignalsAreDeliveredOnce) {
  PartTable t;
  EXPECT_FALSE(t.take_signal(kJob, 1, 1));  // not here
  running(t);
  EXPECT_TRUE(t.take_signal(kJob, 1, 1));
  EXPECT_FALSE(t.take_signal(kJob, 1, 1));  // a copy after the tree healed
  EXPECT_TRUE(t.take_signal(kJob, 1, 0));   // not numbered
  EXPECT_TRUE(t.take_signal(kJob, 1, 3));
  EXPECT_FALSE(t.take_signal(kJob, 2, 4));  // stale attempt
}

TEST(PartTable, InputIsWrittenOnce) {
  PartTable t;
  running(t);
  overlay::Input input;
  input.set_job_id(kJob);
  input.set_attempt(1);
  input.set_step(0);
  input.set_data("hello");
  auto first = t.take_input(input);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->data, "hello");
  EXPECT_FALSE(t.take_input(input));  // a copy
  input.set_data("hello world");      // overlapping: only the new bytes
  auto second = t.take_input(input);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->data, " world");
  input.set_offset(11);
  input.set_data("");
  input.set_eof(true);
  auto eof = t.take_input(input);
  ASSERT_TRUE(eof);
  EXPECT_TRUE(eof->eof);
  EXPECT_FALSE(t.take_input(input));  // EOF once
  input.set_attempt(2);
  input.set_data("x");
  EXPECT_FALSE(t.take_input(input));  // stale attempt
}

TEST(PartTable, HelloListsWhatStartsOrRunsWithWhatItReceived) {
  PartTable t;
  running(t);
  ASSERT_TRUE(t.take_signal(kJob, 1, 4));
  overlay::Input input;
  input.set_job_id(kJob);
  input.set_attempt(1);
  input.set_step(2);
  input.set_data("abc");
  ASSERT_TRUE(t.take_input(input));
  overlay::Launch other = launch_of(1);
  other.set_job_id(8);
  t.start_prolog(other, {});  // not started: not in the Hello
  auto jobs = t.running_jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].job_id(), kJob);
  EXPECT_EQ(jobs[0].attempt(), 1u);
  EXPECT_EQ(jobs[0].signals(), 4u);
  ASSERT_EQ(jobs[0].input_size(), 1);
  EXPECT_EQ(jobs[0].input(0).step(), 2u);
  EXPECT_EQ(jobs[0].input(0).bytes(), 3u);
}

TEST(PartTable, AnAgentRestartAdoptsPartsThenTheirSteps) {
  PartTable t;
  EXPECT_FALSE(t.adopt(launch_of(1, 0, 2), {}));  // a step without its part
  EXPECT_TRUE(t.adopt(launch_of(1, 4), {{"HPCQ_JOB_ID", "7"}}));
  EXPECT_FALSE(t.adopt(launch_of(2, 0, 2), {}));  // another attempt's step
  EXPECT_TRUE(t.adopt(launch_of(1, 0, 2), {}));
  EXPECT_EQ(state(t), PartState::kRunning);
  EXPECT_TRUE(t.step_runs(kJob, 2));
  EXPECT_EQ(t.launch(launch_of(1, 4)), PartTable::Launch::kReportStarted);
  EXPECT_EQ(t.step_launch(launch_of(1, 4, 2)), PartTable::Launch::kReportStarted);
  EXPECT_EQ(t.find(kJob)->part, 4u);
}

TEST(PartTable, CheckpointsInFlightAndTheirAnswers) {
  PartTable t;
  overlay::Checkpoint request;
  request.set_job_id(kJob);
  request.set_image_dir("/ckpt");
  t.checkpoint_began(request);
  running(t);
  ASSERT_TRUE(t.ended(kJob));  // a dump outlives its part's end
  auto in_flight = t.checkpoint_ended(kJob);
  ASSERT_TRUE(in_flight);
  EXPECT_EQ(in_flight->image_dir(), "/ckpt");
  EXPECT_FALSE(t.checkpoint_ended(kJob));
  for (int i = 0; i < 300; ++i) {
    overlay::CheckpointDone done;
    done.set_job_id(static_cast<JobId>(i));
    t.checkpoint_answered(done);
  }
  ASSERT_EQ(t.checkpoint_answers().size(), 256u);
  EXPECT_EQ(t.checkpoint_answers().front().job_id(), 44u);  // the oldest go
}

TEST(PartTable, RemembersABoundedNumberOfEndedParts) {
  PartTable t;
  for (std::uint32_t attempt = 1; attempt <= 100'001; ++attempt) {
    t.starting(launch_of(attempt), {});
    ASSERT_TRUE(t.ended(kJob));
  }
  EXPECT_FALSE(t.remembers(kJob, 1, 0));
  EXPECT_TRUE(t.remembers(kJob, 2, 0));
  EXPECT_TRUE(t.remembers(kJob, 100'001, 0));
}

}  // namespace
}  // namespace hpcq::agent
