// A checkpoint's transitions as scenarios: a running job on three nodes is
// checkpointed, its nodes answer (or do not), and the end says what becomes
// of the job; then the job table carries that out.
#include "lib/job/checkpoint_run.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace hpcq::job {
namespace {

using EndKind = CheckpointEnd::Kind;
constexpr TimeUs kNow = 1000 * kUsPerSecond;

struct Answer {
  Rank node;
  bool ok = true;
  bool stopped = false;
  std::string reason = {};
};

struct Scenario {
  const char* name;
  CheckpointThen then;
  bool asked;                           // a user waits for the record
  std::optional<Preemption> preempted;  // the scheduler's
  std::vector<std::string> to;          // migrate --to
  std::vector<Answer> answers;          // in order; the rest never answer (timed out)
  // Expected:
  EndKind kind;
  std::string outcome;
  std::string why = {};  // kLeaves
  bool hold = false;
  std::set<Rank> running_on = {};  // after the answers (and the caller's kills)
  std::string requeue_when_ended = {};
};

class CheckpointRunTest : public ::testing::Test {
 protected:
  JobRecord& running_job() {
    Job job;
    job.id = 7;
    job.uid = 1000;
    job.spec.request.nodes = 1;  // a range's minimum: the checkpoint sets it to the images'
    job.spec.request.ntasks = 3;
    job.submit_time = kUsPerSecond;
    JobRecord& record = table.insert(std::move(job));
    (void)table.admit(record, kUsPerSecond);
    resource::Allocation allocation;
    for (Rank r : {1, 2, 3}) {
      resource::NodeAllocation part;
      part.rank = r;
      part.node = "n" + std::to_string(r);
      part.cores = {0};
      allocation.nodes.push_back(part);
    }
    (void)table.start(record, allocation, 2 * kUsPerSecond);
    return record;
  }
  static CheckpointAnswer answer_of(const CheckpointRun& run, const Answer& a, std::size_t part) {
    CheckpointAnswer answer;
    answer.image_dir = part_image_dir(run.record, part);
    answer.ok = a.ok;
    answer.reason = a.reason;
    answer.stopped = a.stopped;
    answer.image_bytes = a.ok ? 100 : 0;
    answer.dump_seconds = a.ok ? 0.5 * static_cast<double>(part + 1) : 0;
    return answer;
  }

