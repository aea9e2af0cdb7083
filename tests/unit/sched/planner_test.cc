#include "lib/sched/planner.h"

#include <gtest/gtest.h>

#include "lib/resource/hwloc_import.h"

namespace hpcq::sched {
namespace {

constexpr TimeUs kNow = 1000 * kUsPerSecond;
constexpr TimeUs at(std::int64_t s) { return kNow + s * kUsPerSecond; }
constexpr TimeUs secs(std::int64_t s) { return s * kUsPerSecond; }

resource::NodePool cluster(int nodes, const std::string& spec) {
  resource::NodePool pool;
  auto t = resource::discover_topology(spec);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  for (int i = 1; i <= nodes; ++i) {
    EXPECT_TRUE(pool.add_node(static_cast<Rank>(i), "n" + std::to_string(i), *t).is_ok());
  }
  return pool;
}

// Takes `cores` cores (and memory) on `rank` in the pool; returns the
// allocation.
resource::Allocation take(resource::NodePool& pool, Rank rank, int cores,
                          std::uint64_t memory = 0) {
  resource::NodeAllocation part;
  part.rank = rank;
  part.memory_bytes = memory;
  const resource::NodeState* node = pool.find(rank);
  for (int c = 0; c < node->total_cores() && static_cast<int>(part.cores.size()) < cores; ++c) {
    if (node->core_free(c)) part.cores.push_back(c);
  }
  resource::Allocation a{{part}};
  EXPECT_TRUE(pool.allocate(a).is_ok());
  return a;
}

std::vector<const resource::NodeState*> all(const resource::NodePool& pool) {
  std::vector<const resource::NodeState*> out;
  for (const auto& n : pool.nodes()) out.push_back(&n);
  return out;
}

resource::ResourceRequest req(int ntasks, int nodes = 0, std::uint64_t mem = 0) {
  resource::ResourceRequest r;
  r.ntasks = ntasks;
  r.nodes = nodes;
  r.mem_per_node_bytes = mem;
  return r;
}

TEST(Planner, ReleasesCountFromTheirEnd) {
  resource::NodePool pool = cluster(1, "core:8 pu:1");
  const resource::Allocation running = take(pool, 1, 6);
  Planner planner(pool, kNow);
  planner.add_release(running, at(100));
  EXPECT_EQ(planner.free_cores_now(), 2);
  EXPECT_EQ(planner.min_free(1, kNow, at(100))->cores, 2);
  EXPECT_EQ(planner.min_free(1, at(100), at(200))->cores, 8);
  EXPECT_FALSE(planner.min_free(9, kNow, at(1)).has_value());

  auto slot = planner.earliest(req(7), secs(50), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, at(100));
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{1, 7, 0}}));
  slot = planner.earliest(req(2), secs(5000), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, kNow);
  EXPECT_FALSE(planner.earliest(req(9), secs(1), all(pool)).has_value());
  EXPECT_FALSE(planner.earliest(req(0), secs(1), all(pool)).has_value());  // malformed
}

