// Paper 000's Experiment 2 in the simulator: the runtime model
// (granularity_model.h), the job set's MPI keys and the runtime seam.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lib/resource/hwloc_import.h"
#include "lib/sim/granularity_model.h"
#include "lib/sim/job_set.h"
#include "lib/sim/simulator.h"

namespace hpcq::sim {
namespace {

// 2 packages x 16 cores (the paper's 2 x 18 less 2 reserved per socket).
resource::NodeTopology paper_node() {
  auto t = resource::discover_topology("pack:2 core:16 pu:1");
  EXPECT_TRUE(t.is_ok());
  return *t;
}

// `ranks` ranks on node `rank`, cores [first, first + ranks), one worker of
// `per_worker` ranks each (0: no workers recorded).
resource::NodeAllocation part(Rank rank, int first, int ranks, int per_worker = 0) {
  resource::NodeAllocation p;
  p.rank = rank;
  p.node = "n" + std::to_string(rank);
  for (int c = first; c < first + ranks; ++c) p.cores.push_back(c);
  p.ntasks = ranks;
  if (per_worker > 0) {
    for (int w = 0; w * per_worker < ranks; ++w) {
      resource::WorkerPlacement wp;
      wp.id = w;
      for (int r = 0; r < per_worker; ++r) wp.ranks.push_back(w * per_worker + r);
      p.workers.push_back(wp);
    }
  }
  return p;
}

SimJob mpi(JobId id, const char* cls, std::int64_t base_s) {
  SimJob j;
  j.id = id;
  j.size = 16;
  j.runtime_s = base_s;
  j.requested_s = 10 * base_s;
  j.mpi_class = cls;
  return j;
}

TEST(GranularityModel, ClassesAndProfiles) {
  EXPECT_EQ(parse_mpi_class("stream"), MpiClass::kStream);
  EXPECT_FALSE(parse_mpi_class("hpl").has_value());
  EXPECT_EQ(class_profile(MpiClass::kStream), resource::Profile::kMemory);
  EXPECT_EQ(class_profile(MpiClass::kRrb), resource::Profile::kNetwork);
  EXPECT_EQ(class_profile(MpiClass::kFft), resource::Profile::kNetwork);
  EXPECT_EQ(class_profile(MpiClass::kMinife), resource::Profile::kCpu);
  EXPECT_EQ(class_profile(MpiClass::kDgemm), resource::Profile::kCpu);
}

TEST(GranularityModel, PinnedStreamOnOneSocketIsBandwidthBound) {
  const std::vector<SimJob> jobs = {mpi(1, "stream", 100), mpi(2, "stream", 100)};
  const GranularityModel pinned(jobs, paper_node(), true);
  const GranularityModel unpinned(jobs, paper_node(), false);
  resource::Allocation whole;
  whole.nodes = {part(0, 0, 16)};  // one socket: 16 ranks over 8 ranks' bandwidth
  EXPECT_DOUBLE_EQ(pinned.factors(MpiClass::kStream, whole, {}).memory, 2.0);
  EXPECT_EQ(pinned.runtime_s(jobs[0], whole, {}), 200);
  // Unpinned, the ranks float over both sockets: 8 each, no slowdown alone.
  EXPECT_DOUBLE_EQ(unpinned.factors(MpiClass::kStream, whole, {}).memory, 1.0);
  // Split one rank per worker over 4 nodes, 4 ranks each: no contention, and
  // the fine-grained speed-up.
  resource::Allocation fine;
  for (Rank r = 0; r < 4; ++r) fine.nodes.push_back(part(r, 0, 4, 1));
  const auto f = pinned.factors(MpiClass::kStream, fine, {});
  EXPECT_DOUBLE_EQ(f.memory, 1.0);
  EXPECT_DOUBLE_EQ(f.split, 0.85);
  EXPECT_EQ(pinned.runtime_s(jobs[0], fine, {}), 85);
  // A running STREAM job on the same socket of node 0 adds its load.
  sched::RunningJob other;
  other.id = 2;
  other.allocation.nodes = {part(0, 4, 12)};
  const std::vector<sched::RunningJob> running = {other};
  EXPECT_DOUBLE_EQ(pinned.factors(MpiClass::kStream, fine, running).memory, 2.0);
  // On the other socket (cores 16..27) it does not.
  std::vector<sched::RunningJob> far = {other};
  far[0].allocation.nodes = {part(0, 16, 12)};
  EXPECT_DOUBLE_EQ(pinned.factors(MpiClass::kStream, fine, far).memory, 1.0);
}

TEST(GranularityModel, PinningSplittingAndNetwork) {
  const std::vector<SimJob> jobs = {mpi(1, "dgemm", 100), mpi(2, "rrb", 100)};
  const GranularityModel pinned(jobs, paper_node(), true);
  const GranularityModel unpinned(jobs, paper_node(), false);
  resource::Allocation whole;
  whole.nodes = {part(0, 0, 16, 16)};
  EXPECT_EQ(pinned.runtime_s(jobs[0], whole, {}), 100);
  EXPECT_EQ(unpinned.runtime_s(jobs[0], whole, {}), 128);
  EXPECT_EQ(unpinned.runtime_s(jobs[1], whole, {}), 110);
  resource::Allocation scale;
  for (Rank r = 0; r < 4; ++r) scale.nodes.push_back(part(r, 0, 4, 4));
  EXPECT_EQ(pinned.runtime_s(jobs[0], scale, {}), 95);
  // A network job over two nodes pays for it; splitting never speeds it.
  resource::Allocation two;
  two.nodes = {part(0, 0, 8, 1), part(1, 0, 8, 1)};
  EXPECT_EQ(pinned.runtime_s(jobs[1], two, {}), 300);
  // No class: the job's own runtime.
  SimJob plain = mpi(3, "", 42);
  EXPECT_EQ(pinned.runtime_s(plain, whole, {}), 42);
}

TEST(GranularityJobSet, ParsesMpiJobs) {
  auto jobs = parse_job_set(
      R"([{"id": 1, "submit_s": 5, "runtime_s": 100, "ranks": 16, "class": "stream"},
          {"id": 2, "submit_s": 6, "runtime_s": 50, "ranks": 8, "profile": "network",
           "workers": 2}])",
      "jobs.json");
  ASSERT_TRUE(jobs.is_ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].size, 16);
  EXPECT_EQ((*jobs)[0].min_nodes, 0);
  EXPECT_EQ((*jobs)[0].mpi_class, "stream");
  EXPECT_EQ((*jobs)[0].profile, resource::Profile::kMemory);
  EXPECT_EQ((*jobs)[1].profile, resource::Profile::kNetwork);
  EXPECT_EQ((*jobs)[1].workers, 2);
  EXPECT_TRUE((*jobs)[1].mpi_class.empty());
  const char* bad[] = {
      R"([{"id": 1, "submit_s": 0, "runtime_s": 1, "min_nodes": 1, "class": "stream"}])",
      R"([{"id": 1, "submit_s": 0, "runtime_s": 1, "ranks": 4, "min_nodes": 1}])",
      R"([{"id": 1, "submit_s": 0, "runtime_s": 1, "ranks": 4, "class": "hpl"}])",
      R"([{"id": 1, "submit_s": 0, "runtime_s": 1, "ranks": 4, "profile": "io"}])",
      R"([{"id": 1, "submit_s": 0, "runtime_s": 1, "ranks": 4, "workers": 5}])",
      R"([{"id": 1, "submit_s": 0, "runtime_s": 1, "ranks": 0}])",
  };
  for (const char* text : bad) EXPECT_FALSE(parse_job_set(text, "j").is_ok()) << text;
}

