#include "lib/sched/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <ostream>
#include <random>

#include "lib/resource/hwloc_import.h"

namespace hpcq::sched {

// For failure messages (found by argument-dependent lookup, so outside the
// anonymous namespace).
void PrintTo(const NodeShare& s, std::ostream* os) {
  *os << "{rank " << s.rank << ", cores " << s.cores << ", memory " << s.memory_bytes << ", gpus "
      << s.gpus;
  for (const auto& [name, units] : s.gres) *os << ", " << name << " " << units;
  *os << "}";
}

namespace {

constexpr TimeUs kNow = 1000 * kUsPerSecond;
constexpr TimeUs at(std::int64_t s) { return kNow + s * kUsPerSecond; }
constexpr TimeUs secs(std::int64_t s) { return s * kUsPerSecond; }

// `nodes` nodes of `spec` (hwloc synthetic), each with `gpus` GPUs.
resource::NodePool cluster(int nodes, const std::string& spec, int gpus = 0) {
  resource::NodePool pool;
  auto t = resource::discover_topology(spec);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  for (int g = 0; g < gpus; ++g) t->gpus.push_back({g, 0, "cuda" + std::to_string(g), ""});
  for (int i = 1; i <= nodes; ++i) {
    std::string name = "n";  // not "n" + ...: a false -Wrestrict from GCC 12 at -O3
    name += std::to_string(i);
    EXPECT_TRUE(pool.add_node(static_cast<Rank>(i), name, *t).is_ok());
  }
  return pool;
}

// Takes `cores` cores (and memory, the lowest free `gpus` GPUs and `gres`
// units) on `rank` in the pool; returns the allocation.
resource::Allocation take(resource::NodePool& pool, Rank rank, int cores, std::uint64_t memory = 0,
                          int gpus = 0, std::map<std::string, int> gres = {}) {
  resource::NodeAllocation part;
  part.rank = rank;
  part.memory_bytes = memory;
  part.gres = std::move(gres);
  const resource::NodeState* node = pool.find(rank);
  for (int c = 0; c < node->total_cores() && static_cast<int>(part.cores.size()) < cores; ++c) {
    if (node->core_free(c)) part.cores.push_back(c);
  }
  for (int g = 0; g < node->total_gpus() && static_cast<int>(part.gpus.size()) < gpus; ++g) {
    if (node->gpu_free(g)) part.gpus.push_back(g);
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

resource::ResourceRequest with_gres(resource::ResourceRequest r, std::map<std::string, int> gres) {
  r.gres = std::move(gres);
  return r;
}

TEST(Planner, GpusArePlannedToo) {
  // Two nodes of 8 cores and 4 GPUs; node 1's GPUs are all busy until
  // +100 s, on one of its cores only.
  resource::NodePool pool = cluster(2, "core:8 pu:1", 4);
  const resource::Allocation running = take(pool, 1, 1, 0, 4);
  Planner planner(pool, kNow);
  planner.add_release(running, at(100));
  EXPECT_EQ(planner.min_free(1, kNow, at(100))->gpus, 0);
  EXPECT_EQ(planner.min_free(1, at(100), at(200))->gpus, 4);
  EXPECT_EQ(planner.min_free(1, kNow, at(100))->cores, 7);

  resource::ResourceRequest four = req(1, 1);
  four.gpus_per_node = 4;
  auto slot = planner.earliest(four, secs(50), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, kNow);
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{2, 1, 0, 4}}));
  // Node 2's GPUs reserved from now until +300 s: node 1 at +100 s, though
  // its cores are free now.
  planner.reserve(slot->nodes, kNow, at(300));
  slot = planner.earliest(four, secs(50), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, at(100));
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{1, 1, 0, 4}}));
  // A job asking no GPU fits now on either node.
  EXPECT_EQ(planner.earliest(req(7), secs(500), all(pool))->start, kNow);

  // gpus_per_task: a node holds a task per 2 free GPUs; 4 tasks need both
  // nodes, at +300 s.
  resource::ResourceRequest per_task = req(4);
  per_task.gpus_per_task = 2;
  slot = planner.earliest(per_task, secs(10), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, at(300));
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{1, 2, 0, 4}, {2, 2, 0, 4}}));
  per_task.ntasks = 2;
  EXPECT_EQ(planner.earliest(per_task, secs(10), all(pool))->start, at(100));

  // Started now, a job ending after +100 s may take no GPU of node 2 (its
  // reservation starts now); node 1's are busy anyway.
  const std::vector<NodeShare> limits = planner.limits(at(101));
  ASSERT_EQ(limits.size(), 1u);
  EXPECT_EQ(limits[0].rank, 2u);
  EXPECT_EQ(limits[0].cores, 7);
  EXPECT_EQ(limits[0].gpus, 0);
}

