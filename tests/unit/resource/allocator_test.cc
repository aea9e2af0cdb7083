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

TEST(Allocator, GresPerNode) {
  NodePool pool = two_nodes();
  ASSERT_TRUE(pool.set_gres(2, {{"nvme", 2}}).is_ok());
  ResourceRequest r{0, 2, 1, 0};
  r.gres = {{"nvme", 2}};
  EXPECT_EQ(task_capacity(r, *pool.find(1)), 0);
  EXPECT_EQ(task_capacity(r, *pool.find(2)), 16);
  auto got = find_allocation(r, pool);
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->nodes.size(), 1u);
  EXPECT_EQ(got->nodes[0].rank, 2u);
  EXPECT_EQ(got->nodes[0].gres, r.gres);
  ASSERT_TRUE(pool.allocate(*got).is_ok());
  EXPECT_FALSE(find_allocation(r, pool).has_value());  // the cores are free, the units not
  r.nodes = 2;
  r.gres = {{"nvme", 1}};  // per node: n1 has none
  ASSERT_TRUE(pool.release(*got).is_ok());
  EXPECT_FALSE(find_allocation(r, pool).has_value());
  r.gres = {{"nvme", 0}};
  EXPECT_EQ(check_request(r).message(), "gres nvme: count must be >= 1");
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

namespace hpcq::resource {
namespace {

NodeTopology gpu_node() {
  auto t = discover_topology(std::string("xml:") + HPCQ_RESOURCE_TEST_DIR + "/gpu_node.xml");
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return *t;
}

TEST(AllocatorGpus, PerTaskGpusComeWithTheirDomainsCores) {
  NodePool pool;
  ASSERT_TRUE(pool.add_node(1, "g1", gpu_node()).is_ok());
  ResourceRequest request;
  request.ntasks = 2;
  request.cpus_per_task = 2;
  request.gpus_per_task = 1;
  request.core_distribution = Distribution::kCyclic;
  auto a = find_allocation(request, pool);
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->nodes.size(), 1u);
  // Cyclic over domains 0 and 1 (one package): task 0 in domain 0 with GPU 0,
  // task 1 in domain 1 with GPU 1.
  EXPECT_EQ(a->nodes[0].cores, (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(a->nodes[0].gpus, (std::vector<int>{0, 1}));
  const std::vector<TaskPlacement> tasks = task_layout(*a, 0, gpu_node());
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[1].rank, 1);
  EXPECT_EQ(tasks[1].cores, (std::vector<int>{4, 5}));
  EXPECT_EQ(tasks[1].cpus, (std::vector<int>{8, 9, 10, 11}));  // cpu-bind=cores: every PU
  EXPECT_EQ(tasks[1].numa, std::vector<int>{1});
  EXPECT_EQ(tasks[1].gpus, std::vector<int>{1});
  ASSERT_TRUE(pool.allocate(*a).is_ok());

  // GPUs 0 and 1 are gone: a 1-GPU task lands in domain 2 with GPU 2.
  request.ntasks = 1;
  request.cpu_bind = CpuBind::kThreads;
  a = find_allocation(request, pool);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->nodes[0].cores, (std::vector<int>{8, 9}));
  EXPECT_EQ(a->nodes[0].gpus, std::vector<int>{2});
  EXPECT_EQ(task_layout(*a, 0, gpu_node())[0].cpus, (std::vector<int>{16, 18}));  // one PU each
}

TEST(AllocatorGpus, SingleNumaNodeRefusesWhatBestEffortSpans) {
  NodePool pool;
  ASSERT_TRUE(pool.add_node(1, "g1", gpu_node()).is_ok());
  // Domain 3's cores are taken: GPU 3 has no local cores.
  take(pool, 1, {12, 13, 14, 15});
  ResourceRequest request;
  request.ntasks = 4;
  request.cpus_per_task = 1;
  request.gpus_per_task = 1;
  request.numa_policy = NumaPolicy::kSingleNumaNode;
  EXPECT_EQ(task_capacity(request, *pool.find(1)), 3);
  EXPECT_FALSE(find_allocation(request, pool).has_value());
  request.numa_policy = NumaPolicy::kBestEffort;
  auto a = find_allocation(request, pool);
  ASSERT_TRUE(a.has_value());
  std::vector<int> gpus = a->nodes[0].gpus;
  std::sort(gpus.begin(), gpus.end());
  EXPECT_EQ(gpus, (std::vector<int>{0, 1, 2, 3}));
  // gpus_per_node: 2 GPUs from one package's domains, cores next to them.
  NodePool fresh;
  ASSERT_TRUE(fresh.add_node(1, "g1", gpu_node()).is_ok());
  ResourceRequest per_node;
  per_node.ntasks = 2;
  per_node.gpus_per_node = 1;
  take(fresh, 1, {0, 1, 2, 3});  // domain 0 has no free cores left
  NodeAllocation gone;
  gone.rank = 1;
  gone.gpus = {1};
  ASSERT_TRUE(fresh.allocate({{gone}}).is_ok());
  a = find_allocation(per_node, fresh);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->nodes[0].gpus, std::vector<int>{0});  // lowest free GPU's domain
  per_node.gpus_per_node = 4;
  EXPECT_FALSE(find_allocation(per_node, fresh).has_value());
}

