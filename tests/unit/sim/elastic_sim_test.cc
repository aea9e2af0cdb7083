// The simulator's jobs on whole nodes: the Amdahl runtime model and the
// bookkeeping of Shrink/Expand (work kept, end recomputed, core-seconds).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <vector>

#include "lib/sim/elastic_model.h"
#include "lib/sim/job_set.h"
#include "lib/sim/policy.h"
#include "lib/sim/simulator.h"

namespace hpcq::sim {
namespace {

TEST(ElasticModelTest, AmdahlRuntimeFromTheTimeOnTheMinimum) {
  // 100 s on 2 nodes with s = 0.2: T1 = 100 / (0.2 + 0.4) = 166.7 s.
  const ElasticRun run(100, 2, 0.2, 2, 0);
  EXPECT_NEAR(run.runtime_s(1), 166.667, 1e-3);
  EXPECT_NEAR(run.runtime_s(2), 100, 1e-9);
  EXPECT_NEAR(run.runtime_s(4), 166.667 * 0.4, 1e-3);
  EXPECT_EQ(run.end_s(), 100);
}

TEST(ElasticModelTest, ResizeKeepsTheWorkDone) {
  ElasticRun run(100, 2, 0.0, 2, 0);  // T1 = 200 s
  run.resize(4, 50);                  // half done; the rest takes 25 s on 4
  EXPECT_DOUBLE_EQ(run.left(), 0.5);
  EXPECT_EQ(run.end_s(), 75);
  run.resize(1, 60);  // 10 s of 50 on 4: 0.3 left, 60 s on 1
  EXPECT_NEAR(run.left(), 0.3, 1e-12);
  EXPECT_EQ(run.end_s(), 120);
}

resource::Allocation nodes(std::vector<Rank> ranks) {
  resource::Allocation a;
  int first = 0;
  for (Rank r : ranks) {
    resource::NodeAllocation part;
    part.rank = r;
    part.node = "n" + std::to_string(r);
    part.cores = {0};
    part.numa = {0};
    part.ntasks = 1;
    part.first_task = first++;
    a.nodes.push_back(part);
  }
  return a;
}

SimJob node_job(JobId id, std::int64_t submit, std::int64_t runtime_at_min, int min_nodes,
                int max_nodes, bool elastic, std::int32_t priority) {
  SimJob j;
  j.id = id;
  j.submit_s = submit;
  j.runtime_s = runtime_at_min;
  j.requested_s = runtime_at_min;
  j.min_nodes = min_nodes;
  j.max_nodes = max_nodes;
  j.elastic = elastic;
  j.priority = priority;
  j.serial_fraction = 0;
  return j;
}

TEST(ElasticSimTest, ShrinkAndExpandMoveTheEndAndCountCoreSeconds) {
  // Job 1: 100 s on 1 node (s = 0), started on 2; job 2 only makes cycles
  // at 20 s (its arrival) and 30 s (its end).
  std::vector<SimJob> jobs = {node_job(1, 0, 100, 1, 4, true, 0),
                              node_job(2, 20, 10, 1, 1, false, 0)};
  SimOptions options;
  options.cluster.nodes = 5;
  options.cluster.cores_per_node = 1;
  options.estimates = Estimates::kExact;
  options.decide = [](const sched::Snapshot& s) {
    sched::Decisions d;
    if (s.now == 0) d.decisions.push_back(sched::Start{1, nodes({0, 1})});
    if (s.now == 20 * kUsPerSecond) {
      d.decisions.push_back(sched::Expand{1, nodes({2, 3})});
      d.decisions.push_back(sched::Start{2, nodes({4})});
    }
    if (s.now == 30 * kUsPerSecond) d.decisions.push_back(sched::Shrink{1, {3, 2, 1}});
    return d;
  };
  auto result = simulate(jobs, options);
  ASSERT_TRUE(result.is_ok()) << result.status().message();
  EXPECT_EQ(result->shrinks, 1u);
  EXPECT_EQ(result->expands, 1u);
  ASSERT_EQ(result->jobs.size(), 2u);
  const JobOutcome& one = result->jobs[0];
  EXPECT_EQ(one.id, 1u);
  // 0-20 s on 2 nodes: 0.4 done; 20-30 s on 4 (25 s for all): 0.4 more;
  // the last 0.2 on 1 node takes 20 s.
  EXPECT_EQ(one.end_s, 50);
  // With no serial part the work is conserved: 2*20 + 4*10 + 1*20 = T1.
  EXPECT_DOUBLE_EQ(one.core_seconds, 100);
}

TEST(ElasticSimTest, DecisionsForJobsNotOnWholeNodesAreRefused) {
  SimJob rigid;
  rigid.id = 1;
  rigid.runtime_s = 10;
  rigid.requested_s = 10;
  rigid.size = 1;
  SimOptions options;
  options.cluster.nodes = 2;
  options.cluster.cores_per_node = 1;
  options.decide = [](const sched::Snapshot& s) {
    sched::Decisions d;
    if (s.running.empty()) {
      d.decisions.push_back(sched::Start{1, nodes({0})});
      d.decisions.push_back(sched::Expand{1, nodes({1})});
    }
    return d;
  };
  auto result = simulate({rigid}, options);
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().code(), Code::kInternal);
}

TEST(ElasticSimTest, ElasticPolicyShrinksForAHigherPriorityJobAndExpandsBack) {
  // A: elastic, 400 s on 1 node, up to 4 (s = 0); B: rigid on 2 nodes,
  // higher priority, arrives at 10 s.
  std::vector<SimJob> jobs = {node_job(1, 0, 400, 1, 4, true, 1),
                              node_job(2, 10, 50, 2, 2, false, 5)};
  SimOptions options;
  options.cluster.nodes = 4;
  options.cluster.cores_per_node = 1;
  options.estimates = Estimates::kExact;
  auto config = policy_config("elastic");
  ASSERT_TRUE(config.is_ok());
  options.scheduler = *config;
  options.scheduler.options["elastic.rescale_gap_s"] = "0";
  auto result = simulate(jobs, options);
  ASSERT_TRUE(result.is_ok()) << result.status().message();
  EXPECT_EQ(result->shrinks, 1u);
  EXPECT_EQ(result->expands, 1u);
  ASSERT_EQ(result->jobs.size(), 2u);
  const JobOutcome& a = result->jobs[0];
  const JobOutcome& b = result->jobs[1];
  EXPECT_EQ(b.start_s, 10);  // admitted at once by shrinking A
  EXPECT_EQ(b.end_s, 60);
  // A: 0-10 s on 4 (0.1 done), 10-60 s on 2 (0.25), then 0.65 on 4 = 65 s.
  EXPECT_EQ(a.start_s, 0);
  EXPECT_EQ(a.end_s, 125);
  EXPECT_DOUBLE_EQ(a.core_seconds, 400);
  // The same jobs without the elastic flag: A keeps its 4 nodes and B waits.
  jobs[0].elastic = false;
  auto moldable = simulate(jobs, options);
  ASSERT_TRUE(moldable.is_ok()) << moldable.status().message();
  EXPECT_EQ(moldable->shrinks + moldable->expands, 0u);
  EXPECT_EQ(moldable->jobs[1].start_s, 100);
}

TEST(ElasticSimTest, NodeJobsMustFitTheCluster) {
  SimOptions options;
  options.cluster.nodes = 4;
  options.cluster.cores_per_node = 1;
  EXPECT_EQ(simulate({node_job(1, 0, 10, 2, 8, true, 0)}, options).status().code(),
            Code::kInvalidArgument);
  SimJob wide = node_job(1, 0, 10, 1, 2, true, 0);
  wide.size = 2;  // cores per node
  EXPECT_EQ(simulate({wide}, options).status().code(), Code::kInvalidArgument);
}

TEST(JobSetTest, ParsesRangesPriorityAndDefaults) {
  auto jobs = parse_job_set(
      R"([{"id": 3, "submit_s": 5, "runtime_s": 600, "min_nodes": 2, "max_nodes": 8,
           "elastic": true, "priority": 4, "serial_fraction": 0.1},
          {"id": 4, "submit_s": 6, "runtime_s": 0, "min_nodes": 16}])",
      "set.json");
  ASSERT_TRUE(jobs.is_ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 2u);
  const SimJob& a = (*jobs)[0];
  EXPECT_EQ(a.id, 3u);
  EXPECT_EQ(a.min_nodes, 2);
  EXPECT_EQ(a.max_nodes, 8);
  EXPECT_TRUE(a.elastic);
  EXPECT_EQ(a.priority, 4);
  EXPECT_DOUBLE_EQ(a.serial_fraction, 0.1);
  EXPECT_EQ(a.requested_s, 600);
  const SimJob& b = (*jobs)[1];
  EXPECT_EQ(b.max_nodes, 16);  // rigid
  EXPECT_FALSE(b.elastic);
  EXPECT_EQ(b.size, 1);
  EXPECT_EQ(b.requested_s, 1);  // never 0: that would read as no limit
  auto c = parse_job_set(
      R"([{"id": 5, "submit_s": 0, "runtime_s": 1, "min_nodes": 1, "constraint": "a100&ib", "licenses": "m:2", "gres": "nvme:2"}])",
      "set.json");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ((*c)[0].constraint, "a100&ib");
  EXPECT_EQ((*c)[0].licenses, (std::map<std::string, int>{{"m", 2}}));
  EXPECT_EQ((*c)[0].gres, (std::map<std::string, int>{{"nvme", 2}}));
}

