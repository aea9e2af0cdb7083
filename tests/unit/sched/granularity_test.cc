// Plugin "granularity" (papers/000, Algorithms 1-4) through a whole cycle.
#include "lib/sched/plugins/granularity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "lib/resource/hwloc_import.h"
#include "lib/sched/scheduler.h"

namespace hpcq::sched {
namespace {

using resource::GranularityPolicy;
using resource::Profile;

// `nodes` nodes (ranks 1..nodes) of 2 packages x 2 NUMA domains x `cores`
// cores each.
resource::NodePool make_pool(int nodes, int cores = 4) {
  resource::NodePool pool;
  auto t = resource::discover_topology("pack:2 numa:2 core:" + std::to_string(cores) + " pu:1");
  EXPECT_TRUE(t.is_ok());
  for (int r = 1; r <= nodes; ++r) {
    EXPECT_TRUE(pool.add_node(static_cast<Rank>(r), "n" + std::to_string(r), *t).is_ok());
  }
  return pool;
}

PendingJob mpi_job(JobId id, int ranks, std::optional<Profile> profile, int workers = 0) {
  PendingJob j;
  j.id = id;
  j.submit_time = static_cast<TimeUs>(id);
  j.request.ntasks = ranks;
  j.time_limit_s = 600;
  j.profile = profile;
  j.workers = workers;
  return j;
}

SchedulerConfig config(std::string_view policy, bool task_group = true) {
  SchedulerConfig c;
  c.actions = {"allocate"};
  c.plugins = {"fcfs", "granularity"};
  c.options["granularity.policy"] = std::string(policy);
  c.options["granularity.task_group"] = task_group ? "true" : "false";
  return c;
}

// The allocation the cycle starts `job` with (nullopt: not started).
std::optional<resource::Allocation> start(const SchedulerConfig& c, const resource::NodePool& pool,
                                          const PendingJob& job,
                                          std::vector<RunningJob> running = {}) {
  auto scheduler = Scheduler::create(c);
  EXPECT_TRUE(scheduler.is_ok()) << scheduler.status().message();
  if (!scheduler.is_ok()) return std::nullopt;
  Snapshot snapshot;
  snapshot.pool = &pool;
  snapshot.queue = {job};
  snapshot.running = std::move(running);
  Decisions d = scheduler->cycle(snapshot);
  for (Decision& x : d.decisions) {
    if (Start* s = std::get_if<Start>(&x); s != nullptr && s->job == job.id) {
      return std::move(s->allocation);
    }
  }
  return std::nullopt;
}

struct Counts {
  int nodes = 0;
  int workers = 0;
  int groups = 0;
};

Counts counts(const resource::Allocation& a) {
  Counts c;
  c.nodes = static_cast<int>(a.nodes.size());
  std::set<int> groups;
  for (const auto& part : a.nodes) {
    c.workers += static_cast<int>(part.workers.size());
    for (const auto& w : part.workers) groups.insert(w.group);
  }
  c.groups = static_cast<int>(groups.size());
  return c;
}

TEST(GranularityPlugin, Algorithm1CountsForEachProfileAndPolicy) {
  // 4 nodes of 16 cores, a 16-rank job: N_n = 4, N_t = 16 (the paper's
  // Experiment 2 in small).
  const resource::NodePool pool = make_pool(4);
  struct Row {
    const char* policy;
    Profile profile;
    int nodes, workers, groups;
  };
  const Row rows[] = {
      {"scale", Profile::kCpu, 4, 4, 4},
      {"scale", Profile::kMemory, 4, 4, 4},
      {"scale", Profile::kNetwork, 1, 1, 1},
      {"granularity", Profile::kCpu, 4, 16, 4},
      {"granularity", Profile::kMemory, 4, 16, 4},
      {"granularity", Profile::kNetwork, 1, 1, 1},
      {"none", Profile::kCpu, 1, 1, 1},
      {"none", Profile::kMemory, 1, 1, 1},
      {"none", Profile::kNetwork, 1, 1, 1},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(std::string(row.policy) + " " + std::string(resource::profile_name(row.profile)));
    auto a = start(config(row.policy), pool, mpi_job(1, 16, row.profile));
    ASSERT_TRUE(a.has_value());
    const Counts c = counts(*a);
    EXPECT_EQ(c.nodes, row.nodes);
    EXPECT_EQ(c.workers, row.workers);
    EXPECT_EQ(c.groups, row.groups);
    EXPECT_EQ(a->total_cores(), 16);
  }
}

TEST(GranularityPlugin, JobsWithoutAProfileAreLeftAlone) {
  const resource::NodePool pool = make_pool(4);
  auto a = start(config("granularity"), pool, mpi_job(1, 16, std::nullopt));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->nodes.size(), 1u);
  EXPECT_TRUE(a->nodes[0].workers.empty());
}

TEST(GranularityPlugin, NetworkJobIsNeverSplitOneRankPerContainer) {
  const resource::NodePool pool = make_pool(4);
  // Even when the user asks for one worker per rank.
  auto a = start(config("granularity"), pool, mpi_job(1, 16, Profile::kNetwork, 16));
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->nodes.size(), 1u);
  ASSERT_EQ(a->nodes[0].workers.size(), 1u);
  EXPECT_EQ(a->nodes[0].workers[0].ranks.size(), 16u);
  // Too big for one node: one coarse worker per node it needs.
  auto big = start(config("granularity"), pool, mpi_job(2, 32, Profile::kNetwork));
  ASSERT_TRUE(big.has_value());
  const Counts c = counts(*big);
  EXPECT_EQ(c.nodes, 2);
  EXPECT_EQ(c.workers, 2);
  for (const auto& part : big->nodes) {
    ASSERT_EQ(part.workers.size(), 1u);
    EXPECT_EQ(part.workers[0].ranks.size(), 16u);
  }
}

