#include "lib/sim/metrics.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hpcq::sim {
namespace {

TEST(MetricsTest, PercentileIsNumpyLinear) {
  // numpy.percentile([1, 2, 3, 4], 95) == 3.85; ([5], 95) == 5
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 95), 3.85);
  EXPECT_DOUBLE_EQ(percentile({5}, 95), 5);
  EXPECT_DOUBLE_EQ(percentile({}, 95), 0);
  EXPECT_DOUBLE_EQ(percentile({0, 10}, 50), 5);
  EXPECT_DOUBLE_EQ(percentile({0, 10, 20}, 100), 20);
}

TEST(MetricsTest, BoundedSlowdownUsesTheThreshold) {
  EXPECT_DOUBLE_EQ(bounded_slowdown(90, 10, 60), 100.0 / 60);  // short job: over tau
  EXPECT_DOUBLE_EQ(bounded_slowdown(100, 200, 60), 1.5);       // long job: over its run
  EXPECT_DOUBLE_EQ(bounded_slowdown(0, 30, 60), 0.5);          // unclamped
}

TEST(MetricsTest, BackfilledCountAndEmpty) {
  std::vector<JobOutcome> jobs = {{1, 0, 0, 5, 15, 2, false}, {2, 0, 1, 1, 2, 1, true}};
  const Metrics m = compute_metrics(jobs, 4);
  EXPECT_EQ(m.backfilled, 1u);
  EXPECT_EQ(m.makespan_s, 15);
  EXPECT_DOUBLE_EQ(m.utilization, (2 * 10 + 1) / (4.0 * 15));
  const Metrics empty = compute_metrics({}, 4);
  EXPECT_EQ(empty.jobs, 0u);
  EXPECT_EQ(empty.makespan_s, 0);
}

TEST(MetricsTest, PerQueueAndPerUserBreakdowns) {
  // Queue "q1": job 1 (user 7, waits 0, runs 10 on 2 cores = 20 core-s) and
  // job 3 (user 8, waits 20, runs 20 on 1 core = 20 core-s); default queue:
  // job 2 (user 7, waits 5, runs 40 on 1 core = 40 core-s). 80 core-s in all.
  std::vector<JobOutcome> jobs = {{1, 7, 0, 0, 10, 2, false, "q1"},
                                  {2, 7, 0, 5, 45, 1, false, ""},
                                  {3, 8, 0, 20, 40, 1, true, "q1"}};
  const Metrics m = compute_metrics(jobs, 4);
  ASSERT_EQ(m.queues.size(), 2u);
  EXPECT_EQ(m.queues[0].queue, "");
  EXPECT_EQ(m.queues[0].jobs, 1u);
  EXPECT_DOUBLE_EQ(m.queues[0].mean_wait_s, 5);
  EXPECT_DOUBLE_EQ(m.queues[0].mean_bsld_10, 45.0 / 40);
  EXPECT_DOUBLE_EQ(m.queues[0].share, 0.5);
  EXPECT_EQ(m.queues[1].queue, "q1");
  EXPECT_EQ(m.queues[1].jobs, 2u);
  EXPECT_DOUBLE_EQ(m.queues[1].core_seconds, 40);
  EXPECT_DOUBLE_EQ(m.queues[1].mean_wait_s, 10);
  EXPECT_DOUBLE_EQ(m.queues[1].mean_bsld_10, (1.0 + 2.0) / 2);
  EXPECT_DOUBLE_EQ(m.queues[1].share, 0.5);
  ASSERT_EQ(m.users.size(), 2u);
  EXPECT_EQ(m.users[0].user, 7);
  EXPECT_DOUBLE_EQ(m.users[0].share, 60.0 / 80);
  EXPECT_DOUBLE_EQ(m.users[1].share, 20.0 / 80);
}

}  // namespace
}  // namespace hpcq::sim