TEST(Planner, GresIsPlannedToo) {
  // Node 1 nvme:2, one unit held until +100 s (with one core); node 2 has
  // no nvme.
  resource::NodePool pool = cluster(2, "core:8 pu:1");
  ASSERT_TRUE(pool.set_gres(1, {{"nvme", 2}}).is_ok());
  const resource::Allocation running = take(pool, 1, 1, 0, 0, {{"nvme", 1}});
  Planner planner(pool, kNow);
  planner.add_release(running, at(100));
  using Units = std::map<std::string, int>;
  EXPECT_EQ(planner.min_free(1, kNow, at(100))->gres, (Units{{"nvme", 1}}));
  EXPECT_EQ(planner.min_free(1, at(100), at(200))->gres, (Units{{"nvme", 2}}));
  EXPECT_EQ(planner.min_free(2, kNow, at(100))->gres, Units{});

  // Two units: node 1 at +100 s, while node 2 has all its cores free now.
  auto slot = planner.earliest(with_gres(req(1), {{"nvme", 2}}), secs(50), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, at(100));
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{1, 1, 0, 0, {{"nvme", 2}}}}));
  // One unit is free now; a name no node has fits never; none, anywhere now.
  EXPECT_EQ(planner.earliest(with_gres(req(1), {{"nvme", 1}}), secs(50), all(pool))->start, kNow);
  EXPECT_FALSE(planner.earliest(with_gres(req(1), {{"fpga", 1}}), secs(1), all(pool)).has_value());
  // Each node of a gang holds the units: node 2 never can.
  EXPECT_FALSE(
      planner.earliest(with_gres(req(2, 2), {{"nvme", 1}}), secs(1), all(pool)).has_value());

  // Reserved: the free unit is the reservation's over [+50 s, +150 s).
  const NodeShare share{1, 1, 0, 0, {{"nvme", 1}}};
  planner.reserve({&share, 1}, at(50), at(150));
  EXPECT_EQ(planner.earliest(with_gres(req(1), {{"nvme", 1}}), secs(60), all(pool))->start,
            at(100));
  EXPECT_EQ(planner.earliest(with_gres(req(1), {{"nvme", 1}}), secs(50), all(pool))->start, kNow);
  EXPECT_EQ(planner.earliest(with_gres(req(1), {{"nvme", 2}}), secs(10), all(pool))->start,
            at(150));
  // A job started now and ending after +50 s may take no unit of node 1.
  EXPECT_TRUE(planner.limits(at(50)).empty());
  const std::vector<NodeShare> limits = planner.limits(at(51));
  ASSERT_EQ(limits.size(), 1u);
  EXPECT_EQ(limits[0].rank, 1u);
  EXPECT_EQ(limits[0].cores, 6);
  EXPECT_EQ(limits[0].gres, (Units{{"nvme", 0}}));
  // A blocked node has nothing of anything.
  const Rank one = 1;
  (void)planner.add_block({&one, 1}, kNow, at(10));
  EXPECT_EQ(planner.limits(at(1)), (std::vector<NodeShare>{{1, 0, 0, 0, {{"nvme", 0}}}}));

  // start(): the units are taken now and given back at the job's end.
  Planner fresh(pool, kNow);
  fresh.start(take(pool, 1, 1, 0, 0, {{"nvme", 1}}), at(20));
  EXPECT_EQ(fresh.min_free(1, kNow, at(20))->gres, (Units{{"nvme", 0}}));
  EXPECT_EQ(fresh.min_free(1, at(20), at(30))->gres, (Units{{"nvme", 1}}));
}

