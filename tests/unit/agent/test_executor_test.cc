// The test executor: jobs "run" for HPCQ_TEST_DURATION seconds without any
// process, end by themselves, by cancel or at their time limit, and the
// executor's fd tells the agent's loop when to reap.
#include "agent/executor/test_executor.h"

#include <gtest/gtest.h>
#include <poll.h>

#include "lib/core/clock.h"

namespace hpcq::agent {
namespace {

JobLaunch launch_of(JobId id, const char* duration, std::int64_t time_limit_s = 0) {
  JobLaunch l;
  l.id = id;
  if (duration) l.env["HPCQ_TEST_DURATION"] = duration;
  l.time_limit_s = time_limit_s;
  return l;
}

// Waits on the executor's fd (up to 10 s) and reaps.
std::vector<JobExit> wait_and_reap(Executor& e) {
  pollfd p{e.wait_fds().at(0), POLLIN, 0};
  poll(&p, 1, 10000);
  return e.reap();
}

TEST(ExitKindTest, Names) {
  EXPECT_EQ(exit_kind_name(ExitKind::kTimeout), std::string("timeout"));
  EXPECT_EQ(exit_kind_name(ExitKind::kCancelled), std::string("cancelled"));
}

TEST(TestExecutorTest, ZeroDurationCompletesAtOnce) {
  auto e = TestExecutor::create();
  ASSERT_TRUE(e.is_ok());
  ASSERT_TRUE((*e)->launch(launch_of(1, nullptr), wall_clock_now()).is_ok());
  auto ended = wait_and_reap(**e);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].id, 1u);
  EXPECT_EQ(ended[0].kind, ExitKind::kCompleted);
  EXPECT_TRUE((*e)->running().empty());
}

TEST(TestExecutorTest, AJobIsStartedAsItIsLaunched) {
  auto e = TestExecutor::create();
  ASSERT_TRUE(e.is_ok());
  ASSERT_TRUE((*e)->launch(launch_of(7, "100"), wall_clock_now()).is_ok());
  auto started = (*e)->take_started();
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].id, 7u);
  EXPECT_EQ(started[0].step, 0u);
  EXPECT_TRUE((*e)->take_started().empty());  // named once
}

TEST(TestExecutorTest, RunsForItsDurationThenCompletes) {
  auto e = TestExecutor::create();
  TimeUs start = wall_clock_now();
  ASSERT_TRUE((*e)->launch(launch_of(2, "0.3"), start).is_ok());
  EXPECT_TRUE((*e)->reap().empty());
  EXPECT_EQ((*e)->running(), std::vector<JobId>{2});
  std::vector<JobExit> ended;
  while (ended.empty()) ended = wait_and_reap(**e);
  EXPECT_EQ(ended[0].kind, ExitKind::kCompleted);
  EXPECT_GE(wall_clock_now() - start, 300'000);
}

TEST(TestExecutorTest, CancelAndTimeLimit) {
  auto e = TestExecutor::create();
  ASSERT_TRUE((*e)->launch(launch_of(3, "1000"), wall_clock_now()).is_ok());
  ASSERT_TRUE((*e)->launch(launch_of(4, "1000", /*time_limit_s=*/1), wall_clock_now()).is_ok());
  ASSERT_TRUE((*e)->cancel(3).is_ok());
  auto ended = wait_and_reap(**e);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].kind, ExitKind::kCancelled);
  while (ended.empty() || ended[0].id != 4) ended = wait_and_reap(**e);
  EXPECT_EQ(ended[0].kind, ExitKind::kTimeout);
  EXPECT_EQ((*e)->cancel(4).code(), Code::kNotFound);
}

TEST(TestExecutorTest, BadDurationIsRefused) {
  auto e = TestExecutor::create();
  EXPECT_EQ((*e)->launch(launch_of(5, "soon"), wall_clock_now()).code(), Code::kInvalidArgument);
  EXPECT_EQ((*e)->launch(launch_of(6, "-1"), wall_clock_now()).code(), Code::kInvalidArgument);
  EXPECT_TRUE((*e)->running().empty());
}

TEST(TestExecutorTest, RefusesCheckpointAndRestoreWithAReason) {
  auto e = TestExecutor::create();
  ASSERT_TRUE(e.is_ok());
  Status capable = (*e)->checkpoint_capability();
  EXPECT_EQ(capable.code(), Code::kFailedPrecondition);
  EXPECT_NE(capable.message().find("runs no processes"), std::string::npos);
  EXPECT_EQ((*e)->begin_checkpoint(1, "/tmp/x", CheckpointThen::kStop).code(), Code::kNotFound);
  ASSERT_TRUE((*e)->launch(launch_of(1, "100"), wall_clock_now()).is_ok());
  EXPECT_EQ((*e)->begin_checkpoint(1, "/tmp/x", CheckpointThen::kStop).code(),
            Code::kFailedPrecondition);
  EXPECT_EQ((*e)->running(), std::vector<JobId>{1});  // still running: nothing happened to it
  EXPECT_EQ((*e)->begin_restore(launch_of(2, "1"), "/tmp/x", wall_clock_now()).code(),
            Code::kFailedPrecondition);
  EXPECT_EQ((*e)->running(), std::vector<JobId>{1});
}

}  // namespace
}  // namespace hpcq::agent