TEST(GranularityPlugin, UserWorkerCountOverrides) {
  const resource::NodePool pool = make_pool(4);
  auto a = start(config("granularity"), pool, mpi_job(1, 16, Profile::kCpu, 8));
  ASSERT_TRUE(a.has_value());
  Counts c = counts(*a);
  EXPECT_EQ(c.nodes, 4);
  EXPECT_EQ(c.workers, 8);
  for (const auto& part : a->nodes) {
    for (const auto& w : part.workers) EXPECT_EQ(w.ranks.size(), 2u);
  }
  auto none = start(config("none"), pool, mpi_job(2, 16, Profile::kMemory, 2));
  ASSERT_TRUE(none.has_value());
  c = counts(*none);
  EXPECT_EQ(c.nodes, 1);
  EXPECT_EQ(c.workers, 2);
  // 3 workers cannot be dealt evenly over 2 nodes: one node holds all three.
  const resource::NodePool two = make_pool(2);
  auto three = start(config("scale"), two, mpi_job(3, 16, Profile::kCpu, 3));
  ASSERT_TRUE(three.has_value());
  c = counts(*three);
  EXPECT_EQ(c.nodes, 1);
  EXPECT_EQ(c.workers, 3);
}

TEST(GranularityPlugin, GroupsLandOnDistinctNodesWithTheirWorkersTogether) {
  const resource::NodePool pool = make_pool(4);
  auto a = start(config("granularity"), pool, mpi_job(1, 16, Profile::kMemory));
  ASSERT_TRUE(a.has_value());
  std::set<Rank> ranks;
  std::set<int> groups;
  std::vector<int> seen_ranks;
  for (const auto& part : a->nodes) {
    ranks.insert(part.rank);
    ASSERT_FALSE(part.workers.empty());
    const int group = part.workers[0].group;
    EXPECT_TRUE(groups.insert(group).second) << "group " << group << " on two nodes";
    std::set<int> cores;
    for (const auto& w : part.workers) {
      EXPECT_EQ(w.group, group);  // one group per node
      for (int r : w.ranks) seen_ranks.push_back(r);
      for (int core : w.cores) EXPECT_TRUE(cores.insert(core).second) << "core shared";
    }
    // The workers share out exactly the node's cores.
    EXPECT_EQ(cores, std::set<int>(part.cores.begin(), part.cores.end()));
  }
  EXPECT_EQ(ranks.size(), 4u);
  std::sort(seen_ranks.begin(), seen_ranks.end());
  std::vector<int> all(16);
  for (int i = 0; i < 16; ++i) all[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(seen_ranks, all);
}

// A job running on `cores` of each node in `ranks`, its allocation taken
// from `pool`.
RunningJob running_on(resource::NodePool& pool, JobId id, std::vector<Rank> ranks, int cores) {
  RunningJob r;
  r.id = id;
  r.end_estimate = 3600 * kUsPerSecond;
  for (Rank rank : ranks) {
    resource::NodeAllocation part;
    part.rank = rank;
    part.node = "n" + std::to_string(rank);
    for (int c = 0; c < cores; ++c) part.cores.push_back(c);
    part.numa = {0};
    part.ntasks = cores;
    r.allocation.nodes.push_back(part);
  }
  r.request.ntasks = cores * static_cast<int>(ranks.size());
  EXPECT_TRUE(pool.allocate(r.allocation).is_ok());
  return r;
}

TEST(GranularityPlugin, TaskGroupsAvoidNodesHoldingOtherGroups) {
  resource::NodePool pool = make_pool(4);
  std::vector<RunningJob> running = {running_on(pool, 9, {1, 2}, 4)};
  // 2 ranks, scale: two groups. Nodes 1 and 2 each hold a group already.
  auto tg = start(config("scale"), pool, mpi_job(1, 2, Profile::kCpu), running);
  ASSERT_TRUE(tg.has_value());
  ASSERT_EQ(tg->nodes.size(), 2u);
  EXPECT_EQ(tg->nodes[0].rank, 3u);
  EXPECT_EQ(tg->nodes[1].rank, 4u);
  // Without task-group scoring: the earliest nodes that fit.
  auto plain = start(config("scale", false), pool, mpi_job(1, 2, Profile::kCpu), running);
  ASSERT_TRUE(plain.has_value());
  ASSERT_EQ(plain->nodes.size(), 2u);
  EXPECT_EQ(plain->nodes[0].rank, 1u);
  EXPECT_EQ(plain->nodes[1].rank, 2u);
}

TEST(GranularityPlugin, BackfillReservesForTheShapedRequest) {
  // Node 1 full until 100 s; nodes 2-4 hold 14 of 16 cores until 200 s. A
  // 16-rank scale job needs 4 ranks on each of 4 nodes: 200 s, not the
  // 100 s at which 16 ranks would fit on node 1 alone.
  resource::NodePool pool = make_pool(4);
  std::vector<RunningJob> running = {running_on(pool, 9, {1}, 16),
                                     running_on(pool, 10, {2, 3, 4}, 14)};
  running[0].end_estimate = 100 * kUsPerSecond;
  running[1].end_estimate = 200 * kUsPerSecond;
  SchedulerConfig c = config("scale");
  c.actions = {"allocate", "backfill"};
  auto scheduler = Scheduler::create(c);
  ASSERT_TRUE(scheduler.is_ok()) << scheduler.status().message();
  Snapshot snapshot;
  snapshot.pool = &pool;
  snapshot.running = running;
  snapshot.queue = {mpi_job(1, 16, Profile::kCpu)};
  const Decisions d = scheduler->cycle(snapshot);
  std::optional<TimeUs> reserved;
  for (const Decision& x : d.decisions) {
    if (const Reserve* r = std::get_if<Reserve>(&x)) reserved = r->time;
  }
  ASSERT_TRUE(reserved.has_value());
  EXPECT_EQ(*reserved, 200 * kUsPerSecond);
}

TEST(GranularityPlugin, SlotsPerWorkerAsAlgorithm2) {
  // 18 ranks, scale, 4 nodes: 4 workers of 5, 5, 4, 4 ranks dealt
  // round-robin (worker 0: 0, 4, 8, 12, 16), each on as many cores.
  const resource::NodePool pool = make_pool(4);
  auto a = start(config("scale"), pool, mpi_job(1, 18, Profile::kCpu));
  ASSERT_TRUE(a.has_value());
  std::map<int, resource::WorkerPlacement> by_id;
  for (const auto& part : a->nodes) {
    ASSERT_EQ(part.workers.size(), 1u);
    EXPECT_EQ(static_cast<int>(part.workers[0].ranks.size()), part.ntasks);
    by_id[part.workers[0].id] = part.workers[0];
  }
  ASSERT_EQ(by_id.size(), 4u);
  EXPECT_EQ(by_id[0].ranks, (std::vector<int>{0, 4, 8, 12, 16}));
  EXPECT_EQ(by_id[1].ranks, (std::vector<int>{1, 5, 9, 13, 17}));
  EXPECT_EQ(by_id[2].ranks, (std::vector<int>{2, 6, 10, 14}));
  EXPECT_EQ(by_id[3].ranks, (std::vector<int>{3, 7, 11, 15}));
  for (const auto& [id, w] : by_id) EXPECT_EQ(w.cores.size(), w.ranks.size()) << id;

  // Two cores per rank, granularity: 8 one-rank workers of 2 cores each.
  PendingJob wide = mpi_job(2, 8, Profile::kMemory);
  wide.request.cpus_per_task = 2;
  auto b = start(config("granularity"), pool, wide);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(counts(*b).workers, 8);
  for (const auto& part : b->nodes) {
    for (const auto& w : part.workers) {
      EXPECT_EQ(w.ranks.size(), 1u);
      EXPECT_EQ(w.cores.size(), 2u);
    }
  }
}

TEST(GranularityPlugin, Options) {
  EXPECT_TRUE(GranularityPlugin::create({{"policy", "scale"}}).is_ok());
  EXPECT_TRUE(GranularityPlugin::create({}).is_ok());
  EXPECT_FALSE(GranularityPlugin::create({{"policy", "fine"}}).is_ok());
  EXPECT_FALSE(GranularityPlugin::create({{"task_group", "yes"}}).is_ok());
  EXPECT_FALSE(GranularityPlugin::create({{"depth", "1"}}).is_ok());
  SchedulerConfig c = config("granularity");
  EXPECT_TRUE(Scheduler::create(c).is_ok());
}

}  // namespace
}  // namespace hpcq::sched
