#include "lib/resource/allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "lib/resource/hwloc_import.h"

namespace hpcq::resource {
namespace {

constexpr const char* kNode = "pack:2 numa:2 core:4 pu:1";  // numa d = cores 4d..4d+3

NodeTopology topo(const std::string& spec) {
  auto t = discover_topology(spec);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return *t;
}

NodePool two_nodes() {
  NodePool pool;
  EXPECT_TRUE(pool.add_node(1, "n1", topo(kNode)).is_ok());
  EXPECT_TRUE(pool.add_node(2, "n2", topo(kNode)).is_ok());
  return pool;
}

void take(NodePool& pool, Rank rank, std::vector<int> cores) {
  NodeAllocation a;
  a.rank = rank;
  a.cores = std::move(cores);
  ASSERT_TRUE(pool.allocate({{a}}).is_ok());
}

struct Want {
  Rank rank;
  std::vector<int> cores;
  std::vector<int> numa;
  int ntasks;
  int first_task;
};

struct Case {
  const char* what;
  std::vector<std::pair<Rank, std::vector<int>>> used;  // cores taken before
  std::vector<Rank> down;
  ResourceRequest request;
  std::vector<Want> want;  // empty: does not fit
};

TEST(Allocator, Placements) {
  const Case cases[] = {
      {"one task, one domain", {}, {}, {0, 1, 4, 0}, {{1, {0, 1, 2, 3}, {0}, 1, 0}}},
      {"two tasks stay in one package",
       {},
       {},
       {0, 2, 4, 0},
       {{1, {0, 1, 2, 3, 4, 5, 6, 7}, {0, 1}, 2, 0}}},
      {"task moves to a domain that holds it",
       {{1, {0}}},
       {},
       {0, 1, 4, 0},
       {{1, {4, 5, 6, 7}, {1}, 1, 0}}},
      {"fewest domains, whole tasks first",
       {{1, {0}}},
       {},
       {0, 3, 2, 0},
       {{1, {1, 2, 4, 5, 6, 7}, {0, 1}, 3, 0}}},
      {"a task wider than a domain spans the fewest",
       {},
       {},
       {0, 1, 6, 0},
       {{1, {0, 1, 2, 3, 4, 5}, {0, 1}, 1, 0}}},
      {"fewest nodes, filling in order",
       {},
       {},
       {0, 20, 1, 0},
       {{1,
         std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
         {0, 1, 2, 3},
         16,
         0},
        {2, {0, 1, 2, 3}, {0}, 4, 16}}},
      {"fewest nodes skips a fragment",
       {{1, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}}},
       {},
       {0, 4, 1, 0},
       {{2, {0, 1, 2, 3}, {0}, 4, 0}}},
      {"fragment used when it keeps the count",
       {{1, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}}},
       {},
       {0, 17, 1, 0},
       {{1, {14, 15}, {3}, 2, 0},
        {2,
         std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
         {0, 1, 2, 3},
         15,
         2}}},
      {"nodes=2: first node gets the extra",
       {},
       {},
       {2, 3, 1, 0},
       {{1, {0, 1}, {0}, 2, 0}, {2, {0}, {0}, 1, 2}}},
      {"nodes=2: extra goes where it fits",
       {{1, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}}},
       {},
       {2, 3, 1, 0},
       {{1, {15}, {3}, 1, 0}, {2, {0, 1}, {0}, 2, 1}}},
      {"unschedulable node skipped", {}, {1}, {0, 1, 1, 0}, {{2, {0}, {0}, 1, 0}}},
      {"memory per node", {}, {}, {0, 1, 1, 4 * kDefaultNumaMemoryBytes}, {{1, {0}, {0}, 1, 0}}},
      {"too much memory", {}, {}, {0, 1, 1, 4 * kDefaultNumaMemoryBytes + 1}, {}},
      {"more nodes than there are", {}, {}, {3, 3, 1, 0}, {}},
      {"more cores than there are", {}, {}, {0, 33, 1, 0}, {}},
      {"2-node job with one node down", {}, {2}, {2, 2, 1, 0}, {}},
      {"task wider than a node", {}, {}, {0, 1, 17, 0}, {}},
      {"malformed: nodes > ntasks", {}, {}, {2, 1, 1, 0}, {}},
      {"malformed: zero cpus", {}, {}, {0, 1, 0, 0}, {}},
  };
  for (const Case& c : cases) {
    NodePool pool = two_nodes();
    for (const auto& [rank, cores] : c.used) take(pool, rank, cores);
    for (Rank r : c.down) pool.set_schedulable(r, false);
    std::optional<Allocation> got = find_allocation(c.request, pool);
    if (c.want.empty()) {
      EXPECT_FALSE(got.has_value()) << c.what;
      continue;
    }
    ASSERT_TRUE(got.has_value()) << c.what;
    EXPECT_EQ(got->cpus_per_task, c.request.cpus_per_task) << c.what;
    ASSERT_EQ(got->nodes.size(), c.want.size()) << c.what;
    for (std::size_t i = 0; i < c.want.size(); ++i) {
      const NodeAllocation& a = got->nodes[i];
      EXPECT_EQ(a.rank, c.want[i].rank) << c.what;
      EXPECT_EQ(a.node, "n" + std::to_string(c.want[i].rank)) << c.what;
      EXPECT_EQ(a.cores, c.want[i].cores) << c.what;
      EXPECT_EQ(a.numa, c.want[i].numa) << c.what;
      EXPECT_EQ(a.ntasks, c.want[i].ntasks) << c.what;
      EXPECT_EQ(a.first_task, c.want[i].first_task) << c.what;
      EXPECT_EQ(a.memory_bytes, c.request.mem_per_node_bytes) << c.what;
    }
    EXPECT_TRUE(pool.allocate(*got).is_ok()) << c.what;
  }
}