TEST(Planner, ReservationsHoldTheirWindow) {
  resource::NodePool pool = cluster(1, "core:8 pu:1");
  const resource::Allocation running = take(pool, 1, 4);
  Planner planner(pool, kNow);
  planner.add_release(running, at(100));
  const NodeShare six{1, 6, 0};
  planner.reserve({&six, 1}, at(100), at(200));
  EXPECT_EQ(planner.min_free(1, at(100), at(200))->cores, 2);
  EXPECT_EQ(planner.min_free(1, at(200), at(300))->cores, 8);
  // Ends exactly when the reservation starts: not limited; a second later,
  // 2 of the 4 free cores are the reservation's.
  EXPECT_TRUE(planner.limits(at(100)).empty());
  const std::vector<NodeShare> limits = planner.limits(at(101));
  ASSERT_EQ(limits.size(), 1u);
  EXPECT_EQ(limits[0].rank, 1u);
  EXPECT_EQ(limits[0].cores, 2);
  EXPECT_EQ(limits[0].memory_bytes,
            pool.find(1)->free_memory());  // none reserved

  auto slot = planner.earliest(req(4), secs(150), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, at(200));
  slot = planner.earliest(req(2), secs(10'000), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, kNow);  // within the 2 extra cores

  // A reservation without an end holds its cores for good.
  const NodeShare two{1, 2, 0};
  planner.reserve({&two, 1}, at(300), kForever);
  EXPECT_EQ(planner.earliest(req(8), secs(1), all(pool))->start, at(200));
  EXPECT_FALSE(planner.earliest(req(8), secs(1000), all(pool)).has_value());
}

TEST(Planner, OverdueAndEndlessJobs) {
  resource::NodePool pool = cluster(1, "core:8 pu:1");
  const resource::Allocation overdue = take(pool, 1, 4);
  const resource::Allocation endless = take(pool, 1, 2);
  Planner planner(pool, kNow);
  planner.add_release(overdue, kNow - secs(5));
  planner.add_release(endless, kForever);
  EXPECT_EQ(planner.earliest(req(6), secs(10), all(pool))->start, kNow + kOverdueGrace);
  EXPECT_FALSE(planner.earliest(req(7), secs(10), all(pool)).has_value());
}

TEST(Planner, StartTakesNowAndGivesBack) {
  resource::NodePool pool = cluster(1, "core:8 pu:1");
  Planner planner(pool, kNow);
  planner.start(take(pool, 1, 3), at(50));
  EXPECT_EQ(planner.free_cores_now(), 5);
  EXPECT_EQ(planner.min_free(1, kNow, at(50))->cores, 5);
  EXPECT_EQ(planner.earliest(req(8), secs(1), all(pool))->start, at(50));
}

TEST(Planner, PicksNodesAsTheAllocatorDoes) {
  resource::NodePool pool = cluster(3, "core:4 pu:1");
  // Free: node 1 2 cores, node 2 3, node 3 4.
  (void)take(pool, 1, 2);
  (void)take(pool, 2, 1);
  Planner planner(pool, kNow);
  // Fewest nodes: no node holds 6, the two roomiest (nodes 2 and 3) do.
  auto slot = planner.earliest(req(6), secs(10), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{2, 3, 0}, {3, 3, 0}}));
  // One node holds it: the first that does.
  EXPECT_EQ(planner.earliest(req(3), secs(10), all(pool))->nodes,
            (std::vector<NodeShare>{{2, 3, 0}}));
  // nodes = 2, 7 tasks: 4 + 3; node 1 (2 free) cannot take 3, the extra
  // task goes to the first node that holds it.
  EXPECT_EQ(planner.earliest(req(7, 2), secs(10), all(pool))->nodes,
            (std::vector<NodeShare>{{2, 3, 0}, {3, 4, 0}}));
  // Candidates in another preference order.
  std::vector<const resource::NodeState*> reversed = all(pool);
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_EQ(planner.earliest(req(2, 2), secs(10), reversed)->nodes,
            (std::vector<NodeShare>{{3, 1, 0}, {2, 1, 0}}));
  // Too few candidates for a 3-node job.
  EXPECT_FALSE(planner.earliest(req(3, 3), secs(10), {reversed.data(), 2}).has_value());
}

TEST(Planner, GangWaitsForItsLastNode) {
  resource::NodePool pool = cluster(3, "core:4 pu:1");
  const resource::Allocation a3 = take(pool, 3, 4);
  const resource::Allocation a1 = take(pool, 1, 4);
  const resource::Allocation a2 = take(pool, 2, 4);
  Planner planner(pool, kNow);
  planner.add_release(a3, at(10));
  planner.add_release(a1, at(30));
  planner.add_release(a2, at(20));
  auto slot = planner.earliest(req(8, 2), secs(5), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, at(20));
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{2, 4, 0}, {3, 4, 0}}));
  // Node 2 is reserved again from +25 s: a 10 s gang now needs node 1.
  const NodeShare two{2, 4, 0};
  planner.reserve({&two, 1}, at(25), at(100));
  slot = planner.earliest(req(8, 2), secs(10), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, at(30));
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{1, 4, 0}, {3, 4, 0}}));
  EXPECT_EQ(planner.earliest(req(12, 3), secs(10), all(pool))->start, at(100));
}

TEST(Planner, MemoryIsPlannedToo) {
  resource::NodePool pool = cluster(1, "core:8 pu:1");
  const std::uint64_t total = pool.find(1)->free_memory();
  ASSERT_GT(total, 0u);
  const resource::Allocation running = take(pool, 1, 1, total);
  Planner planner(pool, kNow);
  planner.add_release(running, at(100));
  // 7 cores are free now, but no memory until +100 s.
  EXPECT_EQ(planner.earliest(req(1, 0, total / 2), secs(10), all(pool))->start, at(100));
  EXPECT_EQ(planner.earliest(req(1), secs(10), all(pool))->start, kNow);
  const NodeShare half{1, 1, total / 2};
  planner.reserve({&half, 1}, at(100), at(200));
  EXPECT_EQ(planner.earliest(req(1, 0, total), secs(10), all(pool))->start, at(200));
}

TEST(Planner, UnschedulableNodesGetNothing) {
  resource::NodePool pool = cluster(2, "core:4 pu:1");
  pool.set_schedulable(1, false);
  Planner planner(pool, kNow);
  EXPECT_EQ(planner.free_cores_now(), 4);
  EXPECT_EQ(planner.earliest(req(2), secs(1), all(pool))->nodes,
            (std::vector<NodeShare>{{2, 2, 0}}));
  EXPECT_FALSE(planner.earliest(req(5), secs(1), all(pool)).has_value());
}

}  // namespace
}  // namespace hpcq::sched