TEST(AllocatorLayout, CyclicRanksMemPerCpuAndNoNumaPolicy) {
  NodePool pool = two_nodes();
  ResourceRequest request;
  request.nodes = 2;
  request.ntasks = 5;
  request.node_distribution = Distribution::kCyclic;
  request.mem_per_cpu_bytes = 1ULL << 30;
  auto a = find_allocation(request, pool);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(task_ranks(*a, 0), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(task_ranks(*a, 1), (std::vector<int>{1, 3}));
  EXPECT_EQ(a->nodes[0].memory_bytes, 3ULL << 30);
  EXPECT_EQ(a->nodes[1].memory_bytes, 2ULL << 30);
  EXPECT_TRUE(task_ranks(*a, 2).empty());
  // Memory caps the tasks a node takes: 64 GiB per node, 20 GiB per task.
  request.node_distribution = Distribution::kBlock;
  request.nodes = 0;
  request.ntasks = 4;
  request.mem_per_cpu_bytes = 20ULL << 30;
  EXPECT_EQ(task_capacity(request, *pool.find(1)), 3);
  a = find_allocation(request, pool);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->nodes.size(), 2u);
  request.mem_per_node_bytes = 1;
  EXPECT_EQ(check_request(request).code(), Code::kInvalidArgument);
  // kNone: lowest ids, across domains.
  take(pool, 1, {0, 1});
  ResourceRequest plain{0, 1, 4, 0};
  plain.numa_policy = NumaPolicy::kNone;
  a = find_allocation(plain, pool);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->nodes[0].cores, (std::vector<int>{2, 3, 4, 5}));
  plain.cpu_bind = CpuBind::kNone;
  a = find_allocation(plain, pool);
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(task_layout(*a, 0, topo(kNode))[0].cpus.empty());
}

TEST(AllocatorShared, OversubscribedJobsShareOnlyAmongThemselves) {
  NodePool pool;
  ASSERT_TRUE(pool.add_node(1, "n1", topo("pack:1 numa:1 core:4 pu:1")).is_ok());
  ASSERT_TRUE(pool.reserve_cores(1, {3}).is_ok());
  ResourceRequest shared{0, 3, 1, 0};
  shared.oversubscribe = true;
  for (int i = 0; i < kMaxSharers; ++i) {
    auto a = find_allocation(shared, pool);
    ASSERT_TRUE(a.has_value()) << i;
    EXPECT_TRUE(a->shared);
    EXPECT_EQ(a->nodes[0].cores, (std::vector<int>{0, 1, 2}));
    ASSERT_TRUE(pool.allocate(*a).is_ok());
  }
  EXPECT_FALSE(find_allocation(shared, pool).has_value());
  EXPECT_FALSE(find_allocation(ResourceRequest{0, 1, 1, 0}, pool).has_value());
}