resource::ResourceRequest whole(resource::ResourceRequest r) {
  r.exclusive = true;
  return r;
}

// --exclusive: a whole node, idle over the window, and promised whole.
TEST(Planner, WholeNodesWaitUntilNothingIsInUse) {
  // Node 1: one core busy until +100 s; node 2: one GPU, memory or a gres
  // unit (no core) until +200 s, 300 s, 400 s in turn.
  resource::NodePool base = cluster(2, "core:4 pu:1", 1);
  ASSERT_TRUE(base.set_gres(2, {{"nvme", 1}}).is_ok());
  const std::uint64_t memory = base.find(2)->free_memory();
  const struct {
    const char* what;
    int gpus;
    std::uint64_t memory;
    std::map<std::string, int> gres;
  } uses[] = {{"a GPU", 1, 0, {}}, {"memory", 0, 1, {}}, {"a gres unit", 0, 0, {{"nvme", 1}}}};
  for (const auto& use : uses) {
    resource::NodePool pool = base;
    const resource::Allocation one_core = take(pool, 1, 1);
    const resource::Allocation other = take(pool, 2, 0, use.memory, use.gpus, use.gres);
    Planner planner(pool, kNow);
    planner.add_release(one_core, at(100));
    planner.add_release(other, at(200));
    // A plain job fits now on node 1's three free cores; a whole node waits
    // for node 1 to empty at +100 s, all of it promised.
    EXPECT_EQ(planner.earliest(req(1), secs(50), all(pool))->start, kNow) << use.what;
    auto slot = planner.earliest(whole(req(1)), secs(50), all(pool));
    ASSERT_TRUE(slot.has_value()) << use.what;
    EXPECT_EQ(slot->start, at(100)) << use.what;
    EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{1, 4, memory, 1}})) << use.what;
    // Both nodes: when node 2 is empty too.
    EXPECT_EQ(planner.earliest(whole(req(2, 2)), secs(50), all(pool))->start, at(200)) << use.what;
  }

  // Promised (node 2 busy with a core until +1000 s): nothing else on node
  // 1 over the promise, not even one core; a job over by then may take it.
  resource::NodePool pool = base;
  const resource::Allocation one_core = take(pool, 1, 1);
  const resource::Allocation long_core = take(pool, 2, 1);
  Planner planner(pool, kNow);
  planner.add_release(one_core, at(100));
  planner.add_release(long_core, at(1000));
  auto slot = planner.earliest(whole(req(1)), secs(500), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, at(100));
  planner.reserve(slot->nodes, slot->start, at(600));
  EXPECT_EQ(planner.limits(at(101)), (std::vector<NodeShare>{{1, 0, 0, 0}}));
  EXPECT_TRUE(planner.limits(at(100)).empty());
  EXPECT_EQ(planner.min_free(1, at(100), at(600)), (NodeShare{1, 0, 0, 0}));
  // Four cores of one node: node 1 only after the promise.
  EXPECT_EQ(planner.earliest(req(4, 1), secs(50), all(pool))->start, at(600));
  // A second whole node: node 1 after the first, before node 2 empties.
  slot = planner.earliest(whole(req(1)), secs(500), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, at(600));
  EXPECT_EQ(slot->nodes[0].rank, 1u);
}

