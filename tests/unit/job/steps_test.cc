// Where steps go within their job's allocation.
#include "lib/job/steps.h"

#include <gtest/gtest.h>

// The requests below name only the fields they set; GCC 12 warns about the
// rest even though each has a default.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace hpcq::job {
namespace {

// Two nodes of four cores, two tasks of one core each per node.
resource::Allocation two_nodes() {
  resource::Allocation job;
  job.cpus_per_task = 1;
  for (Rank r : {1, 2}) {
    resource::NodeAllocation node;
    node.rank = r;
    node.node = "n" + std::to_string(r);
    node.cores = {4, 5, 6, 7};
    node.ntasks = 2;
    node.first_task = 2 * (static_cast<int>(r) - 1);
    job.nodes.push_back(node);
  }
  return job;
}

StepRecord holding(const resource::Allocation& allocation, bool overlap = false) {
  StepRecord step;
  step.allocation = allocation;
  step.request.overlap = overlap;
  return step;
}

TEST(PlaceStep, ByDefaultTheWholeAllocationsTasks) {
  auto step = place_step(two_nodes(), {}, {});
  ASSERT_TRUE(step.is_ok()) << step.status().message();
  ASSERT_EQ(step->nodes.size(), 2u);
  EXPECT_EQ(step->nodes[0].ntasks, 2);
  EXPECT_EQ(step->nodes[1].first_task, 2);
  EXPECT_EQ(step->nodes[1].cores, (std::vector<int>{4, 5}));
}

// sbatch -N 2 -n 3 beside another job: one core on the first node, two on
// the second. srun with no size was refused ("do not fit"): the even layout
// puts two tasks on the first node.
TEST(PlaceStep, ByDefaultAnUnevenAllocationsOwnLayout) {
  resource::Allocation job = two_nodes();
  job.nodes[0].cores = {3};
  job.nodes[0].ntasks = 1;
  job.nodes[1].cores = {0, 1};
  job.nodes[1].ntasks = 2;
  job.nodes[1].first_task = 1;
  auto step = place_step(job, {}, {});
  ASSERT_TRUE(step.is_ok()) << step.status().message();
  ASSERT_EQ(step->nodes.size(), 2u);
  EXPECT_EQ(step->nodes[0].ntasks, 1);
  EXPECT_EQ(step->nodes[1].ntasks, 2);
  EXPECT_EQ(step->nodes[1].first_task, 1);
}

TEST(PlaceStep, NodesAndTasksAsAsked) {
  auto one = place_step(two_nodes(), {}, {.nodes = 1});
  ASSERT_TRUE(one.is_ok());
  ASSERT_EQ(one->nodes.size(), 1u);
  EXPECT_EQ(one->nodes[0].ntasks, 1);  // -N alone: one task per node
  auto three = place_step(two_nodes(), {}, {.ntasks = 3, .cpus_per_task = 2});
  ASSERT_TRUE(three.is_ok()) << three.status().message();
  EXPECT_EQ(three->nodes[0].ntasks, 2);  // the first node gets the extra task
  EXPECT_EQ(three->nodes[0].cores, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(three->nodes[1].cores, (std::vector<int>{4, 5}));
  EXPECT_EQ(three->cpus_per_task, 2);
}

TEST(PlaceStep, ConcurrentStepsGetDisjointCores) {
  BusyCores busy;
  auto first = place_step(two_nodes(), busy, {.nodes = 1, .ntasks = 2});
  ASSERT_TRUE(first.is_ok());
  hold_cores(busy, holding(*first));
  auto second = place_step(two_nodes(), busy, {.nodes = 1, .ntasks = 2});
  ASSERT_TRUE(second.is_ok());
  EXPECT_EQ(second->nodes[0].rank, 1u);
  EXPECT_EQ(second->nodes[0].cores, (std::vector<int>{6, 7}));
  hold_cores(busy, holding(*second));
  auto third = place_step(two_nodes(), busy, {.nodes = 1, .ntasks = 2});
  ASSERT_TRUE(third.is_ok());
  EXPECT_EQ(third->nodes[0].rank, 2u);  // the first node is full
  hold_cores(busy, holding(*third));
  hold_cores(busy, holding(*place_step(two_nodes(), busy, {.nodes = 1, .ntasks = 2})));
  auto waits = place_step(two_nodes(), busy, {.nodes = 1});
  EXPECT_EQ(waits.status().code(), Code::kUnavailable);
  EXPECT_TRUE(place_step(two_nodes(), busy, {.nodes = 2, .overlap = true}).is_ok());
  release_cores(busy, holding(*first));
  EXPECT_TRUE(place_step(two_nodes(), busy, {.nodes = 1, .ntasks = 2}).is_ok());
}

TEST(PlaceStep, NamedNodesOnlyAndWholeNodesForALaunchersDaemon) {
  auto on_n2 = place_step(two_nodes(), {}, {.nodelist = {"n2"}});
  ASSERT_TRUE(on_n2.is_ok()) << on_n2.status().message();
  ASSERT_EQ(on_n2->nodes.size(), 1u);
  EXPECT_EQ(on_n2->nodes[0].node, "n2");
  EXPECT_EQ(on_n2->nodes[0].ntasks, 1);
  EXPECT_EQ(place_step(two_nodes(), {}, {.nodelist = {"n3"}}).status().message(),
            "step: node 'n3' is not one of the job's (n1,n2)");
  EXPECT_EQ(place_step(two_nodes(), {}, {.nodes = 2, .nodelist = {"n1"}}).status().message(),
            "step: -N 2 with 1 nodes named by -w");
  auto off_n1 = place_step(two_nodes(), {}, {.exclude = {"n1", "n9"}});
  ASSERT_TRUE(off_n1.is_ok()) << off_n1.status().message();
  ASSERT_EQ(off_n1->nodes.size(), 1u);
  EXPECT_EQ(off_n1->nodes[0].node, "n2");
  EXPECT_EQ(place_step(two_nodes(), {}, {.exclude = {"n1", "n2"}}).status().message(),
            "step: -x excludes all of the job's nodes");
  // hpcq-rsh: one task with all of the node's cores, beside other steps.
  BusyCores busy{{2, {4, 5}}};
  auto daemon =
      place_step(two_nodes(), busy,
                 {.nodes = 1, .ntasks = 1, .overlap = true, .nodelist = {"n2"}, .whole = true});
  ASSERT_TRUE(daemon.is_ok()) << daemon.status().message();
  EXPECT_EQ(daemon->nodes[0].cores, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(daemon->cpus_per_task, 4);
  auto beside =
      place_step(two_nodes(), busy, {.nodes = 1, .ntasks = 1, .nodelist = {"n2"}, .whole = true});
  ASSERT_TRUE(beside.is_ok()) << beside.status().message();
  EXPECT_EQ(beside->nodes[0].cores, (std::vector<int>{6, 7}));  // the cores no step holds
}

TEST(PlaceStep, WhatCanNeverFitSaysWhy) {
  EXPECT_EQ(place_step(two_nodes(), {}, {.nodes = 3}).status().message(),
            "step: asks for 3 nodes; the job has 2");
  EXPECT_EQ(place_step(two_nodes(), {}, {.nodes = 2, .ntasks = 1}).status().message(),
            "step: 1 tasks cannot run on 2 nodes");
  auto big = place_step(two_nodes(), {}, {.nodes = 1, .ntasks = 5});
  EXPECT_EQ(big.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(big.status().message(),
            "step: 5 tasks of 1 cores on 1 nodes do not fit in the job's allocation");
  EXPECT_FALSE(place_step(two_nodes(), {}, {.nodes = -1}).is_ok());
}

}  // namespace
}  // namespace hpcq::job