// --exclusive: whole idle nodes, every core, GPU, memory and gres unit of
// them, and nothing else placed there while they are held.
ResourceRequest whole_nodes(int ntasks, int cpus_per_task = 1, int nodes = 0) {
  ResourceRequest r{nodes, ntasks, cpus_per_task, 0};
  r.exclusive = true;
  return r;
}

TEST(AllocatorExclusive, TakesOnlyIdleNodesAndAllOfThem) {
  NodePool pool = two_nodes();
  take(pool, 1, {0});  // node 1 is partly used: one core of sixteen
  auto a = find_allocation(whole_nodes(1), pool);
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->nodes.size(), 1u);
  const NodeAllocation& part = a->nodes[0];
  EXPECT_EQ(part.rank, 2u);
  EXPECT_EQ(part.ntasks, 1);
  EXPECT_EQ(part.cores, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(part.numa, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(part.memory_bytes, pool.find(2)->free_memory());
  EXPECT_GT(part.memory_bytes, 0u);
  EXPECT_FALSE(a->shared);
  // The one task spreads over the node: its share is every core.
  EXPECT_EQ(a->cpus_per_task, 16);
  const auto tasks = task_layout(*a, 0, topo(kNode));
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].cores, part.cores);
  ASSERT_TRUE(pool.allocate(*a).is_ok());
  EXPECT_EQ(pool.free_cores(2), 0);
  EXPECT_EQ(pool.free_memory(2), 0u);
  // No second whole node, and node 1's fifteen free cores go to plain jobs.
  EXPECT_FALSE(find_allocation(whole_nodes(1), pool).has_value());
  auto plain = find_allocation(ResourceRequest{0, 15, 1, 0}, pool);
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->nodes[0].rank, 1u);
  EXPECT_FALSE(find_allocation(ResourceRequest{0, 16, 1, 0}, pool).has_value());
  // Released: all of it is free again.
  ASSERT_TRUE(pool.release(*a).is_ok());
  EXPECT_TRUE(pool.find(2)->idle());
  EXPECT_EQ(pool.free_cores(2), 16);
  EXPECT_EQ(pool.free_memory(2), pool.find(2)->topology().memory_bytes);
  EXPECT_FALSE(check_request([] {
                 ResourceRequest both = whole_nodes(1);
                 both.oversubscribe = true;
                 return both;
               }())
                   .is_ok());
}

TEST(AllocatorExclusive, ANodeInAnyUseIsNotGiven) {
  NodeTopology t = topo("pack:1 numa:1 core:4 pu:1");
  t.gpus.push_back({0, 0, "cuda0", ""});
  const auto one_node = [&] {
    NodePool pool;
    EXPECT_TRUE(pool.add_node(1, "n1", t).is_ok());
    EXPECT_TRUE(pool.set_gres(1, {{"nvme", 2}}).is_ok());
    return pool;
  };
  NodeAllocation core;
  core.rank = 1;
  core.cores = {2};
  NodeAllocation gpu;
  gpu.rank = 1;
  gpu.gpus = {0};
  NodeAllocation memory;
  memory.rank = 1;
  memory.memory_bytes = 1 << 20;
  NodeAllocation units;
  units.rank = 1;
  units.gres = {{"nvme", 1}};
  const struct {
    const char* what;
    Allocation use;
  } uses[] = {
      {"a core", {{core}}},
      {"a GPU", {{gpu}}},
      {"memory", {{memory}}},
      {"a gres unit", {{units}}},
      {"an oversubscribing job's core", Allocation{{core}, 1, /*shared=*/true}},
  };
  for (const auto& use : uses) {
    NodePool pool = one_node();
    ASSERT_TRUE(pool.allocate(use.use).is_ok()) << use.what;
    EXPECT_FALSE(pool.find(1)->idle()) << use.what;
    EXPECT_FALSE(find_allocation(whole_nodes(1), pool).has_value()) << use.what;
    ASSERT_TRUE(pool.release(use.use).is_ok()) << use.what;
    EXPECT_TRUE(find_allocation(whole_nodes(1), pool).has_value()) << use.what;
  }
}