TEST(Planner, AWholeNodeWaitsForItsLastOversubscribingJob) {
  // Two oversubscribing jobs share node 1's four cores, ending at +100 s
  // and +200 s: counted by cores, the node looks whole at +100 s.
  resource::NodePool pool = cluster(1, "core:4 pu:1");
  resource::NodeAllocation part;
  part.rank = 1;
  part.cores = {0, 1, 2, 3};
  const resource::Allocation first{{part}, 1, /*shared=*/true};
  const resource::Allocation second = first;
  ASSERT_TRUE(pool.allocate(first).is_ok());
  ASSERT_TRUE(pool.allocate(second).is_ok());
  Planner planner(pool, kNow);
  planner.add_release(first, at(100));
  planner.add_release(second, at(200));
  EXPECT_EQ(planner.earliest(whole(req(1)), secs(10), all(pool))->start, at(200));
  // One that never ends: never.
  Planner endless(pool, kNow);
  endless.add_release(first, at(100));
  endless.add_release(second, kForever);
  EXPECT_FALSE(endless.earliest(whole(req(1)), secs(10), all(pool)).has_value());
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

TEST(Planner, AdvanceReservationsBlockWholeNodes) {
  // Two idle 4-core nodes; node 1 is kept for [+100 s, +200 s) for someone
  // else.
  resource::NodePool pool = cluster(2, "core:4 pu:1");
  Planner planner(pool, kNow);
  const Rank one = 1;
  const std::size_t id = planner.add_block({&one, 1}, at(100), at(200));
  EXPECT_EQ(id, 0u);
  // Counted changes do not see it; min_free is about counts only.
  EXPECT_EQ(planner.min_free(1, at(100), at(200))->cores, 4);

  // A short job ends before the window: node 1 is fine.
  EXPECT_EQ(planner.earliest(req(4), secs(100), all(pool))->nodes,
            (std::vector<NodeShare>{{1, 4, 0}}));
  // A longer one goes to node 2 now...
  auto slot = planner.earliest(req(4), secs(150), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, kNow);
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{2, 4, 0}}));
  // ... and, node 2 taken until +1000 s, after the window on node 1.
  const NodeShare node2{2, 4, 0};
  planner.reserve({&node2, 1}, kNow, at(1000));
  slot = planner.earliest(req(4), secs(150), all(pool));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->start, at(200));
  EXPECT_EQ(slot->nodes, (std::vector<NodeShare>{{1, 4, 0}}));
  // Both nodes: not before the window ends.
  EXPECT_EQ(planner.earliest(req(8, 2), secs(10), all(pool))->start, at(1000));
  // A job the reservation admits is not stopped by it.
  const std::size_t admitted[] = {id};
  EXPECT_EQ(planner.earliest(req(4), secs(150), all(pool), admitted)->start, kNow);

  // Started now, a job that ends after +100 s gets nothing of node 1 (node
  // 2's cores are reserved from now on, its memory is not).
  const auto cores = [](const std::vector<NodeShare>& limits) {
    std::vector<std::pair<Rank, int>> out;
    for (const NodeShare& l : limits) out.emplace_back(l.rank, l.cores);
    return out;
  };
  using Cores = std::vector<std::pair<Rank, int>>;
  EXPECT_EQ(cores(planner.limits(at(100))), (Cores{{2, 0}}));
  EXPECT_EQ(planner.limits(at(101)).front(), (NodeShare{1, 0, 0}));
  EXPECT_EQ(cores(planner.limits(at(101))), (Cores{{1, 0}, {2, 0}}));
  EXPECT_EQ(cores(planner.limits(at(101), admitted)), (Cores{{2, 0}}));
  // Blocks for unknown ranks and empty windows stop nothing.
  const Rank nine = 9;
  EXPECT_EQ(planner.add_block({&nine, 1}, at(1), at(2)), 1u);
  EXPECT_EQ(planner.add_block({&one, 1}, at(5), at(5)), 2u);
  EXPECT_EQ(planner.earliest(req(4), secs(1), all(pool))->start, kNow);
}

TEST(Planner, BlockInForceNowAndUnderReservations) {
  // One 8-core node, 4 cores busy until +50 s, the node kept [now - 10 s,
  // +30 s): nothing starts on it before +30 s, and a job of 60 s fits at +50 s
  // only.
  resource::NodePool pool = cluster(1, "core:8 pu:1");
  const resource::Allocation running = take(pool, 1, 4);
  Planner planner(pool, kNow);
  planner.add_release(running, at(50));
  const Rank one = 1;
  (void)planner.add_block({&one, 1}, kNow - secs(10), at(30));
  EXPECT_EQ(planner.earliest(req(4), secs(60), all(pool))->start, at(30));
  EXPECT_EQ(planner.earliest(req(8), secs(60), all(pool))->start, at(50));
  EXPECT_EQ(planner.limits(at(1)), (std::vector<NodeShare>{{1, 0, 0}}));
}

