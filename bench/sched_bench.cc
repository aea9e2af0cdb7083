// One scheduling cycle (lib/sched) on large, busy clusters, with and without
// backfilling: the target is a cycle with 10,000 queued and 5,000
// running jobs on 4,096 nodes in under 50 ms.
//
//   ninja -C build bench/hpcq-sched-bench && build/bench/hpcq-sched-bench
//
// Counters: starts and reserves made by the cycle, free_after the cores
// still free once its starts are applied. Depth 0 is conservative
// backfilling (a reservation for every blocked job): its time grows with the
// queue, as each reservation is one sweep of the planner's profile.
//
// States are built once per benchmark from a fixed seed (the cycle does not
// change its snapshot), so every iteration schedules the same state.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "lib/resource/allocator.h"
#include "lib/resource/hwloc_import.h"
#include "lib/sched/scheduler.h"
#include "lib/sched/usage.h"

namespace hpcq::sched {
namespace {

constexpr TimeUs kNow = 1'000'000 * kUsPerSecond;

struct State {
  resource::NodePool pool;
  Snapshot snapshot;
  SitePolicy site;
  UsageLedger usage;
};

resource::NodeTopology topology(const std::string& spec) {
  auto t = resource::discover_topology(spec);
  if (!t.is_ok()) {
    std::fprintf(stderr, "topology %s: %s\n", spec.c_str(), t.status().to_string().c_str());
    std::abort();
  }
  return *t;
}

// `nodes` nodes described by `spec`; `running` jobs placed first-fit by the
// allocator (sizes drawn by `running_size`), then `queued` jobs.
template <typename RunningSize, typename QueuedSize>
State make_state(int nodes, const std::string& spec, int running, int queued,
                 RunningSize running_size, QueuedSize queued_size, std::uint32_t seed) {
  State s;
  const resource::NodeTopology t = topology(spec);
  for (int i = 1; i <= nodes; ++i) {
    // Appended, not "n" + to_string(i): GCC 12 at -O3 warns a false
    // -Wrestrict on the latter.
    std::string name = "n";
    name += std::to_string(i);
    (void)s.pool.add_node(static_cast<Rank>(i), name, t);
  }
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> remaining_s(1, 86'400);
  JobId id = 1;
  // Gives up when the cluster is full (a few percent stay free in fragments).
  for (int tries = 0; static_cast<int>(s.snapshot.running.size()) < running && tries < 8 * running;
       ++tries) {
    resource::ResourceRequest request = running_size(rng);
    if (tries > 4 * running) request = {};  // the cluster is nearly full: one core
    auto allocation = resource::find_allocation(request, s.pool);
    if (!allocation) continue;
    (void)s.pool.allocate(*allocation);
    sched::RunningJob job;
    job.id = id++;
    job.allocation = std::move(*allocation);
    job.end_estimate = kNow + remaining_s(rng) * kUsPerSecond;
    s.snapshot.running.push_back(std::move(job));
  }
  std::uniform_int_distribution<std::int64_t> limit_s(60, 86'400);
  for (int i = 0; i < queued; ++i) {
    PendingJob job;
    job.id = id++;
    job.submit_time = kNow - (queued - i) * kUsPerSecond;
    job.request = queued_size(rng);
    job.time_limit_s = limit_s(rng);
    s.snapshot.queue.push_back(job);
  }
  s.snapshot.now = kNow;
  s.snapshot.pool = &s.pool;
  return s;
}

// 4,096 nodes of 16 cores (2 packages x 2 NUMA domains x 4 cores), 5,000
// running jobs (mostly 1-16 cores, one in ten 2-4 whole nodes) leaving a few
// percent of the cores free in fragments, 10,000 queued jobs of 1-64 cores
// (one in ten 2-4 whole nodes). With `head_nodes` > 0 the queue opens with
// a gang of that many whole nodes, which blocks allocate at once and leaves
// the whole queue to backfill.
State big_cluster(int head_nodes) {
  const auto running = [](std::mt19937& rng) {
    resource::ResourceRequest r;
    if (std::uniform_int_distribution<int>(0, 9)(rng) == 0) {
      r.nodes = std::uniform_int_distribution<int>(2, 4)(rng);
      r.ntasks = 16 * r.nodes;
    } else {
      r.ntasks = std::uniform_int_distribution<int>(1, 16)(rng);
    }
    return r;
  };
  const auto queued = [](std::mt19937& rng) {
    resource::ResourceRequest r;
    if (std::uniform_int_distribution<int>(0, 9)(rng) == 0) {
      r.nodes = std::uniform_int_distribution<int>(2, 4)(rng);
      r.ntasks = 16 * r.nodes;
    } else {
      r.ntasks = std::uniform_int_distribution<int>(1, 64)(rng);
    }
    return r;
  };
  State s = make_state(4096, "pack:2 numa:2 core:4 pu:1", 5000, 10'000, running, queued, 42);
  if (head_nodes > 0) {
    PendingJob& head = s.snapshot.queue.front();
    head.request = {};
    head.request.nodes = head_nodes;
    head.request.ntasks = 16 * head_nodes;
  }
  return s;
}

// The CTC SP2 setting the simulator runs: one node of 512 cores, a few
// hundred running jobs, a long queue of 1-128 core jobs.
State one_big_node() {
  const auto running = [](std::mt19937& rng) {
    resource::ResourceRequest r;
    r.ntasks = std::uniform_int_distribution<int>(1, 7)(rng);
    return r;
  };
  const auto queued = [](std::mt19937& rng) {
    resource::ResourceRequest r;
    r.ntasks = std::uniform_int_distribution<int>(1, 128)(rng);
    return r;
  };
  return make_state(1, "core:512 pu:1", 120, 2000, running, queued, 7);
}

// big_cluster(0) with Slurm's usual site set-up on top: 20 accounts with
// different shares under root, 400 users spread over them with past usage
// drawn at random, every job owned by one of them.
State big_cluster_with_accounts() {
  State s = big_cluster(0);
  std::mt19937 rng(99);
  constexpr int kAccounts = 20;
  constexpr std::uint32_t kUsers = 400;
  for (int a = 0; a < kAccounts; ++a) {
    s.site.accounts.push_back({"acct" + std::to_string(a), "", static_cast<double>(1 + a % 5)});
  }
  std::uniform_real_distribution<double> used(0, 1e9);
  for (std::uint32_t u = 0; u < kUsers; ++u) {
    const std::string account = "acct" + std::to_string(u % kAccounts);
    s.site.users.push_back({1000 + u, account, 1.0});
    s.usage.charge(1000 + u, account, used(rng), kNow - 3600 * kUsPerSecond);
  }
  std::uniform_int_distribution<std::uint32_t> user(0, kUsers - 1);
  for (PendingJob& job : s.snapshot.queue) {
    const std::uint32_t u = user(rng);
    job.uid = 1000 + u;
    job.account = "acct" + std::to_string(u % kAccounts);
  }
  for (RunningJob& job : s.snapshot.running) {
    const std::uint32_t u = user(rng);
    job.uid = 1000 + u;
    job.account = "acct" + std::to_string(u % kAccounts);
  }
  s.snapshot.pool = &s.pool;  // in case the State was moved rather than elided
  s.snapshot.site = &s.site;
  s.snapshot.usage = &s.usage;
  return s;
}

Scheduler scheduler(const std::string& depth, std::vector<std::string> plugins = {}) {
  SchedulerConfig config;
  if (!plugins.empty()) config.plugins = std::move(plugins);
  if (depth.empty()) {
    config.actions = {"allocate"};
  } else {
    config.actions = {"allocate", "backfill"};
    config.options = {{"backfill.reservation_depth", depth}};
  }
  auto s = Scheduler::create(config);
  if (!s.is_ok()) std::abort();
  return std::move(s).value();
}

void run(benchmark::State& bench, const State& state, const std::string& depth,
         std::vector<std::string> plugins = {}) {
  Scheduler s = scheduler(depth, std::move(plugins));
  std::size_t starts = 0;
  std::size_t reserves = 0;
  std::int64_t free_cores = 0;
  for (auto _ : bench) {
    Decisions d = s.cycle(state.snapshot);
    starts = reserves = 0;
    free_cores = 0;
    for (const auto& node : state.pool.nodes()) free_cores += node.free_cores();
    for (const Decision& decision : d.decisions) {
      if (const Start* start = std::get_if<Start>(&decision)) {
        ++starts;
        free_cores -= start->allocation.total_cores();
      } else {
        ++reserves;
      }
    }
    benchmark::DoNotOptimize(d);
  }
  bench.counters["starts"] = static_cast<double>(starts);
  bench.counters["reserves"] = static_cast<double>(reserves);
  bench.counters["free_after"] = static_cast<double>(free_cores);
}

const State& big() {
  static const State state = big_cluster(0);
  return state;
}

const State& big_wide_head() {
  static const State state = big_cluster(1024);
  return state;
}

const State& big_with_accounts() {
  static const State state = big_cluster_with_accounts();
  return state;
}

const State& ctc() {
  static const State state = one_big_node();
  return state;
}

void BM_Cycle4096Nodes_Allocate(benchmark::State& b) { run(b, big(), ""); }
void BM_Cycle4096Nodes_Easy(benchmark::State& b) { run(b, big(), "1"); }
void BM_Cycle4096Nodes_Depth5(benchmark::State& b) { run(b, big(), "5"); }
// The case: EASY with Slurm's multifactor priority, fair-share
// dominating (priority.h's default weights), over 20 accounts and 400 users.
void BM_Cycle4096Nodes_EasyMultifactor(benchmark::State& b) {
  run(b, big_with_accounts(), "1", {"priority"});
}
void BM_Cycle4096Nodes_Depth8(benchmark::State& b) { run(b, big(), "8"); }
void BM_Cycle4096Nodes_Conservative(benchmark::State& b) { run(b, big(), "0"); }
void BM_Cycle4096NodesWideHead_Allocate(benchmark::State& b) { run(b, big_wide_head(), ""); }
void BM_Cycle4096NodesWideHead_Easy(benchmark::State& b) { run(b, big_wide_head(), "1"); }
void BM_Cycle4096NodesWideHead_Depth5(benchmark::State& b) { run(b, big_wide_head(), "5"); }
void BM_Cycle4096NodesWideHead_Depth8(benchmark::State& b) { run(b, big_wide_head(), "8"); }
void BM_Cycle4096NodesWideHead_Conservative(benchmark::State& b) { run(b, big_wide_head(), "0"); }
void BM_Cycle512Cores_Easy(benchmark::State& b) { run(b, ctc(), "1"); }
void BM_Cycle512Cores_Depth5(benchmark::State& b) { run(b, ctc(), "5"); }
void BM_Cycle512Cores_Conservative(benchmark::State& b) { run(b, ctc(), "0"); }

BENCHMARK(BM_Cycle4096Nodes_Allocate)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cycle4096Nodes_Easy)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cycle4096Nodes_EasyMultifactor)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cycle4096Nodes_Depth5)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cycle4096Nodes_Depth8)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cycle4096Nodes_Conservative)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cycle4096NodesWideHead_Allocate)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cycle4096NodesWideHead_Easy)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cycle4096NodesWideHead_Depth5)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cycle4096NodesWideHead_Depth8)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cycle4096NodesWideHead_Conservative)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cycle512Cores_Easy)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Cycle512Cores_Depth5)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Cycle512Cores_Conservative)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace hpcq::sched

BENCHMARK_MAIN();