TEST(AllocatorExclusive, NothingElseIsPlacedOnAHeldNode) {
  NodeTopology t = topo("pack:1 numa:1 core:4 pu:1");
  t.gpus.push_back({0, 0, "cuda0", ""});
  NodePool pool;
  ASSERT_TRUE(pool.add_node(1, "n1", t).is_ok());
  ASSERT_TRUE(pool.set_gres(1, {{"nvme", 2}}).is_ok());
  auto whole = find_allocation(whole_nodes(1), pool);
  ASSERT_TRUE(whole.has_value());
  const NodeAllocation& part = whole->nodes[0];
  EXPECT_EQ(part.cores, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(part.gpus, std::vector<int>{0});
  EXPECT_EQ(part.gres, (std::map<std::string, int>{{"nvme", 2}}));
  ASSERT_TRUE(pool.allocate(*whole).is_ok());

  ResourceRequest plain{0, 1, 1, 0};
  ResourceRequest shared = plain;
  shared.oversubscribe = true;
  ResourceRequest memory_only = plain;
  memory_only.mem_per_node_bytes = 1 << 20;
  ResourceRequest gres_only = plain;
  gres_only.gres = {{"nvme", 1}};
  for (const ResourceRequest& r : {plain, shared, memory_only, gres_only, whole_nodes(1)}) {
    EXPECT_FALSE(find_allocation(r, pool).has_value());
  }
  // Nor by hand: the pool has none of any of it left.
  NodeAllocation memory;
  memory.rank = 1;
  memory.memory_bytes = 1;
  NodeAllocation units;
  units.rank = 1;
  units.gres = {{"nvme", 1}};
  NodeAllocation gpu;
  gpu.rank = 1;
  gpu.gpus = {0};
  NodeAllocation core;
  core.rank = 1;
  core.cores = {1};
  for (const NodeAllocation& other : {memory, units, gpu}) {
    EXPECT_FALSE(pool.allocate({{other}}).is_ok());
  }
  EXPECT_FALSE(pool.allocate(Allocation{{core}, 1, /*shared=*/true}).is_ok());
  ASSERT_TRUE(pool.release(*whole).is_ok());
  EXPECT_TRUE(pool.find(1)->idle());
  EXPECT_EQ(pool.find(1)->free_gres("nvme"), 2);
  EXPECT_EQ(pool.find(1)->free_gpus(), 1);
  for (const ResourceRequest& r : {plain, shared, memory_only, gres_only}) {
    EXPECT_TRUE(find_allocation(r, pool).has_value());
  }
}

TEST(AllocatorExclusive, ReservedCoresStayReserved) {
  NodePool pool;
  ASSERT_TRUE(pool.add_node(1, "n1", topo("pack:1 numa:1 core:4 pu:1")).is_ok());
  ASSERT_TRUE(pool.reserve_cores(1, {3}).is_ok());
  EXPECT_TRUE(pool.find(1)->idle());
  auto a = find_allocation(whole_nodes(1), pool);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->nodes[0].cores, (std::vector<int>{0, 1, 2}));
  ASSERT_TRUE(pool.allocate(*a).is_ok());
  EXPECT_TRUE(pool.find(1)->core_reserved(3));
  ASSERT_TRUE(pool.release(*a).is_ok());
  EXPECT_TRUE(pool.find(1)->core_reserved(3));
}