// A reference for earliest() and min_free(): every candidate time, every
// node's window recomputed from the list of changes, the allocator's rules
// on counts (cores, GPUs, and the units of the one gres name "nvme" that
// some nodes have). The planner must give the same start and nodes.
struct Model {
  // Cores, GPUs and nvme units.
  struct Amounts {
    int cores = 0;
    int gpus = 0;
    int nvme = 0;
  };
  struct Change {
    TimeUs time;
    Amounts delta;
  };
  struct Node {
    Rank rank;
    Amounts free;
    std::uint64_t memory = 0;  // free throughout: no test job takes any
    bool nvme = false;         // has the name at all
    std::vector<Change> changes;
    std::vector<std::tuple<TimeUs, TimeUs, std::size_t>> blocks;
  };
  std::vector<Node> nodes;

  Node& at_rank(Rank r) { return nodes[r - 1]; }

  static Amounts amounts(const NodeShare& share) {
    const auto it = share.gres.find("nvme");
    return {share.cores, share.gpus, it == share.gres.end() ? 0 : it->second};
  }

  // `sign` times the share from `time` on.
  void add(const NodeShare& share, TimeUs time, int sign) {
    Amounts a = amounts(share);
    a = {sign * a.cores, sign * a.gpus, sign * a.nvme};
    at_rank(share.rank).changes.push_back({time, a});
  }

  // What is free on `n` after every change up to `t`.
  static Amounts level(const Node& n, TimeUs t) {
    Amounts l = n.free;
    for (const Change& c : n.changes) {
      if (c.time > t) continue;
      l.cores += c.delta.cores;
      l.gpus += c.delta.gpus;
      l.nvme += c.delta.nvme;
    }
    return l;
  }

  // The least of each over [t, end), by brute force.
  static Amounts least(const Node& n, TimeUs t, TimeUs end) {
    Amounts least = level(n, t);
    for (const Change& c : n.changes) {
      if (c.time <= t || c.time >= end) continue;
      const Amounts l = level(n, c.time);
      least = {std::min(least.cores, l.cores), std::min(least.gpus, l.gpus),
               std::min(least.nvme, l.nvme)};
    }
    return {std::max(least.cores, 0), std::max(least.gpus, 0), std::max(least.nvme, 0)};
  }

  NodeShare min_free(Rank rank, TimeUs t, TimeUs end) {
    const Node& n = at_rank(rank);
    const Amounts l = least(n, t, end);
    NodeShare out{rank, l.cores, n.memory, l.gpus};
    if (n.nvme) out.gres["nvme"] = l.nvme;
    return out;
  }

  // The profile, in seconds from now, for a failure message.
  std::string describe() const {
    std::string d;
    const auto secs_from_now = [](TimeUs t) { return std::to_string((t - kNow) / kUsPerSecond); };
    for (const Node& n : nodes) {
      d += "\n node " + std::to_string(n.rank) + " free " + std::to_string(n.free.cores) + "/" +
           std::to_string(n.free.gpus) + "/" + (n.nvme ? std::to_string(n.free.nvme) : "-");
      for (const Change& c : n.changes)
        d += " (" + secs_from_now(c.time) + ", " + std::to_string(c.delta.cores) + "/" +
             std::to_string(c.delta.gpus) + "/" + std::to_string(c.delta.nvme) + ")";
      for (const auto& [start, end, id] : n.blocks)
        d += " block " + std::to_string(id) + " [" + secs_from_now(start) + ", " +
             secs_from_now(end) + ")";
    }
    return d;
  }