TEST(Allocator, CheckRequest) {
  EXPECT_TRUE(check_request({0, 1, 1, 0}).is_ok());
  EXPECT_TRUE(check_request({4, 4, 2, 0}).is_ok());
  EXPECT_FALSE(check_request({0, 0, 1, 0}).is_ok());
  EXPECT_FALSE(check_request({0, 1, 0, 0}).is_ok());
  EXPECT_FALSE(check_request({-1, 1, 1, 0}).is_ok());
  EXPECT_FALSE(check_request({3, 2, 1, 0}).is_ok());
}

// --- Property test: random clusters, requests and releases. ---

int whole_capacity(const NodeState& node, int cpt) {
  int n = 0;
  for (std::size_t d = 0; d < node.topology().numa.size(); ++d) {
    n += node.free_cores_in_numa(static_cast<int>(d)) / cpt;
  }
  return n;
}

// Checks `a` against `request` and the pool it was found in (before taking it).
void check_allocation(const ResourceRequest& request, const NodePool& pool, const Allocation& a,
                      int step) {
  SCOPED_TRACE("step " + std::to_string(step));
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.cpus_per_task, request.cpus_per_task);
  if (request.nodes > 0) {
    EXPECT_EQ(static_cast<int>(a.nodes.size()), request.nodes);
  }
  int tasks = 0;
  std::set<Rank> ranks;
  int min_tasks = request.ntasks;
  int max_tasks = 0;
  for (const NodeAllocation& part : a.nodes) {
    EXPECT_TRUE(ranks.insert(part.rank).second) << "rank twice";
    const NodeState* node = pool.find(part.rank);
    ASSERT_NE(node, nullptr);
    EXPECT_TRUE(node->schedulable());
    EXPECT_EQ(part.node, node->name());
    EXPECT_GE(part.ntasks, 1);
    EXPECT_EQ(part.first_task, tasks);
    tasks += part.ntasks;
    min_tasks = std::min(min_tasks, part.ntasks);
    max_tasks = std::max(max_tasks, part.ntasks);
    EXPECT_EQ(static_cast<int>(part.cores.size()), part.ntasks * request.cpus_per_task);
    EXPECT_EQ(part.memory_bytes, request.mem_per_node_bytes);
    EXPECT_LE(part.memory_bytes, node->free_memory());
    std::set<int> cores(part.cores.begin(), part.cores.end());
    EXPECT_EQ(cores.size(), part.cores.size()) << "core twice in one part";
    std::set<int> numa;
    for (int core : part.cores) {
      EXPECT_TRUE(node->core_free(core)) << "core " << core << " of rank " << part.rank;
      numa.insert(node->topology().cores[static_cast<std::size_t>(core)].numa);
    }
    EXPECT_EQ(part.numa, std::vector<int>(numa.begin(), numa.end()));
    // Best effort NUMA: when the node could keep every task in one domain, it did.
    if (whole_capacity(*node, request.cpus_per_task) >= part.ntasks) {
      for (int t = 0; t < part.ntasks; ++t) {
        std::set<int> task_numa;
        for (int k = 0; k < request.cpus_per_task; ++k) {
          const int core = part.cores[static_cast<std::size_t>(t * request.cpus_per_task + k)];
          task_numa.insert(node->topology().cores[static_cast<std::size_t>(core)].numa);
        }
        EXPECT_EQ(task_numa.size(), 1u) << "task " << t << " spans NUMA domains";
      }
    }
  }
  EXPECT_EQ(tasks, request.ntasks);
  if (request.nodes > 0) {
    EXPECT_LE(max_tasks - min_tasks, 1) << "tasks not spread evenly";
  }
  if (request.nodes == 0) {
    // As few nodes as possible: no smaller set of nodes holds the tasks.
    std::vector<int> caps;
    for (const NodeState& node : pool.nodes()) caps.push_back(task_capacity(request, node));
    std::sort(caps.rbegin(), caps.rend());
    int sum = 0;
    int fewest = 0;
    while (sum < request.ntasks) sum += caps[static_cast<std::size_t>(fewest++)];
    EXPECT_EQ(static_cast<int>(a.nodes.size()), fewest);
  }
}