TEST(AllocatorExclusive, TasksAsAskedEachWithAnEvenShare) {
  NodePool pool;
  const NodeTopology four = topo("pack:1 numa:1 core:4 pu:1");
  ASSERT_TRUE(pool.add_node(1, "n1", four).is_ok());
  const struct {
    ResourceRequest request;
    int share;
    std::vector<std::vector<int>> task_cores;  // each task's
  } cases[] = {
      {whole_nodes(1), 4, {{0, 1, 2, 3}}},        // one task: all of it
      {whole_nodes(2), 2, {{0, 1}, {2, 3}}},      // two halves
      {whole_nodes(3), 1, {{0}, {1}, {2}}},       // core 3 the job's, no task's
      {whole_nodes(1, 2), 4, {{0, 1, 2, 3}}},     // -c 2: at least two, all four here
      {whole_nodes(4), 1, {{0}, {1}, {2}, {3}}},  // as many tasks as cores
  };
  for (const auto& c : cases) {
    auto a = find_allocation(c.request, pool);
    ASSERT_TRUE(a.has_value()) << c.request.ntasks;
    EXPECT_EQ(a->nodes[0].ntasks, c.request.ntasks);
    EXPECT_EQ(a->nodes[0].cores, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(a->cpus_per_task, c.share) << c.request.ntasks;
    const auto tasks = task_layout(*a, 0, four);
    ASSERT_EQ(tasks.size(), c.task_cores.size());
    for (std::size_t j = 0; j < tasks.size(); ++j) EXPECT_EQ(tasks[j].cores, c.task_cores[j]);
  }
  EXPECT_FALSE(find_allocation(whole_nodes(5), pool).has_value());

  // Two domains of four: one task per domain when the share fills it; a
  // single-NUMA task keeps to its domain, the other domain's cores the job's.
  const NodeTopology two_domains = topo("pack:1 numa:2 core:4 pu:1");
  NodePool numa;
  ASSERT_TRUE(numa.add_node(1, "n1", two_domains).is_ok());
  auto two = find_allocation(whole_nodes(2), numa);
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(two->cpus_per_task, 4);
  auto tasks = task_layout(*two, 0, two_domains);
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].numa, std::vector<int>{0});
  EXPECT_EQ(tasks[1].numa, std::vector<int>{1});
  ResourceRequest single = whole_nodes(1);
  single.numa_policy = NumaPolicy::kSingleNumaNode;
  auto one = find_allocation(single, numa);
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->cpus_per_task, 4);
  EXPECT_EQ(one->nodes[0].cores.size(), 8u);
  EXPECT_EQ(one->nodes[0].numa, (std::vector<int>{0, 1}));
  tasks = task_layout(*one, 0, two_domains);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].cores, (std::vector<int>{0, 1, 2, 3}));

  // Over 16-core nodes: -N 2 -n 3 puts 2 and 1 tasks; one share for all
  // (8 cores, each task in one package of its node).
  NodePool pair = two_nodes();
  auto gang = find_allocation(whole_nodes(3, 1, 2), pair);
  ASSERT_TRUE(gang.has_value());
  ASSERT_EQ(gang->nodes.size(), 2u);
  EXPECT_EQ(gang->nodes[0].ntasks, 2);
  EXPECT_EQ(gang->nodes[1].ntasks, 1);
  EXPECT_EQ(gang->nodes[1].cores.size(), 16u);
  EXPECT_EQ(gang->cpus_per_task, 8);
  tasks = task_layout(*gang, 0, topo(kNode));
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].numa, (std::vector<int>{0, 1}));
  EXPECT_EQ(tasks[1].numa, (std::vector<int>{2, 3}));
  // -n 17: as few nodes as the tasks fit on, both whole.
  auto wide = find_allocation(whole_nodes(17), pair);
  ASSERT_TRUE(wide.has_value());
  ASSERT_EQ(wide->nodes.size(), 2u);
  EXPECT_EQ(wide->nodes[0].cores.size() + wide->nodes[1].cores.size(), 32u);
  EXPECT_EQ(wide->cpus_per_task, 1);
}

