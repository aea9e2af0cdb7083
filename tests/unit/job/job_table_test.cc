// The job table's transitions as scenarios: events in, states and effects
// out. Each step applies one event and checks the effects it returned and
// the state of the jobs it names.
#include "lib/job/job_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace hpcq::job {
namespace {

using Kind = Effect::Kind;

class JobTableTest : public ::testing::Test {
 protected:
  // A pending job submitted at `id` seconds, on `nodes` nodes.
  JobRecord& submit(JobId id, std::vector<Dependency> deps = {}, bool requeue = false) {
    Job job;
    job.id = id;
    job.uid = 1000;
    job.submit_time = static_cast<TimeUs>(id) * kUsPerSecond;
    job.spec.dependencies = std::move(deps);
    job.spec.requeue = requeue;
    JobRecord& record = table.insert(std::move(job));
    last = table.admit(record, now);
    return record;
  }
  // A pending job of `name` with --dependency=`deps` (its text), submitted
  // at `id` seconds by `uid`.
  JobRecord& submit_as(JobId id, const std::string& name, const std::string& deps = "",
                       std::uint32_t uid = 1000) {
    Job job;
    job.id = id;
    job.uid = uid;
    job.submit_time = static_cast<TimeUs>(id) * kUsPerSecond;
    job.spec.name = name;
    if (!deps.empty()) job.spec.dependencies = parse_dependencies(deps).value();
    JobRecord& record = table.insert(std::move(job));
    last = table.admit(record, now);
    return record;
  }
  static resource::Allocation on(std::vector<Rank> ranks) {
    resource::Allocation allocation;
    for (Rank r : ranks) {
      resource::NodeAllocation part;
      part.rank = r;
      part.node = "n" + std::to_string(r);
      part.cores = {0};
      allocation.nodes.push_back(part);
    }
    return allocation;
  }
  JobRecord& at(JobId id) { return table.at(id); }
  JobState state(JobId id) { return table.at(id).job.state; }
  std::vector<JobId> queue() const {
    std::vector<JobId> ids;
    for (const auto& [t, id] : table.pending()) ids.push_back(id);
    return ids;
  }
  // Ends every part of `id` with `end`, then carries out after_run() as the
  // daemon does.
  Effects end_all(JobId id, JobState end, int exit_code = 0) {
    JobRecord& record = at(id);
    Effects effects;
    const std::set<Rank> parts = record.running_on;
    for (Rank r : parts) {
      Effects e = table.part_ended(record, r, end, exit_code, "n" + std::to_string(r) + ": end");
      effects.insert(effects.end(), e.begin(), e.end());
    }
    return carry_out(record, JobTableCore::after_run(record));
  }
  Effects carry_out(JobRecord& record, const AfterRun& after) {
    if (after.kind == AfterRun::Kind::kFinish) {
      return table.finish(record, after.state, after.reason, now, now);
    }
    Effects effects = table.requeue(record, after.reason);
    record.yields_to = after.yields_to;
    return effects;
  }
  // Every part has ended: the job finishes FAILED with this reason and code.
  void expect_failed(JobId id, const std::string& reason, int exit_code) {
    const AfterRun after = JobTableCore::after_run(at(id));
    EXPECT_EQ(after, (AfterRun{AfterRun::Kind::kFinish, JobState::kFailed, reason, 0}));
    carry_out(at(id), after);
    EXPECT_EQ(at(id).job.exit_code, exit_code);
  }