  JobTable<> table;
};

TEST_F(CheckpointRunTest, BeginAsksEveryNodeForItsPart) {
  JobRecord& record = running_job();
  const std::string image = checkpoint_image("/ckpt", record.job, 2);
  EXPECT_EQ(image, "/ckpt/job-7/3-0");
  CheckpointRun run =
      begin_checkpoint_run(record.job, CheckpointThen::kRequeue, image, {"n4"}, false, kNow);
  EXPECT_EQ(run.waiting, (std::set<Rank>{1, 2, 3}));
  EXPECT_EQ(run.record.nodes, (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(run.record.to, std::vector<std::string>{"n4"});
  EXPECT_EQ(run.record.time_us, kNow);
  EXPECT_TRUE(run.record.in_flight());
  EXPECT_EQ(run.deadline, kNow + kCheckpointTimeoutUs);
  EXPECT_EQ(part_image_dir(run.record, 1), "/ckpt/job-7/3-0/part-1");
}

TEST_F(CheckpointRunTest, EachWayACheckpointEnds) {
  const Preemption by_job{9, PreemptMode::kCheckpoint};
  const Preemption gap{0, PreemptMode::kCheckpoint};
  const std::vector<Scenario> scenarios = {
      {"continue, every node ok: runs on",
       CheckpointThen::kContinue,
       true,
       {},
       {},
       {{1}, {2}, {3}},
       EndKind::kRunsOn,
       "ok",
       "",
       false,
       {1, 2, 3}},
      {"continue, one node fails: runs on, told",
       CheckpointThen::kContinue,
       true,
       {},
       {},
       {{1}, {2, false, false, "criu: dump failed"}, {3}},
       EndKind::kRunsOn,
       "n2: criu: dump failed",
       "",
       false,
       {1, 2, 3}},
      {"requeue (checkpoint --then requeue): leaves",
       CheckpointThen::kRequeue,
       true,
       {},
       {},
       {{1, true, true}, {2, true, true}, {3, true, true}},
       EndKind::kLeaves,
       "ok",
       "checkpointed",
       false,
       {}},
      {"stop: leaves, held",
       CheckpointThen::kStop,
       true,
       {},
       {},
       {{1, true, true}, {2, true, true}, {3, true, true}},
       EndKind::kLeaves,
       "ok",
       "checkpointed and stopped",
       true,
       {}},
      {"migrate --to: leaves for its nodes",
       CheckpointThen::kRequeue,
       true,
       {},
       {"n5", "n6", "n7"},
       {{1, true, true}, {2, true, true}, {3, true, true}},
       EndKind::kLeaves,
       "ok",
       "checkpointed",
       false,
       {}},
      {"preempted by checkpoint: leaves for job 9",
       CheckpointThen::kRequeue,
       false,
       by_job,
       {},
       {{1, true, true}, {2, true, true}, {3, true, true}},
       EndKind::kLeaves,
       "ok",
       "preempted by job 9, checkpointed",
       false,
       {}},
      {"gap move: leaves for the hole",
       CheckpointThen::kRequeue,
       false,
       gap,
       {"n5", "n6", "n7"},
       {{1, true, true}, {2, true, true}, {3, true, true}},
       EndKind::kLeaves,
       "ok",
       "checkpointed to move to n5,n6,n7",
       false,
       {}},
      {"gap slot end: leaves",
       CheckpointThen::kRequeue,
       false,
       gap,
       {},
       {{1, true, true}, {2, true, true}, {3, true, true}},
       EndKind::kLeaves,
       "ok",
       "checkpointed at the end of its slot",
       false,
       {}},
      {"a user's migrate fails, no part stopped: runs on",
       CheckpointThen::kRequeue,
       true,
       {},
       {},
       {{1, true, false}, {2, false, false, "no space"}, {3, true, false}},
       EndKind::kRunsOn,
       "n2: no space",
       "",
       false,
       {1, 2, 3}},
      {"a migrate fails after parts stopped: from the start",
       CheckpointThen::kRequeue,
       true,
       {},
       {},
       {{1, true, true}, {2, false, false, "no space"}, {3, true, true}},
       EndKind::kRequeueFromStart,
       "n2: no space",
       "",
       false,
       {2},
       "checkpoint failed (n2: no space)"},
      {"a preemption's dump fails: from the start all the same",
       CheckpointThen::kRequeue,
       false,
       by_job,
       {},
       {{1, false, false, "seize"}, {2, true, true}, {3, true, true}},
       EndKind::kRequeueFromStart,
       "n1: seize",
       "",
       false,
       {1},
       "checkpoint failed (n1: seize)"},
      {"a node never answers: given up, from the start",
       CheckpointThen::kRequeue,
       true,
       {},
       {},
       {{1, true, true}, {2, true, true}},
       EndKind::kRequeueFromStart,
       "n3: no answer",
       "",
       false,
       {},
       "checkpoint failed (n3: no answer)"},
      {"continue, a node never answers: runs on",
       CheckpointThen::kContinue,
       false,
       {},
       {},
       {{1}, {2}},
       EndKind::kRunsOn,
       "n3: no answer",
       "",
       false,
       {1, 2}},
  };
  for (const Scenario& s : scenarios) {
    SCOPED_TRACE(s.name);
    table = JobTable<>();
    JobRecord& record = running_job();
    record.preempted = s.preempted;
    CheckpointRun run = begin_checkpoint_run(
        record.job, s.then, checkpoint_image("/ckpt", record.job, 0), s.to, false, kNow);
    for (const Answer& a : s.answers) {
      ASSERT_TRUE(take_answer(record, run, a.node, "n" + std::to_string(a.node),
                              answer_of(run, a, a.node - 1)));
    }
    const bool timed_out = !run.waiting.empty();
    if (timed_out) {
      // As the caller does: the late nodes are told to kill their parts.
      std::string late;
      for (Rank r : run.waiting) {
        late += (late.empty() ? "" : ",") + std::string("n") + std::to_string(r);
        record.running_on.erase(r);
      }
      give_up_waiting(run, late);
    }
    const CheckpointEnd end = end_checkpoint(record, run, s.asked, timed_out);
    EXPECT_EQ(end.kind, s.kind);
    EXPECT_EQ(run.record.outcome, s.outcome);
    EXPECT_EQ(end.ok, s.outcome == "ok");
    EXPECT_EQ(end.why, s.why);
    EXPECT_EQ(end.hold, s.hold);
    EXPECT_EQ(end.error.empty(), end.ok);
    EXPECT_EQ(record.running_on, s.running_on);
    EXPECT_EQ(record.requeue_when_ended, s.requeue_when_ended);
    if (end.ok) {
      EXPECT_EQ(run.record.image_bytes, 300u);
      EXPECT_DOUBLE_EQ(run.record.dump_seconds, 1.5);  // the slowest node's
    }
    // A job that leaves asks for as many nodes as its images.
    EXPECT_EQ(record.job.spec.request.nodes, s.kind == EndKind::kLeaves ? 3 : 1);
  }
}

TEST_F(CheckpointRunTest, AnswersOfAnotherCheckpointOrRunAreIgnored) {
  JobRecord& record = running_job();
  CheckpointRun run =
      begin_checkpoint_run(record.job, CheckpointThen::kRequeue,
                           checkpoint_image("/ckpt", record.job, 1), {}, false, kNow);
  CheckpointAnswer answer = answer_of(run, {1, true, true}, 0);
  CheckpointAnswer earlier = answer;
  earlier.image_dir = checkpoint_image("/ckpt", record.job, 0) + "/part-0";  // 1-0 vs 2-0
  EXPECT_FALSE(take_answer(record, run, 1, "n1", earlier));
  CheckpointAnswer other_run = answer;
  other_run.attempt = 1;
  EXPECT_FALSE(take_answer(record, run, 1, "n1", other_run));
  EXPECT_FALSE(take_answer(record, run, 4, "n4", answer));  // not one of its nodes
  EXPECT_EQ(record.running_on, (std::set<Rank>{1, 2, 3}));
  EXPECT_TRUE(take_answer(record, run, 1, "n1", answer));
  EXPECT_FALSE(take_answer(record, run, 1, "n1", answer));  // repeated in a Hello
  EXPECT_EQ(run.waiting, (std::set<Rank>{2, 3}));
  EXPECT_EQ(record.running_on, (std::set<Rank>{2, 3}));
  EXPECT_EQ(run.record.image_bytes, 100u);
}

TEST_F(CheckpointRunTest, TheTableCarriesOutTheEnd) {
  // From the start: the parts still running end, then the job is requeued.
  JobRecord& record = running_job();
  CheckpointRun run =
      begin_checkpoint_run(record.job, CheckpointThen::kRequeue,
                           checkpoint_image("/ckpt", record.job, 0), {}, false, kNow);
  ASSERT_TRUE(take_answer(record, run, 1, "n1", answer_of(run, {1, true, true}, 0)));
  ASSERT_TRUE(take_answer(record, run, 2, "n2", answer_of(run, {2, false, false, "x"}, 1)));
  ASSERT_TRUE(take_answer(record, run, 3, "n3", answer_of(run, {3, true, true}, 2)));
  ASSERT_EQ(end_checkpoint(record, run, false, false).kind, EndKind::kRequeueFromStart);
  (void)table.part_ended(record, 2, JobState::kCancelled, 137, "n2: killed");
  AfterRun after = JobTableCore::after_run(record);
  EXPECT_EQ(after.kind, AfterRun::Kind::kRequeue);
  EXPECT_EQ(after.reason, "checkpoint failed (n2: x)");
  (void)table.requeue(record, after.reason);
  EXPECT_EQ(record.job.state, JobState::kPending);
  EXPECT_EQ(record.job.requeue_count, 1);
  // Its next checkpoint writes elsewhere: the attempt is in the directory.
  EXPECT_EQ(checkpoint_image("/ckpt", record.job, 1), "/ckpt/job-7/2-1");
}

TEST_F(CheckpointRunTest, PeriodicCheckpointsComeEveryInterval) {
  JobRecord& record = running_job();                            // started at 2 s
  EXPECT_FALSE(periodic_checkpoint_due(record.job, {}, kNow));  // no interval
  record.job.spec.checkpoint_interval_s = 60;
  EXPECT_FALSE(periodic_checkpoint_due(record.job, {}, 61 * kUsPerSecond));
  EXPECT_TRUE(periodic_checkpoint_due(record.job, {}, 62 * kUsPerSecond));
  CheckpointRecord taken;
  taken.time_us = 62 * kUsPerSecond;
  EXPECT_FALSE(periodic_checkpoint_due(record.job, {taken}, 100 * kUsPerSecond));
  EXPECT_TRUE(periodic_checkpoint_due(record.job, {taken}, 122 * kUsPerSecond));
  record.job.state = JobState::kPending;
  EXPECT_FALSE(periodic_checkpoint_due(record.job, {taken}, 500 * kUsPerSecond));
}

TEST_F(CheckpointRunTest, ANodeLossRestartsFromTheRightCheckpoint) {
  JobRecord& record = running_job();  // 3 tasks, started at 2 s
  auto taken_at = [](TimeUs t, std::string image, std::vector<std::string> nodes) {
    CheckpointRecord r;
    r.time_us = t;
    r.image = std::move(image);
    r.nodes = std::move(nodes);
    r.outcome = "ok";
    return r;
  };
  std::vector<CheckpointRecord> taken = {
      taken_at(kUsPerSecond, "/a", {"n1", "n2", "n3"}),      // before this run
      taken_at(3 * kUsPerSecond, "/b", {"n1", "n2", "n3"}),  // this run
      taken_at(4 * kUsPerSecond, "/c", {"n1", "n2"}),        // 3 tasks on 2 nodes: no fit
  };
  // Without --checkpoint-interval, only the image this run came from.
  EXPECT_EQ(restart_checkpoint(record.job, taken, ""), std::nullopt);
  EXPECT_EQ(restart_checkpoint(record.job, taken, "/a"), std::optional<std::size_t>(0));
  // With it, the newest good one of this run that fits.
  record.job.spec.checkpoint_interval_s = 60;
  EXPECT_EQ(restart_checkpoint(record.job, taken, ""), std::optional<std::size_t>(1));
  taken[1].pruned = true;
  EXPECT_EQ(restart_checkpoint(record.job, taken, ""), std::nullopt);
  taken[1].pruned = false;
  taken[1].outcome = "n2: no space";
  EXPECT_EQ(restart_checkpoint(record.job, taken, "/a"), std::optional<std::size_t>(0));
}

TEST_F(CheckpointRunTest, APendingJobsNextStartRestoresWhatItLeftWith) {
  CheckpointRecord periodic;
  periodic.image = "/p";
  periodic.outcome = "ok";
  CheckpointRecord migrate;
  migrate.then = CheckpointThen::kRequeue;
  migrate.image = "/m";
  migrate.to = {"n5"};
  migrate.outcome = "ok";
  std::vector<CheckpointRecord> taken = {periodic, migrate};
  EXPECT_EQ(next_restore(taken), (NextRestore{"/m", {"n5"}}));
  EXPECT_EQ(next_restore({}), NextRestore{});
  // Once restored, the next start is afresh...
  EXPECT_EQ(mark_restored(taken, "/m"), std::vector<std::size_t>{1});
  EXPECT_TRUE(taken[1].restored);
  EXPECT_EQ(next_restore(taken), NextRestore{});
  // ... unless a node loss left one to restart from.
  taken[0].restore_pending = true;
  EXPECT_EQ(next_restore(taken).image, "/p");
  mark_restored(taken, "/p");
  EXPECT_FALSE(taken[0].restore_pending);
  EXPECT_EQ(next_restore(taken), NextRestore{});
  // A failed one is never restored.
  migrate.outcome = "n1: no space";
  EXPECT_EQ(next_restore({migrate}), NextRestore{});
}

TEST_F(CheckpointRunTest, AfterALeaderRestart) {
  JobRecord& record = running_job();
  auto stored = [&](CheckpointThen then, std::string outcome, bool preempted) {
    CheckpointRecord r;
    r.then = then;
    r.outcome = std::move(outcome);
    r.image = "/ckpt/job-7/x";
    r.preempted = preempted;
    r.preempted_for = preempted ? 9 : 0;
    return r;
  };
  // A checkpoint leaving the job's nodes (for job 9) is waited for again.
  std::vector<CheckpointRecord> taken = {stored(CheckpointThen::kContinue, "", false),
                                         stored(CheckpointThen::kRequeue, "", true)};
  std::optional<CheckpointRun> run = resume_checkpoint_run(record, taken, kNow);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->waiting, (std::set<Rank>{1, 2, 3}));
  EXPECT_EQ(run->deadline, kNow + kCheckpointTimeoutUs);
  EXPECT_EQ(record.preempted, (Preemption{9, PreemptMode::kCheckpoint}));
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].outcome, "unknown: the leader restarted during it");
  // One that left the job running is not: its outcome is unknown.
  record.preempted.reset();
  taken = {stored(CheckpointThen::kContinue, "", false)};
  EXPECT_FALSE(resume_checkpoint_run(record, taken, kNow).has_value());
  EXPECT_EQ(taken[0].outcome, "unknown: the leader restarted during it");
  EXPECT_FALSE(record.preempted.has_value());
  // Nor one of a job no longer running, nor a finished one.
  taken = {stored(CheckpointThen::kRequeue, "ok", false)};
  EXPECT_FALSE(resume_checkpoint_run(record, taken, kNow).has_value());
  EXPECT_EQ(taken[0].outcome, "ok");
}

}  // namespace
}  // namespace hpcq::job
