#include "lib/sim/metrics.h"

#include <gtest/gtest.h>

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
  EXPECT_DOUBLE_EQ(bounded_slowdown(100, 200, 60), 1.5);        // long job: over its run
  EXPECT_DOUBLE_EQ(bounded_slowdown(0, 30, 60), 0.5);           // unclamped
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

}  // namespace
}  // namespace hpcq::sim