  std::optional<Slot> earliest(const resource::ResourceRequest& request, TimeUs duration,
                               const std::vector<std::size_t>& admitted) const {
    std::vector<TimeUs> times{kNow};
    for (const Node& n : nodes) {
      for (const Change& c : n.changes) {
        if (c.time > kNow) times.push_back(c.time);
      }
      for (const auto& [s, e, id] : n.blocks) {
        if (e > kNow) times.push_back(e);
      }
    }
    std::sort(times.begin(), times.end());
    for (TimeUs t : times) {
      const TimeUs end = add_time(t, duration);
      std::vector<int> caps;
      for (const Node& n : nodes) {
        const Amounts l = least(n, t, end);
        int cap = l.cores / request.cpus_per_task;
        if (l.gpus < request.gpus_per_node) cap = 0;
        if (request.gpus_per_task > 0) cap = std::min(cap, l.gpus / request.gpus_per_task);
        for (const auto& [name, units] : request.gres) {
          if (name != "nvme" || !n.nvme || l.nvme < units) cap = 0;
        }
        for (const auto& [s, e, id] : n.blocks) {
          if (s < end && e > t && !std::binary_search(admitted.begin(), admitted.end(), id))
            cap = 0;
        }
        caps.push_back(cap);
      }
      std::vector<NodeShare> out;
      const auto share = [&](std::size_t i, int tasks) {
        return NodeShare{nodes[i].rank, tasks * request.cpus_per_task, 0,
                         request.gpus_per_node + tasks * request.gpus_per_task, request.gres};
      };
      if (request.nodes > 0) {
        const int base = request.ntasks / request.nodes;
        const int extra = request.ntasks % request.nodes;
        int big = 0;
        int small = 0;
        for (std::size_t i = 0; i < caps.size() && big + small < request.nodes; ++i) {
          if (caps[i] >= base + 1 && big < extra) {
            out.push_back(share(i, base + 1));
            ++big;
          } else if (caps[i] >= base && small < request.nodes - extra) {
            out.push_back(share(i, base));
            ++small;
          }
        }
        if (big + small < request.nodes) out.clear();
      } else {
        for (std::size_t i = 0; i < caps.size() && out.empty(); ++i) {
          if (caps[i] >= request.ntasks) out.push_back(share(i, request.ntasks));
        }
        if (out.empty()) {
          std::vector<std::size_t> idx(caps.size());
          for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
          std::stable_sort(idx.begin(), idx.end(),
                           [&](std::size_t a, std::size_t b) { return caps[a] > caps[b]; });
          int covered = 0;
          std::vector<std::size_t> chosen;
          for (std::size_t i : idx) {
            if (covered >= request.ntasks || caps[i] == 0) break;
            chosen.push_back(i);
            covered += caps[i];
          }
          if (covered >= request.ntasks) {
            std::sort(chosen.begin(), chosen.end());
            int left = request.ntasks;
            for (std::size_t i : chosen) {
              out.push_back(share(i, std::min(caps[i], left)));
              left -= std::min(caps[i], left);
            }
          }
        }
      }
      if (!out.empty()) return Slot{t, out};
    }
    return std::nullopt;
  }
};