  JobTable<> table;
  TimeUs now = 100 * kUsPerSecond;
  Effects last;
};

TEST_F(JobTableTest, SubmitPublishesQueuesAndAsksForACycle) {
  submit(1);
  EXPECT_EQ(last, (Effects{{Kind::kPublished, 1}, {Kind::kQueued, 1}, {Kind::kSchedule}}));
  EXPECT_EQ(state(1), JobState::kPending);
  submit(3);
  submit(2);
  EXPECT_EQ(queue(), (std::vector<JobId>{1, 2, 3}));  // FCFS: submit time, then id
}

TEST_F(JobTableTest, HoldLeavesTheQueueAndReleaseComesBack) {
  submit(1);
  auto held = table.hold(at(1), true, "held by alice", now);
  ASSERT_TRUE(held.is_ok());
  EXPECT_EQ(*held, (Effects{{Kind::kDequeued, 1}, {Kind::kStored, 1, "hold"}}));
  EXPECT_TRUE(at(1).job.held);
  EXPECT_EQ(at(1).job.reason, "held by alice");
  EXPECT_TRUE(queue().empty());
  auto again = table.hold(at(1), true, "held by alice", now);
  EXPECT_TRUE(again->empty());  // already held: nothing to do
  auto released = table.hold(at(1), false, "alice", now);
  EXPECT_EQ(*released,
            (Effects{{Kind::kQueued, 1}, {Kind::kSchedule}, {Kind::kStored, 1, "release"}}));
  EXPECT_EQ(at(1).job.reason, "");
  EXPECT_EQ(queue(), (std::vector<JobId>{1}));
}

// --begin: kept out of the queue, with its reason, until release_due() sees
// its time come; held, cancelled or moved meanwhile, it is not queued then.
TEST_F(JobTableTest, ABeginTimeKeepsAJobBackUntilItComes) {
  Job job;
  job.id = 1;
  job.submit_time = kUsPerSecond;
  job.spec.begin_time_us = now + 60 * kUsPerSecond;
  last = table.admit(table.insert(std::move(job)), now);
  EXPECT_EQ(last, (Effects{{Kind::kPublished, 1}, {Kind::kPublished, 1}, {Kind::kSchedule}}));
  EXPECT_EQ(at(1).job.reason, kBeginReason);
  EXPECT_TRUE(queue().empty());
  EXPECT_TRUE(table.release_due(now + 59 * kUsPerSecond).empty());
  EXPECT_EQ(table.release_due(now + 60 * kUsPerSecond),
            (Effects{{Kind::kPublished, 1}, {Kind::kQueued, 1}, {Kind::kSchedule}}));
  EXPECT_EQ(at(1).job.reason, "");
  EXPECT_EQ(queue(), (std::vector<JobId>{1}));
  EXPECT_TRUE(table.release_due(now + 61 * kUsPerSecond).empty());  // once
}

// --deadline (issue 47 item 5): a pending job, held or not, that could no
// longer end by its deadline ends CANCELLED, at the last moment it could
// have started; a running one or one already ended is left alone.
TEST_F(JobTableTest, ADeadlineEndsAPendingJobThatCanNoLongerEndByIt) {
  auto with_deadline = [this](JobId id, std::int64_t limit_s, TimeUs deadline) -> JobRecord& {
    Job job;
    job.id = id;
    job.submit_time = static_cast<TimeUs>(id) * kUsPerSecond;
    job.spec.time_limit_s = limit_s;
    job.spec.deadline_us = deadline;
    JobRecord& record = table.insert(std::move(job));
    last = table.admit(record, now);
    return record;
  };
  with_deadline(1, 60, now + 100 * kUsPerSecond);  // must start by now + 40 s
  with_deadline(2, 60, now + 100 * kUsPerSecond);
  ASSERT_TRUE(table.hold(at(2), true, "held by alice", now).is_ok());
  with_deadline(3, 10, now + 100 * kUsPerSecond);  // started in time
  table.start(at(3), on({1}), now);
  EXPECT_TRUE(table.expire_deadlines(now + 39 * kUsPerSecond).empty());
  const Effects expired = table.expire_deadlines(now + 40 * kUsPerSecond);
  EXPECT_EQ(state(1), JobState::kCancelled);
  EXPECT_EQ(state(2), JobState::kCancelled) << "held or not";
  EXPECT_EQ(at(1).job.reason, kDeadlineReason);
  EXPECT_EQ(state(3), JobState::kRunning);
  EXPECT_TRUE(queue().empty());
  EXPECT_EQ(expired.back(), (Effect{Kind::kSchedule}));
  EXPECT_TRUE(table.expire_deadlines(now + 200 * kUsPerSecond).empty()) << "once";
  // A lowered time limit gives it longer: checked again when due.
  JobRecord& lowered = with_deadline(4, 60, now + 100 * kUsPerSecond);
  lowered.job.spec.time_limit_s = 10;
  EXPECT_TRUE(table.expire_deadlines(now + 40 * kUsPerSecond).empty());
  EXPECT_EQ(state(4), JobState::kPending);
  EXPECT_FALSE(table.expire_deadlines(now + 90 * kUsPerSecond).empty());
  EXPECT_EQ(state(4), JobState::kCancelled);
}

TEST_F(JobTableTest, ABeginTimeMovesAndHeldOrCancelledJobsStayOut) {
  submit(1);
  auto later = table.set_begin(at(1), now + 10 * kUsPerSecond, now);
  ASSERT_TRUE(later.is_ok());
  EXPECT_EQ(*later, (Effects{{Kind::kDequeued, 1},
                             {Kind::kPublished, 1},
                             {Kind::kStored, 1, "update"},
                             {Kind::kSchedule}}));
  EXPECT_TRUE(queue().empty());
  auto sooner = table.set_begin(at(1), now, now);  // now: queued at once
  ASSERT_TRUE(sooner.is_ok());
  EXPECT_EQ(queue(), (std::vector<JobId>{1}));
  EXPECT_EQ(at(1).job.reason, "");
  EXPECT_TRUE(table.release_due(now + 20 * kUsPerSecond).empty());  // not deferred twice

  submit(2);
  ASSERT_TRUE(table.set_begin(at(2), now + 10 * kUsPerSecond, now).is_ok());
  ASSERT_TRUE(table.hold(at(2), true, "held by alice", now).is_ok());
  submit(3);
  ASSERT_TRUE(table.set_begin(at(3), now + 10 * kUsPerSecond, now).is_ok());
  ASSERT_TRUE(table.cancel(at(3), "alice", now).is_ok());
  EXPECT_TRUE(table.release_due(now + 20 * kUsPerSecond).empty());
  EXPECT_EQ(queue(), (std::vector<JobId>{1}));
  // Released after its time: queued at once.
  ASSERT_TRUE(table.hold(at(2), false, "alice", now + 20 * kUsPerSecond).is_ok());
  EXPECT_EQ(queue(), (std::vector<JobId>{1, 2}));

  table.start(at(1), on({1}), now);
  auto running = table.set_begin(at(1), now, now);
  ASSERT_FALSE(running.is_ok());
  EXPECT_EQ(running.status().message(),
            "job 1 is RUNNING: only a pending job's begin time can change");
}

TEST_F(JobTableTest, OnlyPendingJobsAreHeld) {
  submit(1);
  table.start(at(1), on({1}), now);
  auto held = table.hold(at(1), true, "held by alice", now);
  ASSERT_FALSE(held.is_ok());
  EXPECT_EQ(held.status().message(), "job 1 is RUNNING: only pending jobs can be held");
}

TEST_F(JobTableTest, StartRunsOnEveryNodeOfTheAllocation) {
  submit(1);
  Effects started = table.start(at(1), on({1, 2}), now);
  EXPECT_EQ(started, (Effects{{Kind::kPublished, 1}}));
  EXPECT_EQ(state(1), JobState::kRunning);
  EXPECT_EQ(at(1).job.start_time, now);
  EXPECT_EQ(at(1).running_on, (std::set<Rank>{1, 2}));
  EXPECT_TRUE(queue().empty());
  EXPECT_EQ(table.running(), (std::set<JobId>{1}));
}

TEST_F(JobTableTest, EveryPartCompletedCompletesTheJob) {
  submit(1);
  table.start(at(1), on({1, 2}), now);
  Effects first = table.part_ended(at(1), 1, JobState::kCompleted, 0, "");
  EXPECT_TRUE(first.empty());
  EXPECT_EQ(at(1).running_on, (std::set<Rank>{2}));
  Effects ended = end_all(1, JobState::kCompleted);
  EXPECT_EQ(ended, (Effects{{Kind::kRunEnded, 1}, {Kind::kStored, 1, "COMPLETED"}}));
  EXPECT_EQ(state(1), JobState::kCompleted);
  EXPECT_EQ(at(1).job.end_time, now);
  EXPECT_TRUE(table.running().empty());
}

TEST_F(JobTableTest, TheFirstPartThatFailsDecidesAndTheOthersAreKilled) {
  submit(1);
  table.start(at(1), on({1, 2, 3}), now);
  EXPECT_EQ(table.part_ended(at(1), 2, JobState::kFailed, 3, "n2: exit 3"),
            (Effects{{Kind::kKillParts, 1}}));
  // The killed parts report CANCELLED: not the job's end.
  table.part_ended(at(1), 1, JobState::kCancelled, 137, "n1: killed");
  table.part_ended(at(1), 3, JobState::kCancelled, 137, "n3: killed");
  EXPECT_TRUE(at(1).running_on.empty());
  AfterRun after = JobTableCore::after_run(at(1));
  EXPECT_EQ(after, (AfterRun{AfterRun::Kind::kFinish, JobState::kFailed, "n2: exit 3", 0}));
  carry_out(at(1), after);
  EXPECT_EQ(state(1), JobState::kFailed);
  EXPECT_EQ(at(1).job.exit_code, 3);
}

TEST_F(JobTableTest, AnMpiAbortDecidesBeforeThePartsItBrokeReport) {
  submit(1);
  table.start(at(1), on({1, 2}), now);
  EXPECT_EQ(table.world_failed(at(1), 9, "n2: task 2: called MPI_Abort", 100),
            (Effects{{Kind::kKillParts, 1}}));
  // The other node's rank failed on losing its peer: not the job's reason.
  table.part_ended(at(1), 1, JobState::kFailed, 15, "n1: task 0: MPI error");
  table.part_ended(at(1), 2, JobState::kFailed, 9, "n2: task 2: called MPI_Abort");
  expect_failed(1, "n2: task 2: called MPI_Abort", 9);
  // Too late once a part has decided, and for a job that is not running.
  submit(2);
  EXPECT_TRUE(table.world_failed(at(2), 9, "x", 100).empty());
  table.start(at(2), on({1, 2}), now);
  table.part_ended(at(2), 1, JobState::kFailed, 3, "n1: exit 3");
  EXPECT_TRUE(table.world_failed(at(2), 9, "x", 100).empty());
  EXPECT_EQ(at(2).job.exit_code, 3);
}

TEST_F(JobTableTest, TheWorldFailureSeenFirstDecidesWhicheverArrivesFirst) {
  submit(1);
  table.start(at(1), on({1, 2}), now);
  // n2's rank aborted at 100; n1's rank, losing its peer, aborted at 105,
  // and its report, and its part's end, came first.
  EXPECT_EQ(table.world_failed(at(1), 15, "n1: task 0: called MPI_Abort", 105),
            (Effects{{Kind::kKillParts, 1}}));
  table.part_ended(at(1), 1, JobState::kFailed, 15, "n1: task 0: called MPI_Abort");
  EXPECT_TRUE(table.world_failed(at(1), 9, "n2: task 2: called MPI_Abort", 100).empty());
  EXPECT_TRUE(table.world_failed(at(1), 7, "n2: task 3: exited with code 7", 101).empty());
  EXPECT_TRUE(table.world_failed(at(1), 6, "unknown time", 0).empty());
  table.part_ended(at(1), 2, JobState::kFailed, 9, "n2: task 2: called MPI_Abort");
  expect_failed(1, "n2: task 2: called MPI_Abort", 9);
  // A part's end (no time) or a failure of unknown time is never replaced.
  EXPECT_FALSE(replaces_world_failure(std::nullopt, 5));
  EXPECT_FALSE(replaces_world_failure(0, 5));
  EXPECT_FALSE(replaces_world_failure(10, 0));
  EXPECT_FALSE(replaces_world_failure(10, 10));
  EXPECT_TRUE(replaces_world_failure(10, 9));
}

TEST_F(JobTableTest, ABatchJobEndsWithItsScriptsPart) {
  for (JobState script_end : {JobState::kCompleted, JobState::kFailed}) {
    const JobId id = script_end == JobState::kCompleted ? 1 : 2;
    submit(id).job.spec.batch = true;
    table.start(at(id), on({3, 1, 2}), now);  // the script runs on the first node, rank 3
    const int code = script_end == JobState::kCompleted ? 0 : 7;
    EXPECT_EQ(table.part_ended(at(id), 3, script_end, code, "n3: script"),
              (Effects{{Kind::kKillParts, id}}));
    // The holding parts, killed, report CANCELLED: not the job's end.
    EXPECT_TRUE(table.part_ended(at(id), 1, JobState::kCancelled, 137, "n1: killed").empty());
    EXPECT_TRUE(table.part_ended(at(id), 2, JobState::kCancelled, 137, "n2: killed").empty());
    AfterRun after = JobTableCore::after_run(at(id));
    EXPECT_EQ(after.state, script_end);
    EXPECT_EQ(after.reason, script_end == JobState::kCompleted ? "" : "n3: script");
    carry_out(at(id), after);
    EXPECT_EQ(at(id).job.exit_code, code);
  }
}

TEST_F(JobTableTest, ABatchJobsHoldingPartThatFailsFailsIt) {
  submit(1).job.spec.batch = true;
  table.start(at(1), on({1, 2}), now);
  EXPECT_EQ(table.part_ended(at(1), 2, JobState::kFailed, 1, "n2: holder failed"),
            (Effects{{Kind::kKillParts, 1}}));
  table.part_ended(at(1), 1, JobState::kCancelled, 137, "n1: killed");
  EXPECT_EQ(JobTableCore::after_run(at(1)).state, JobState::kFailed);
}

TEST_F(JobTableTest, RequeueOfARunningJobKillsItThenRequeuesIt) {
  submit(1);
  EXPECT_EQ(table.requeue_request(at(1), "alice").status().code(), Code::kFailedPrecondition);
  table.start(at(1), on({1, 2}), now);
  auto asked = table.requeue_request(at(1), "alice");
  ASSERT_TRUE(asked.is_ok());
  EXPECT_EQ(*asked, (Effects{{Kind::kKillParts, 1}}));
  EXPECT_FALSE(table.requeue_request(at(1), "alice").is_ok());  // once
  table.part_ended(at(1), 1, JobState::kCancelled, 137, "n1: killed");
  table.part_ended(at(1), 2, JobState::kCancelled, 137, "n2: killed");
  AfterRun after = JobTableCore::after_run(at(1));
  EXPECT_EQ(after,
            (AfterRun{AfterRun::Kind::kRequeue, JobState::kPending, "requeued by alice", 0}));
  carry_out(at(1), after);
  EXPECT_EQ(state(1), JobState::kPending);
  EXPECT_EQ(at(1).job.requeue_count, 1);
  EXPECT_EQ(queue(), (std::vector<JobId>{1}));
}

TEST_F(JobTableTest, CompletedPartsKeepTheHighestExitCode) {
  submit(1);
  table.start(at(1), on({1, 2}), now);
  table.part_ended(at(1), 1, JobState::kCompleted, 0, "");
  table.part_ended(at(1), 2, JobState::kCompleted, 0, "");
  EXPECT_EQ(JobTableCore::after_run(at(1)).state, JobState::kCompleted);
}

TEST_F(JobTableTest, TimeoutWithoutAReasonSaysWhy) {
  submit(1);
  table.start(at(1), on({1}), now);
  end_all(1, JobState::kTimeout, 137);
  EXPECT_EQ(state(1), JobState::kTimeout);
  EXPECT_EQ(at(1).job.reason, "n1: end");
  submit(2);
  table.start(at(2), on({1}), now);
  table.finish(at(2), JobState::kTimeout, "", now, now);
  EXPECT_EQ(at(2).job.reason, "time limit reached");
}

TEST_F(JobTableTest, CancelOfAPendingJobEndsItNow) {
  submit(1);
  auto cancelled = table.cancel(at(1), "alice", now);
  ASSERT_TRUE(cancelled.is_ok());
  EXPECT_EQ(*cancelled,
            (Effects{{Kind::kDequeued, 1}, {Kind::kStored, 1, "CANCELLED"}, {Kind::kSchedule}}));
  EXPECT_EQ(state(1), JobState::kCancelled);
  EXPECT_EQ(at(1).job.reason, "cancelled by alice");
  auto twice = table.cancel(at(1), "alice", now);
  ASSERT_FALSE(twice.is_ok());
  EXPECT_EQ(twice.status().message(), "job 1 already ended (CANCELLED)");
}

TEST_F(JobTableTest, CancelOfARunningJobKillsItThenEndsItCancelled) {
  submit(1);
  table.start(at(1), on({1, 2}), now);
  auto cancelled = table.cancel(at(1), "alice", now);
  EXPECT_EQ(*cancelled, (Effects{{Kind::kKillParts, 1}}));
  EXPECT_EQ(state(1), JobState::kRunning);  // until its parts have ended
  end_all(1, JobState::kCancelled, 143);
  EXPECT_EQ(state(1), JobState::kCancelled);
  EXPECT_EQ(at(1).job.reason, "cancelled by alice");
}

// hpcq alloc's command ends: the allocation's killed parts do not decide;
// its exit status does (salloc's slurm_complete_job).
TEST_F(JobTableTest, AnAllocationEndsWithItsCommandsExitStatus) {
  for (int code : {0, 3, 130}) {
    const JobId id = static_cast<JobId>(code + 1);
    submit(id).job.spec.batch = true;  // no script: hpcq alloc's
    EXPECT_EQ(table.end_allocation(at(id), code).status().code(), Code::kFailedPrecondition);
    table.start(at(id), on({3, 1}), now);
    auto ended = table.end_allocation(at(id), code);
    ASSERT_TRUE(ended.is_ok());
    EXPECT_EQ(*ended, (Effects{{Kind::kKillParts, id}}));
    EXPECT_EQ(table.end_allocation(at(id), code).status().code(), Code::kFailedPrecondition);
    EXPECT_TRUE(table.part_ended(at(id), 3, JobState::kCancelled, 137, "n3: killed").empty());
    EXPECT_TRUE(table.part_ended(at(id), 1, JobState::kCancelled, 137, "n1: killed").empty());
    const AfterRun after = JobTableCore::after_run(at(id));
    EXPECT_EQ(after.state, code == 0 ? JobState::kCompleted : JobState::kFailed);
    EXPECT_EQ(after.reason,
              code == 0 ? "" : "its command exited with code " + std::to_string(code));
    carry_out(at(id), after);
    EXPECT_EQ(at(id).job.exit_code, code);
  }
  // Only hpcq alloc's jobs: a batch script's end is its own.
  submit(9).job.spec.batch = true;
  at(9).job.spec.script = "#!/bin/sh\n";
  table.start(at(9), on({1}), now);
  EXPECT_EQ(table.end_allocation(at(9), 0).status().code(), Code::kFailedPrecondition);
  // Cancelled first: it stays cancelled.
  submit(10).job.spec.batch = true;
  table.start(at(10), on({1}), now);
  ASSERT_TRUE(table.cancel(at(10), "alice", now).is_ok());
  EXPECT_EQ(table.end_allocation(at(10), 0).status().code(), Code::kFailedPrecondition);
}

TEST_F(JobTableTest, RequeueGoesBackToItsPlaceInTheQueue) {
  submit(1);
  submit(2);
  table.start(at(1), on({1}), now);
  Effects requeued = table.requeue(at(1), "node n1 down");
  EXPECT_EQ(requeued,
            (Effects{{Kind::kRunEnded, 1}, {Kind::kQueued, 1}, {Kind::kStored, 1, "requeue"}}));
  EXPECT_EQ(state(1), JobState::kPending);
  EXPECT_EQ(at(1).job.requeue_count, 1);
  EXPECT_EQ(at(1).job.reason, "requeued: node n1 down");
  EXPECT_EQ(at(1).job.start_time, 0);
  EXPECT_TRUE(at(1).job.allocation.nodes.empty());
  EXPECT_EQ(queue(), (std::vector<JobId>{1, 2}));
}

// What a run's end becomes, for each way it can be stopped.
struct AfterRunCase {
  const char* name;
  std::function<void(JobRecord&)> setup;
  AfterRun expected;
};

TEST_F(JobTableTest, AfterRunForEachWayARunStops) {
  using K = AfterRun::Kind;
  const std::vector<AfterRunCase> cases = {
      {"completed", [](JobRecord&) {}, {K::kFinish, JobState::kCompleted, "", 0}},
      {"failed",
       [](JobRecord& r) {
         r.outcome = JobState::kFailed;
         r.outcome_reason = "n1: exit 1";
       },
       {K::kFinish, JobState::kFailed, "n1: exit 1", 0}},
      {"cancelled wins over a failure",
       [](JobRecord& r) {
         r.outcome = JobState::kFailed;
         r.cancel_requested = true;
         r.outcome_reason = "cancelled by bob";
       },
       {K::kFinish, JobState::kCancelled, "cancelled by bob", 0}},
      {"preempted to requeue",
       [](JobRecord& r) {
         r.preempted = Preemption{9, PreemptMode::kRequeue};
       },
       {K::kRequeue, JobState::kPending, "preempted by job 9", 9}},
      {"preempted to cancel",
       [](JobRecord& r) {
         r.preempted = Preemption{9, PreemptMode::kCancel};
       },
       {K::kFinish, JobState::kCancelled, "preempted by job 9", 0}},
      {"preempted by checkpoint, not dumped",
       [](JobRecord& r) {
         r.preempted = Preemption{9, PreemptMode::kCheckpoint};
       },
       {K::kRequeueFromCheckpoint, JobState::kPending, "preempted by job 9", 9}},
      {"a cancel wins over a preemption",
       [](JobRecord& r) {
         r.preempted = Preemption{9, PreemptMode::kRequeue};
         r.cancel_requested = true;
         r.outcome_reason = "cancelled by bob";
       },
       {K::kFinish, JobState::kCancelled, "cancelled by bob", 0}},
      {"checkpoint failed half-way",
       [](JobRecord& r) { r.requeue_when_ended = "checkpoint failed (timed_out)"; },
       {K::kRequeue, JobState::kPending, "checkpoint failed (timed_out)", 0}},
      {"a preempting dump failed half-way",
       [](JobRecord& r) {
         r.preempted = Preemption{9, PreemptMode::kCheckpoint};
         r.requeue_when_ended = "checkpoint failed (failed)";
       },
       {K::kRequeueFromCheckpoint, JobState::kPending, "checkpoint failed (failed)", 9}},
      {"a restore failed: run it afresh",
       [](JobRecord& r) { r.requeue_when_ended = "n1: restore failed; running it from the start"; },
       {K::kRequeue, JobState::kPending, "n1: restore failed; running it from the start", 0}},
  };
  for (const AfterRunCase& c : cases) {
    SCOPED_TRACE(c.name);
    JobRecord record;
    record.job.state = JobState::kRunning;
    c.setup(record);
    EXPECT_EQ(JobTableCore::after_run(record), c.expected);
  }
}

TEST_F(JobTableTest, AfterANodeIsLost) {
  using K = AfterRun::Kind;
  JobRecord plain;
  EXPECT_EQ(JobTableCore::after_node_lost(plain, "node n1 down", false),
            (AfterRun{K::kFinish, JobState::kNodeFail, "node n1 down", 0}));
  JobRecord requeueable;
  requeueable.job.spec.requeue = true;
  EXPECT_EQ(JobTableCore::after_node_lost(requeueable, "node n1 down", false),
            (AfterRun{K::kRequeue, JobState::kPending, "node n1 down", 0}));
  EXPECT_EQ(JobTableCore::after_node_lost(plain, "node n1 down", true),
            (AfterRun{K::kRequeueFromCheckpoint, JobState::kPending, "node n1 down", 0}));
  JobRecord cancelled;
  cancelled.job.spec.requeue = true;
  cancelled.cancel_requested = true;
  EXPECT_EQ(JobTableCore::after_node_lost(cancelled, "node n1 down", true).kind, K::kFinish);
}

TEST_F(JobTableTest, APreemptedVictimIsRequeuedAndYields) {
  submit(1);
  submit(2);
  table.start(at(1), on({1}), now);
  at(1).preempted = Preemption{2, PreemptMode::kRequeue};
  end_all(1, JobState::kCancelled, 143);
  EXPECT_EQ(state(1), JobState::kPending);
  EXPECT_EQ(at(1).yields_to, 2);
  EXPECT_EQ(at(1).job.reason, "requeued: preempted by job 2");
  EXPECT_FALSE(at(1).preempted.has_value());
}

TEST_F(JobTableTest, AfterOkWaitsThenGoesOn) {
  submit(1);
  submit(2, {{DependencyType::kAfterOk, 1}});
  EXPECT_EQ(last, (Effects{{Kind::kPublished, 2}, {Kind::kPublished, 2}, {Kind::kSchedule}}));
  EXPECT_EQ(at(2).job.reason, "dependency afterok:1");
  EXPECT_EQ(queue(), (std::vector<JobId>{1}));
  table.start(at(1), on({1}), now);
  Effects ended = end_all(1, JobState::kCompleted);
  EXPECT_EQ(ended, (Effects{{Kind::kRunEnded, 1},
                            {Kind::kStored, 1, "COMPLETED"},
                            {Kind::kPublished, 2},
                            {Kind::kQueued, 2},
                            {Kind::kSchedule}}));
  EXPECT_EQ(at(2).job.reason, "");
  EXPECT_EQ(queue(), (std::vector<JobId>{2}));
}

TEST_F(JobTableTest, AfterOkOnAFailureCanNeverBeMet) {
  submit(1);
  submit(2, {{DependencyType::kAfterOk, 1}});
  table.start(at(1), on({1}), now);
  end_all(1, JobState::kFailed, 1);
  EXPECT_EQ(state(2), JobState::kCancelled);
  EXPECT_EQ(at(2).job.reason, "dependency never satisfied: afterok:1 (job 1 ended FAILED)");
}

TEST_F(JobTableTest, AfterGoesOnAtTheStart) {
  submit(1);
  submit(2, {{DependencyType::kAfter, 1}});
  Effects started = table.start(at(1), on({1}), now);
  EXPECT_EQ(
      started,
      (Effects{
          {Kind::kPublished, 1}, {Kind::kPublished, 2}, {Kind::kQueued, 2}, {Kind::kSchedule}}));
}

TEST_F(JobTableTest, AfterNotOkOnAnotherUsersJobSaysOnlyThatItCannotBeMet) {
  submit(1);
  at(1).job.uid = 2000;
  table.start(at(1), on({1}), now);
  end_all(1, JobState::kCompleted);
  submit(2, {{DependencyType::kAfterNotOk, 1}});
  EXPECT_EQ(state(2), JobState::kCancelled);
  EXPECT_EQ(at(2).job.reason, "dependency never satisfied: afternotok:1 (can never be met)");
}

TEST_F(JobTableTest, ADependencyOnAnUnknownJobIsNeverMet) {
  submit(2, {{DependencyType::kAfterAny, 7}});
  EXPECT_EQ(state(2), JobState::kCancelled);
  EXPECT_EQ(at(2).job.reason, "dependency never satisfied: afterany:7: no such job");
}

TEST_F(JobTableTest, AHeldDependentIsNotWoken) {
  submit(1);
  submit(2, {{DependencyType::kAfterAny, 1}});
  ASSERT_TRUE(table.hold(at(2), true, "held by alice", now).is_ok());
  table.start(at(1), on({1}), now);
  end_all(1, JobState::kCompleted);
  EXPECT_TRUE(queue().empty());
  ASSERT_TRUE(table.hold(at(2), false, "alice", now).is_ok());
  EXPECT_EQ(queue(), (std::vector<JobId>{2}));
}

// A '?' list: any one item met is enough; it can never be met only when
// none of its items can. Jobs 1 and 2 end as the case says, in order; job 3
// depends on them.
struct AnyOfCase {
  const char* deps;
  std::vector<std::pair<JobId, JobState>> ends;
  JobState state;      // job 3's then
  bool queued;         // job 3 is in the queue (pending and eligible)
  const char* reason;  // job 3's
};

class AnyOfDependencies : public JobTableTest, public ::testing::WithParamInterface<AnyOfCase> {};

TEST_P(AnyOfDependencies, OneMetIsEnoughAndNeverOnlyWhenNoneCanBe) {
  const AnyOfCase& c = GetParam();
  submit_as(1, "a");
  submit_as(2, "b");
  submit_as(3, "c", c.deps);
  for (const auto& [id, end] : c.ends) {
    table.start(at(id), on({static_cast<Rank>(id)}), now);
    end_all(id, end, end == JobState::kCompleted ? 0 : 1);
  }
  EXPECT_EQ(state(3), c.state) << c.deps;
  const std::vector<JobId> queued = queue();
  EXPECT_EQ(std::find(queued.begin(), queued.end(), JobId{3}) != queued.end(), c.queued) << c.deps;
  EXPECT_EQ(at(3).job.reason, c.reason) << c.deps;
}

constexpr auto kDone = JobState::kCompleted;
constexpr auto kFail = JobState::kFailed;

INSTANTIATE_TEST_SUITE_P(
    JobTable, AnyOfDependencies,
    ::testing::Values(
        AnyOfCase{
            "afterok:1?afterok:2", {}, JobState::kPending, false, "dependency afterok:1?afterok:2"},
        AnyOfCase{"afterok:1?afterok:2", {{2, kDone}}, JobState::kPending, true, ""},
        AnyOfCase{
            "afterok:1?afterok:2", {{1, kFail}}, JobState::kPending, false, "dependency afterok:2"},
        AnyOfCase{"afterok:1?afterok:2", {{1, kFail}, {2, kDone}}, JobState::kPending, true, ""},
        AnyOfCase{"afterok:1?afterok:2",
                  {{1, kFail}, {2, kFail}},
                  JobState::kCancelled,
                  false,
                  "dependency never satisfied: afterok:1 (job 1 ended FAILED); afterok:2 (job "
                  "2 ended FAILED)"},
        AnyOfCase{"afterok:1?afternotok:2",
                  {{1, kFail}, {2, kDone}},
                  JobState::kCancelled,
                  false,
                  "dependency never satisfied: afterok:1 (job 1 ended FAILED); afternotok:2 "
                  "(job 2 ended COMPLETED)"},
        AnyOfCase{"afterok:1?afterany:2",
                  {{1, kFail}},
                  JobState::kPending,
                  false,
                  "dependency afterany:2"},
        // Nothing else of its name: singleton is met at once.
        AnyOfCase{"afterok:1?singleton", {}, JobState::kPending, true, ""},
        // The same with ',': all must hold, one never met cancels.
        AnyOfCase{
            "afterok:1,afterok:2", {{1, kDone}}, JobState::kPending, false, "dependency afterok:2"},
        AnyOfCase{"afterok:1,afterok:2",
                  {{1, kFail}},
                  JobState::kCancelled,
                  false,
                  "dependency never satisfied: afterok:1 (job 1 ended FAILED)"}));

// singleton: one job of a user's name at a time, in submission order; each
// waits until every one submitted before it has ended.
TEST_F(JobTableTest, SingletonRunsOneOfANameAtATimeInSubmissionOrder) {
  submit_as(1, "a", "singleton");
  EXPECT_EQ(last, (Effects{{Kind::kPublished, 1}, {Kind::kQueued, 1}, {Kind::kSchedule}}));
  submit_as(2, "a", "singleton");
  EXPECT_EQ(last, (Effects{{Kind::kPublished, 2}, {Kind::kPublished, 2}, {Kind::kSchedule}}));
  submit_as(3, "a", "singleton");
  submit_as(4, "b", "singleton");  // another name: not held back
  EXPECT_EQ(queue(), (std::vector<JobId>{1, 4}));
  EXPECT_EQ(at(2).job.reason, "dependency singleton");
  EXPECT_EQ(at(3).job.reason, "dependency singleton");

  table.start(at(1), on({1}), now);
  EXPECT_EQ(queue(), (std::vector<JobId>{4}));
  Effects ended = end_all(1, JobState::kFailed, 1);  // however it ended
  EXPECT_EQ(ended, (Effects{{Kind::kRunEnded, 1},
                            {Kind::kStored, 1, "FAILED"},
                            {Kind::kPublished, 2},
                            {Kind::kQueued, 2},
                            {Kind::kSchedule}}));
  EXPECT_EQ(at(2).job.reason, "");
  EXPECT_EQ(queue(), (std::vector<JobId>{2, 4}));
  EXPECT_EQ(at(3).job.reason, "dependency singleton");

  // Cancelled while pending: the next of the name goes on.
  ASSERT_TRUE(table.cancel(at(2), "alice", now).is_ok());
  EXPECT_EQ(queue(), (std::vector<JobId>{3, 4}));
}

// Any job of the name holds a singleton back while it runs, and any
// submitted before it while it has not ended, singleton or not; another
// user's job of the name does not.
TEST_F(JobTableTest, SingletonWaitsForEveryJobOfTheNameNotOnlySingletons) {
  submit_as(1, "a", "", 2000);  // another user's
  submit_as(2, "a");
  submit_as(3, "a", "singleton");
  EXPECT_EQ(at(3).job.reason, "dependency singleton");
  table.start(at(1), on({1}), now);
  table.start(at(2), on({2}), now);
  end_all(2, JobState::kCompleted);
  EXPECT_EQ(queue(), (std::vector<JobId>{3}));  // job 1 is not its user's

  // Job 4 (no singleton, submitted after) starts first, as backfill may:
  // queued job 3 waits again until it has stopped running.
  submit_as(4, "a");
  Effects started = table.start(at(4), on({4}), now);
  EXPECT_EQ(started, (Effects{{Kind::kPublished, 4}, {Kind::kDequeued, 3}, {Kind::kPublished, 3}}));
  EXPECT_EQ(at(3).job.reason, "dependency singleton");
  EXPECT_TRUE(queue().empty());
  // Requeued, job 4 is pending but after job 3, which goes first.
  Effects requeued = table.requeue(at(4), "node n4 down");
  EXPECT_EQ(requeued, (Effects{{Kind::kRunEnded, 4},
                               {Kind::kQueued, 4},
                               {Kind::kStored, 4, "requeue"},
                               {Kind::kPublished, 3},
                               {Kind::kQueued, 3},
                               {Kind::kSchedule}}));
  EXPECT_EQ(queue(), (std::vector<JobId>{3, 4}));
}

// Ids are handed out in order, but jobs are admitted as their commits end:
// one admitted late still goes before a singleton submitted after it.
TEST_F(JobTableTest, SingletonYieldsToAJobOfItsNameAdmittedLate) {
  submit_as(2, "a", "singleton");
  EXPECT_EQ(queue(), (std::vector<JobId>{2}));
  submit_as(1, "a");
  EXPECT_EQ(last, (Effects{{Kind::kPublished, 1},
                           {Kind::kDequeued, 2},
                           {Kind::kPublished, 2},
                           {Kind::kQueued, 1},
                           {Kind::kSchedule}}));
  EXPECT_EQ(queue(), (std::vector<JobId>{1}));
  table.start(at(1), on({1}), now);
  end_all(1, JobState::kCompleted);
  EXPECT_EQ(queue(), (std::vector<JobId>{2}));
}

TEST_F(JobTableTest, SingletonWithOtherDependenciesWaitsForAll) {
  submit_as(1, "t");
  submit_as(2, "a", "singleton");
  submit_as(3, "a", "afterok:1,singleton");
  EXPECT_EQ(at(3).job.reason, "dependency afterok:1");
  table.start(at(2), on({2}), now);
  end_all(2, JobState::kCompleted);
  EXPECT_EQ(at(3).job.reason, "dependency afterok:1");
  EXPECT_EQ(queue(), (std::vector<JobId>{1}));
  table.start(at(1), on({1}), now);
  end_all(1, JobState::kCompleted);
  EXPECT_EQ(queue(), (std::vector<JobId>{3}));

  // In a '?' list singleton is one way among others, and never "never".
  submit_as(4, "b");
  submit_as(5, "b", "singleton?afterok:3");
  EXPECT_EQ(at(5).job.reason, "dependency singleton?afterok:3");
  table.start(at(3), on({3}), now);
  end_all(3, JobState::kFailed, 1);
  EXPECT_EQ(state(5), JobState::kPending);
  EXPECT_EQ(at(5).job.reason, "dependency singleton");
  table.start(at(4), on({4}), now);
  end_all(4, JobState::kCompleted);
  EXPECT_EQ(queue(), (std::vector<JobId>{5}));
}

// After a leader restart the index of names is rebuilt from the stored jobs.
TEST_F(JobTableTest, RecoveryRebuildsWhichJobsOfANameWait) {
  auto loaded = [&](JobId id, JobState state, const std::string& deps) {
    Job job;
    job.id = id;
    job.uid = 1000;
    job.submit_time = static_cast<TimeUs>(id) * kUsPerSecond;
    job.state = state;
    job.spec.name = "a";
    if (!deps.empty()) job.spec.dependencies = parse_dependencies(deps).value();
    if (state == JobState::kRunning) job.allocation = on({static_cast<Rank>(id)});
    table.load(table.insert(std::move(job)));
  };
  loaded(1, JobState::kCompleted, "");
  loaded(3, JobState::kPending, "singleton");
  loaded(2, JobState::kRunning, "singleton");
  loaded(4, JobState::kPending, "singleton");
  table.ready_loaded(now);
  EXPECT_TRUE(queue().empty());
  EXPECT_EQ(at(3).job.reason, "dependency singleton");
  EXPECT_EQ(at(4).job.reason, "dependency singleton");
  end_all(2, JobState::kCompleted);
  EXPECT_EQ(queue(), (std::vector<JobId>{3}));
  table.start(at(3), on({3}), now);
  end_all(3, JobState::kCompleted);
  EXPECT_EQ(queue(), (std::vector<JobId>{4}));
}

TEST_F(JobTableTest, ArrayTasksCountWhileTheyRun) {
  for (JobId id : {1, 2}) {
    Job job;
    job.id = id;
    job.spec.array_job_id = 1;
    table.admit(table.insert(job), now);
  }
  table.start(at(1), on({1}), now);
  table.start(at(2), on({2}), now);
  EXPECT_EQ(table.array_running(1), 2);
  end_all(1, JobState::kCompleted);
  EXPECT_EQ(table.array_running(1), 1);
  table.requeue(at(2), "node n2 down");
  EXPECT_EQ(table.array_running(1), 0);
}

TEST_F(JobTableTest, RecoveryAdoptsRunningJobsAndReadiesPendingOnes) {
  Job running;
  running.id = 1;
  running.state = JobState::kRunning;
  running.allocation = on({1, 3});
  Job pending;
  pending.id = 2;
  pending.spec.dependencies = {{DependencyType::kAfterOk, 1}};
  Job held;
  held.id = 3;
  held.held = true;
  table.load(table.insert(running));
  table.load(table.insert(pending));
  table.load(table.insert(held));
  EXPECT_EQ(table.ready_loaded(now), (Effects{{Kind::kPublished, 2}}));
  EXPECT_EQ(at(1).running_on, (std::set<Rank>{1, 3}));
  EXPECT_EQ(table.running(), (std::set<JobId>{1}));
  EXPECT_TRUE(queue().empty());  // 2 waits on 1; 3 is held
  end_all(1, JobState::kCompleted);
  EXPECT_EQ(queue(), (std::vector<JobId>{2}));
}

// After a leader restart each node's Hello says what it runs: the table's
// jobs there are adopted, anything else is killed, and a job the node does
// not report is lost there.
TEST_F(JobTableTest, AHelloAdoptsTheTablesJobsAndTheRestIsKilledOrLost) {
  Job running;
  running.id = 1;
  running.state = JobState::kRunning;
  running.requeue_count = 2;
  running.allocation = on({1, 3});
  Job other;
  other.id = 2;
  other.state = JobState::kRunning;
  other.allocation = on({3});
  table.load(table.insert(running));
  table.load(table.insert(other));
  (void)table.ready_loaded(now);
  EXPECT_TRUE(JobTableCore::adopts(table.find(1), 1, 2));
  EXPECT_TRUE(JobTableCore::adopts(table.find(1), 3, 2));
  EXPECT_FALSE(JobTableCore::adopts(table.find(1), 1, 1));  // an earlier run: killed
  EXPECT_FALSE(JobTableCore::adopts(table.find(1), 2, 2));  // not one of its nodes
  EXPECT_FALSE(JobTableCore::adopts(table.find(9), 1, 0));  // unknown (its submit was lost)
  // Node 3 reports job 1 only: job 2 is lost there and ends NODE_FAIL.
  EXPECT_EQ(table.missing_on(3, {1}), std::vector<JobId>{2});
  EXPECT_EQ(table.missing_on(1, {1}), std::vector<JobId>{});
  EXPECT_EQ(table.missing_on(1, {}), std::vector<JobId>{1});
  AfterRun lost = JobTableCore::after_node_lost(at(2), "its part on n3 was lost", false);
  EXPECT_EQ(lost.kind, AfterRun::Kind::kFinish);
  EXPECT_EQ(lost.state, JobState::kNodeFail);
  // A job ended meanwhile is no longer adopted anywhere.
  (void)table.cancel(at(1), "root", now);
  end_all(1, JobState::kCancelled);
  EXPECT_FALSE(JobTableCore::adopts(table.find(1), 1, 2));
  EXPECT_EQ(table.missing_on(1, {}), std::vector<JobId>{});
}

}  // namespace
}  // namespace hpcq::job