TEST(AllocatorLayout, APartTooSmallForItsSharesDealsItsCoresEvenly) {
  // A smaller node added to an exclusive elastic job: the job's share is 4.
  Allocation a;
  a.cpus_per_task = 4;
  NodeAllocation part;
  part.rank = 1;
  part.cores = {0, 1, 2, 3};
  part.ntasks = 2;
  a.nodes.push_back(part);
  const auto tasks = task_layout(a, 0, topo("pack:1 numa:1 core:4 pu:1"));
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].cores, (std::vector<int>{0, 1}));
  EXPECT_EQ(tasks[1].cores, (std::vector<int>{2, 3}));
}

// Random workloads over GPU nodes, reserved cores, shared and exclusive
// jobs and every layout option: no exclusive core or GPU is given twice, no
// core to more than kMaxSharers jobs, reserved cores never; every
// allocation fits its request; the pool's counters match.
TEST(AllocatorProperty, RandomMixedWorkloads) {
  std::vector<NodeTopology> shapes = {gpu_node(), topo("pack:2 numa:2 core:3 pu:2"),
                                      topo("pack:1 numa:3 core:2 pu:1")};
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  NodePool pool;
  std::map<Rank, NodeTopology> hw;
  for (int i = 0; i < 5; ++i) {
    const NodeTopology& t = shapes[static_cast<std::size_t>(pick(0, 2))];
    ASSERT_TRUE(pool.add_node(i + 1, "n" + std::to_string(i + 1), t).is_ok());
    ASSERT_TRUE(pool.reserve_cores(i + 1, spec_cores(t, pick(0, 2))).is_ok());
    hw[i + 1] = t;
  }
  std::vector<Allocation> live;
  std::vector<bool> live_whole;  // by live's index: an exclusive job's
  int placed = 0;
  int whole = 0;
  for (int step = 0; step < 3000; ++step) {
    if (pick(0, 9) < 6) {
      ResourceRequest r;
      r.ntasks = pick(1, 8);
      r.cpus_per_task = pick(1, 3);
      r.nodes = pick(0, 2) == 0 ? pick(1, std::min(r.ntasks, 3)) : 0;
      if (pick(0, 3) == 0) {
        r.gpus_per_task = 1;
      } else if (pick(0, 3) == 0) {
        r.gpus_per_node = pick(1, 2);
      }
      if (pick(0, 3) == 0) r.mem_per_cpu_bytes = static_cast<std::uint64_t>(pick(1, 8)) << 30;
      r.node_distribution = pick(0, 1) == 0 ? Distribution::kBlock : Distribution::kCyclic;
      r.core_distribution = pick(0, 1) == 0 ? Distribution::kBlock : Distribution::kCyclic;
      r.numa_policy = static_cast<NumaPolicy>(pick(0, 2));
      r.oversubscribe = pick(0, 4) == 0;
      r.exclusive = !r.oversubscribe && pick(0, 5) == 0;
      auto a = find_allocation(r, pool);
      if (!a) continue;
      if (r.exclusive) {
        ASSERT_GE(a->cpus_per_task, r.cpus_per_task);
        ++whole;
      }
      int tasks = 0;
      std::set<int> seen_ranks;
      for (std::size_t i = 0; i < a->nodes.size(); ++i) {
        const NodeAllocation& part = a->nodes[i];
        const NodeState& node = *pool.find(part.rank);
        tasks += part.ntasks;
        // Nobody's node is given whole, nor anything of a node held whole.
        for (std::size_t k = 0; k < live.size(); ++k) {
          for (const NodeAllocation& on : live[k].nodes) {
            ASSERT_FALSE(on.rank == part.rank && (r.exclusive || live_whole[k])) << "step " << step;
          }
        }
        if (r.exclusive) {
          ASSERT_TRUE(node.idle()) << "step " << step;
          ASSERT_EQ(static_cast<int>(part.cores.size()), node.free_cores());
          ASSERT_GE(static_cast<int>(part.cores.size()), part.ntasks * a->cpus_per_task);
          ASSERT_EQ(static_cast<int>(part.gpus.size()), node.total_gpus());
          ASSERT_EQ(part.memory_bytes, node.free_memory());
        } else {
          ASSERT_EQ(static_cast<int>(part.cores.size()), part.ntasks * r.cpus_per_task);
          const int want_gpus = r.gpus_per_task * part.ntasks + r.gpus_per_node;
          ASSERT_EQ(static_cast<int>(part.gpus.size()), want_gpus) << "step " << step;
        }
        for (int c : part.cores) {
          ASSERT_FALSE(node.core_reserved(c)) << "step " << step;
          if (!r.oversubscribe) {
            ASSERT_TRUE(node.core_free(c)) << "step " << step;
          }
        }
        for (int g : part.gpus) ASSERT_TRUE(node.gpu_free(g)) << "step " << step;
        if (r.mem_per_cpu_bytes > 0 && !r.exclusive) {
          ASSERT_EQ(part.memory_bytes, r.mem_per_cpu_bytes * part.cores.size());
        }
        const auto layout = task_layout(*a, i, hw[part.rank]);
        ASSERT_EQ(static_cast<int>(layout.size()), part.ntasks);
        for (const TaskPlacement& t : layout) {
          ASSERT_TRUE(seen_ranks.insert(t.rank).second) << "rank twice at step " << step;
          ASSERT_EQ(static_cast<int>(t.gpus.size()), r.gpus_per_task);
          if (r.numa_policy == NumaPolicy::kSingleNumaNode) {
            ASSERT_EQ(t.numa.size(), 1u) << "step " << step;
            for (int g : t.gpus) {
              ASSERT_EQ(hw[part.rank].gpus[static_cast<std::size_t>(g)].numa, t.numa[0]);
            }
          }
        }
      }
      ASSERT_EQ(tasks, r.ntasks);
      ASSERT_EQ(*seen_ranks.rbegin(), r.ntasks - 1);
      ASSERT_TRUE(pool.allocate(*a).is_ok()) << "step " << step;
      live.push_back(std::move(*a));
      live_whole.push_back(r.exclusive);
      ++placed;
    } else if (!live.empty()) {
      const auto i = static_cast<std::size_t>(pick(0, static_cast<int>(live.size()) - 1));
      ASSERT_TRUE(pool.release(live[i]).is_ok()) << "step " << step;
      live_whole.erase(live_whole.begin() + static_cast<std::ptrdiff_t>(i));
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    // Counters agree with the live allocations.
    for (const NodeState& node : pool.nodes()) {
      std::map<int, int> excl;
      std::map<int, int> shared;
      int gpus = 0;
      for (const Allocation& a : live) {
        for (const NodeAllocation& part : a.nodes) {
          if (part.rank != node.rank()) continue;
          for (int c : part.cores) (a.shared ? shared : excl)[c]++;
          gpus += static_cast<int>(part.gpus.size());
        }
      }
      for (const auto& [c, n] : excl) ASSERT_EQ(n, 1) << "core " << c << " twice";
      for (const auto& [c, n] : shared) {
        ASSERT_LE(n, kMaxSharers);
        ASSERT_EQ(excl.count(c), 0u) << "core " << c << " exclusive and shared";
        ASSERT_EQ(node.sharers(c), n);
      }
      int taken = node.reserved_cores() + static_cast<int>(excl.size());
      for (const auto& [c, n] : shared) taken += excl.count(c) == 0 ? 1 : 0;
      ASSERT_EQ(node.free_cores(), node.total_cores() - taken) << "step " << step;
      ASSERT_EQ(node.free_gpus(), node.total_gpus() - gpus) << "step " << step;
    }
  }
  EXPECT_GT(placed, 300);
  EXPECT_GT(whole, 10);
}

}  // namespace
}  // namespace hpcq::resource