TEST(JobSetTest, RejectsWhatItCannotUseWithTheEntry) {
  auto bad = [](const char* text) {
    auto r = parse_job_set(text, "set.json");
    EXPECT_FALSE(r.is_ok()) << text;
    return r.is_ok() ? std::string() : r.status().message();
  };
  EXPECT_EQ(bad(R"([{"id": 1, "submit_s": 0, "runtime_s": 5, "min_nodes": 4, "max_nodes": 2}])"),
            "set.json: entry 1 (job 1): max_nodes 2 is below min_nodes 4");
  EXPECT_EQ(bad(R"([{"id": 1, "submit_s": 0, "runtime_s": 5, "min_nodes": 1, "nodes": 2}])"),
            "set.json: entry 1: unknown key 'nodes'");
  EXPECT_EQ(bad(R"([{"id": 1, "submit_s": 0, "min_nodes": 1}])"),
            "set.json: entry 1 (job 1): runtime_s is missing");
  EXPECT_EQ(
      bad(R"([{"id": 1, "submit_s": 0, "runtime_s": 5, "min_nodes": 1, "constraint": "a|"}])"),
      "set.json: entry 1 (job 1): -C/--constraint 'a|': an empty feature name");
  EXPECT_EQ(bad(R"([{"id": 1, "submit_s": 0, "runtime_s": 5, "min_nodes": 1, "licenses": "m:0"}])"),
            "set.json: entry 1 (job 1): -L/--licenses 'm:0': bad count '0' for 'm' (want "
            "1..1000000)");
  bad(R"({"id": 1})");
  bad("[");
  bad(R"([{"id": 1, "submit_s": 0, "runtime_s": 5, "min_nodes": 1, "serial_fraction": 2}])");
}

TEST(JobSetTest, PriorityWeightedMeans) {
  std::vector<SimJob> jobs(2);
  jobs[0].id = 1;
  jobs[0].priority = 1;
  jobs[1].id = 2;
  jobs[1].priority = 3;
  std::vector<JobOutcome> outcomes(2);
  outcomes[0] = {1, -1, 0, 10, 110, 1, false, ""};
  outcomes[1] = {2, -1, 0, 2, 22, 1, false, ""};
  const WeightedTimes w = priority_weighted(jobs, outcomes);
  EXPECT_DOUBLE_EQ(w.mean_response_s, (10.0 + 3 * 2.0) / 4);
  EXPECT_DOUBLE_EQ(w.mean_completion_s, (110.0 + 3 * 22.0) / 4);
}

}  // namespace
}  // namespace hpcq::sim