TEST(Planner, SweepMatchesAFullRescanOnRandomProfiles) {
  std::mt19937 rng(17);
  const auto uniform = [&rng](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  int found = 0;
  for (int round = 0; round < 200; ++round) {
    const int n = uniform(1, 6);
    // Half the rounds without GPUs or gres at all: the path most clusters take.
    const bool counted = round % 2 == 1;
    resource::NodePool pool = cluster(n, "core:8 pu:1", counted ? 4 : 0);
    for (int i = 1; counted && i <= n; ++i) {
      if (uniform(0, 2) > 0) {
        EXPECT_TRUE(pool.set_gres(static_cast<Rank>(i), {{"nvme", 2}}).is_ok());
      }
    }
    Model model;
    std::vector<std::pair<resource::Allocation, TimeUs>> running;
    for (int i = 0; i < 3 * n; ++i) {
      const auto rank = static_cast<Rank>(uniform(1, n));
      const resource::NodeState* node = pool.find(rank);
      const int cores = std::min(uniform(1, 4), node->free_cores());
      if (cores == 0) continue;
      const int gpus = std::min(uniform(0, 2), node->free_gpus());
      std::map<std::string, int> gres;
      if (node->free_gres("nvme") > 0 && uniform(0, 1) == 1) gres["nvme"] = 1;
      const int kind = uniform(0, 9);
      const TimeUs end = kind == 0   ? kForever
                         : kind == 1 ? kNow - secs(3)
                                     : at(uniform(1, 40) * 10);
      running.emplace_back(take(pool, rank, cores, 0, gpus, gres), end);
    }
    for (int i = 1; i <= n; ++i) {
      const resource::NodeState* node = pool.find(static_cast<Rank>(i));
      model.nodes.push_back({static_cast<Rank>(i),
                             {node->free_cores(), node->free_gpus(), node->free_gres("nvme")},
                             node->free_memory(),
                             node->gres().contains("nvme"),
                             {},
                             {}});
    }
    Planner planner(pool, kNow);
    for (const auto& [allocation, end] : running) {
      planner.add_release(allocation, end);
      if (end == kForever) continue;
      const TimeUs when = end <= kNow ? kNow + kOverdueGrace : end;
      for (const auto& part : allocation.nodes) {
        model.add({part.rank, static_cast<int>(part.cores.size()), 0,
                   static_cast<int>(part.gpus.size()), part.gres},
                  when, 1);
      }
    }
    const int blocks = uniform(0, 2);
    for (int b = 0; b < blocks; ++b) {
      std::vector<Rank> ranks;
      for (int i = 1; i <= n; ++i)
        if (uniform(0, 1) == 1) ranks.push_back(static_cast<Rank>(i));
      const TimeUs start = at(uniform(-5, 30) * 10);
      const TimeUs end = start + secs(uniform(1, 20) * 10);
      const std::size_t id = planner.add_block(ranks, start, end);
      if (end <= kNow) continue;
      for (Rank r : ranks) model.at_rank(r).blocks.emplace_back(start, end, id);
    }
    std::vector<const resource::NodeState*> nodes = all(pool);
    for (int q = 0; q < 12; ++q) {
      resource::ResourceRequest r = req(uniform(1, 12), uniform(0, std::min(n, 3)));
      if (r.nodes > r.ntasks) r.nodes = r.ntasks;
      if (uniform(0, 3) == 0) r.cpus_per_task = 2;
      if (counted) {
        const int gpus = uniform(0, 5);
        if (gpus == 1 || gpus == 2) r.gpus_per_task = gpus;
        if (gpus >= 3) r.gpus_per_node = gpus - 1;
        const int gres = uniform(0, 5);
        if (gres == 1 || gres == 2) r.gres["nvme"] = gres;
        if (gres == 3) r.gres["fpga"] = 1;  // no node has it
      }
      const TimeUs duration = uniform(0, 9) == 0 ? kForever : secs(uniform(1, 30) * 10);
      std::vector<std::size_t> admitted;
      if (blocks > 0 && uniform(0, 2) == 0) admitted.push_back(0);
      const auto want = model.earliest(r, duration, admitted);
      const auto got = planner.earliest(r, duration, nodes, admitted);
      ASSERT_EQ(got.has_value(), want.has_value()) << "round " << round << " query " << q;
      if (!got) continue;
      ++found;
      ASSERT_EQ(got->start, want->start)
          << "round " << round << " query " << q << ": " << model.describe();
      ASSERT_EQ(got->nodes, want->nodes) << "round " << round << " query " << q;
      // Conservative: the slot becomes a reservation the next query sees.
      if (uniform(0, 1) == 1) {
        planner.reserve(got->nodes, got->start, add_time(got->start, duration));
        for (const NodeShare& share : got->nodes) {
          model.add(share, got->start, -1);
          if (duration != kForever) model.add(share, add_time(got->start, duration), 1);
        }
      }
      // Each dimension's least over a random window, on a random node.
      const auto rank = static_cast<Rank>(uniform(1, n));
      const TimeUs from = at(uniform(0, 40) * 10);
      const TimeUs to = uniform(0, 4) == 0 ? kForever : from + secs(uniform(1, 30) * 10);
      ASSERT_EQ(planner.min_free(rank, from, to), model.min_free(rank, from, to))
          << "round " << round << " query " << q << ": " << model.describe();
    }
  }
  EXPECT_GT(found, 1000);
}

}  // namespace
}  // namespace hpcq::sched
