// Placement throughput of lib/resource: 10,000 queued jobs of mixed shapes
// onto 4,096 nodes of 2 x 64 cores in 8 NUMA domains (the target: a
// full cycle under 100 ms), and the cost of the per-cycle pool copy.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <vector>

#include "lib/resource/allocator.h"
#include "lib/resource/hwloc_import.h"
#include "lib/resource/node_pool.h"

namespace {

using hpcq::resource::Allocation;
using hpcq::resource::NodePool;
using hpcq::resource::ResourceRequest;

constexpr int kNodes = 4096;
constexpr int kJobs = 10000;

NodePool cluster() {
  auto topo = hpcq::resource::discover_topology("pack:2 numa:4 core:16 pu:1");
  if (!topo.is_ok()) std::abort();
  NodePool pool;
  for (int i = 0; i < kNodes; ++i) {
    if (!pool.add_node(static_cast<hpcq::Rank>(i), "n" + std::to_string(i), *topo).is_ok()) {
      std::abort();
    }
  }
  return pool;
}

// Mixed shapes: serial, small MPI, whole-node, multi-node fixed, wide.
std::vector<ResourceRequest> queue() {
  std::mt19937 rng(42);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<ResourceRequest> jobs;
  for (int i = 0; i < kJobs; ++i) {
    ResourceRequest r;
    switch (pick(0, 4)) {
      case 0: r.ntasks = 1; break;
      case 1: r.ntasks = pick(2, 32); break;
      case 2:
        r.ntasks = pick(1, 4);
        r.cpus_per_task = pick(2, 16);
        break;
      case 3:
        r.nodes = pick(1, 4);
        r.ntasks = r.nodes * pick(8, 64);
        break;
      default: r.ntasks = pick(64, 512); break;
    }
    jobs.push_back(r);
  }
  return jobs;
}

bool same(const std::optional<Allocation>& a, const std::optional<Allocation>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  if (a->nodes.size() != b->nodes.size()) return false;
  for (std::size_t i = 0; i < a->nodes.size(); ++i) {
    const auto& x = a->nodes[i];
    const auto& y = b->nodes[i];
    if (x.rank != y.rank || x.ntasks != y.ntasks || x.first_task != y.first_task ||
        x.cores != y.cores || x.gpus != y.gpus || x.numa != y.numa ||
        x.memory_bytes != y.memory_bytes) {
      return false;
    }
  }
  return true;
}

// The pool's free-core index may only skip nodes, never change the answer:
// one cycle placed through it must match the same cycle placed over a plain
// list of every node (no index). Aborts on the first difference.
void check_index_agrees(const NodePool& empty, const std::vector<ResourceRequest>& jobs) {
  NodePool pool = empty;
  std::vector<const hpcq::resource::NodeState*> all;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    all.clear();
    for (const auto& node : pool.nodes()) all.push_back(&node);
    std::optional<Allocation> indexed = hpcq::resource::find_allocation(jobs[i], pool);
    std::optional<Allocation> plain = hpcq::resource::find_allocation(jobs[i], all);
    if (!same(indexed, plain)) {
      std::fprintf(stderr, "job %zu: the indexed placement differs from the plain one\n", i);
      std::abort();
    }
    if (indexed && !pool.allocate(*indexed).is_ok()) std::abort();
  }
}

void BM_PlaceQueue(benchmark::State& state) {
  const NodePool empty = cluster();
  const std::vector<ResourceRequest> jobs = queue();
  check_index_agrees(empty, jobs);
  std::int64_t placed = 0;
  for (auto _ : state) {
    NodePool pool = empty;  // the cycle's working copy
    for (const ResourceRequest& r : jobs) {
      std::optional<Allocation> a = hpcq::resource::find_allocation(r, pool);
      if (a && pool.allocate(*a).is_ok()) ++placed;
    }
  }
  state.SetItemsProcessed(state.iterations() * kJobs);
  state.counters["placed_per_cycle"] =
      static_cast<double>(placed) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_PlaceQueue)->Unit(benchmark::kMillisecond);

void BM_PoolCopy(benchmark::State& state) {
  const NodePool pool = cluster();
  for (auto _ : state) {
    NodePool copy = pool;
    benchmark::DoNotOptimize(copy);
  }
  state.SetItemsProcessed(state.iterations() * kNodes);
}
BENCHMARK(BM_PoolCopy)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