// Whether any placement exists (nodes <= 6, so subsets can be tried).
bool feasible(const ResourceRequest& request, const NodePool& pool) {
  std::vector<int> caps;
  for (const NodeState& node : pool.nodes()) caps.push_back(task_capacity(request, node));
  if (request.nodes == 0) {
    int sum = 0;
    for (int c : caps) sum += c;
    return sum >= request.ntasks;
  }
  const int base = request.ntasks / request.nodes;
  const int extra = request.ntasks % request.nodes;
  int fit = 0;
  int big = 0;
  for (int c : caps) {
    if (c >= base) ++fit;
    if (c > base) ++big;
  }
  return fit >= request.nodes && big >= extra;
}

TEST(Allocator, RandomWorkloadsNeverDoubleBook) {
  const char* shapes[] = {
      "pack:2 numa:2 core:4 pu:1", "numa:1 core:2 pu:2", "pack:1 numa:4 core:3 pu:1",
      "pack:2 numa:1 core:6 pu:1", "core:8 pu:1",        "pack:2 numa:3 core:2 pu:1"};
  std::vector<NodeTopology> topologies;
  for (const char* s : shapes) topologies.push_back(topo(s));
  std::mt19937 rng(20240611);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  for (int cluster = 0; cluster < 4; ++cluster) {
    NodePool pool;
    const int nnodes = pick(1, 6);
    for (int i = 0; i < nnodes; ++i) {
      ASSERT_TRUE(pool.add_node(static_cast<Rank>(i + 1), "n" + std::to_string(i + 1),
                                topologies[static_cast<std::size_t>(pick(0, 5))])
                      .is_ok());
    }
    std::vector<Allocation> live;
    std::map<std::pair<Rank, int>, int> owner;  // (rank, core) -> index of live allocation
    int started = 0;
    for (int step = 0; step < 2000; ++step) {
      const int what = pick(0, 9);
      if (what < 6) {
        ResourceRequest request;
        request.ntasks = pick(1, 12);
        request.cpus_per_task = pick(1, 4);
        request.nodes = pick(0, 2) == 0 ? pick(1, std::min(request.ntasks, 4)) : 0;
        request.mem_per_node_bytes =
            pick(0, 3) == 0 ? static_cast<std::uint64_t>(pick(1, 40)) << 30 : 0;
        std::optional<Allocation> a = find_allocation(request, pool);
        ASSERT_EQ(a.has_value(), feasible(request, pool)) << "step " << step;
        if (!a) continue;
        check_allocation(request, pool, *a, step);
        for (const NodeAllocation& part : a->nodes) {
          for (int core : part.cores) {
            ASSERT_TRUE(owner.emplace(std::make_pair(part.rank, core), 1).second)
                << "core " << core << " of rank " << part.rank << " given twice at step " << step;
          }
        }
        ASSERT_TRUE(pool.allocate(*a).is_ok()) << "step " << step;
        live.push_back(std::move(*a));
        ++started;
      } else if (what < 9 && !live.empty()) {
        const auto i = static_cast<std::size_t>(pick(0, static_cast<int>(live.size()) - 1));
        for (const NodeAllocation& part : live[i].nodes) {
          for (int core : part.cores) owner.erase({part.rank, core});
        }
        ASSERT_TRUE(pool.release(live[i]).is_ok()) << "step " << step;
        ASSERT_FALSE(pool.release(live[i]).is_ok()) << "released twice at step " << step;
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        pool.set_schedulable(static_cast<Rank>(pick(1, nnodes)), pick(0, 3) != 0);
      }
      int used = 0;
      for (const NodeState& node : pool.nodes()) used += node.total_cores() - node.free_cores();
      ASSERT_EQ(used, static_cast<int>(owner.size())) << "step " << step;
    }
    EXPECT_GT(started, 100);
  }
}

}  // namespace
}  // namespace hpcq::resource