TEST(GranularitySim, RuntimeSeamAndPluginEndToEnd) {
  // Two STREAM jobs on one 2-socket node: pinned CM puts each on a socket of
  // its own (16 ranks over 8 ranks' bandwidth: twice its base time).
  std::vector<SimJob> jobs = {mpi(1, "stream", 100), mpi(2, "stream", 100)};
  jobs[1].submit_s = 10;
  for (SimJob& j : jobs) j.profile = resource::Profile::kMemory;
  SimOptions options;
  options.cluster.groups.push_back({1, paper_node()});
  options.scheduler.plugins = {"fcfs", "granularity"};
  options.scheduler.options["granularity.policy"] = "none";
  const GranularityModel model(jobs, paper_node(), true);
  options.runtime = [&model](const SimJob& job, const resource::Allocation& allocation,
                             std::span<const sched::RunningJob> running) {
    return model.runtime_s(job, allocation, running);
  };
  auto result = simulate(jobs, options);
  ASSERT_TRUE(result.is_ok()) << result.status().message();
  ASSERT_EQ(result->jobs.size(), 2u);
  EXPECT_EQ(result->jobs[0].end_s - result->jobs[0].start_s, 200);
  EXPECT_EQ(result->jobs[1].end_s - result->jobs[1].start_s, 200);
  // Without the seam: the base time.
  options.runtime = {};
  auto plain = simulate(jobs, options);
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(plain->jobs[0].end_s - plain->jobs[0].start_s, 100);
}

}  // namespace
}  // namespace hpcq::sim
