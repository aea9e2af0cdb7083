#include "lib/sched/plugins/drf.h"

#include <gtest/gtest.h>

#include "lib/sched/scheduler.h"

namespace hpcq::sched {
namespace {

constexpr TimeUs kNow = 1'700'000'000 * kUsPerSecond;
constexpr std::uint64_t kGiB = 1ull << 30;

// `nodes` nodes of 8 cores, 16 GiB and `gpus` GPUs.
resource::NodePool pool_of(int nodes, int gpus = 0) {
  resource::NodeTopology t;
  t.packages = 1;
  t.numa = {{0, 0, 16 * kGiB}};
  for (int c = 0; c < 8; ++c) t.cores.push_back({c, 0, 0, {c}});
  t.memory_bytes = 16 * kGiB;
  for (int g = 0; g < gpus; ++g) t.gpus.push_back({g, 0, "cuda" + std::to_string(g), ""});
  resource::NodePool pool;
  for (int i = 1; i <= nodes; ++i) {
    EXPECT_TRUE(pool.add_node(static_cast<Rank>(i), "n" + std::to_string(i), t).is_ok());
  }
  return pool;
}

RunningJob running(JobId id, std::uint32_t uid, Rank rank, int cores, std::uint64_t memory,
                   int gpus = 0) {
  RunningJob r;
  r.id = id;
  r.uid = uid;
  resource::NodeAllocation part;
  part.rank = rank;
  part.node = "n" + std::to_string(rank);
  for (int c = 0; c < cores; ++c) part.cores.push_back(c);
  part.numa = {0};
  part.memory_bytes = memory;
  for (int g = 0; g < gpus; ++g) part.gpus.push_back(g);
  part.ntasks = cores;
  r.allocation.nodes.push_back(part);
  r.request.ntasks = cores;
  return r;
}

PendingJob job(JobId id, std::uint32_t uid, TimeUs submit) {
  PendingJob j;
  j.id = id;
  j.uid = uid;
  j.submit_time = submit;
  return j;
}

std::vector<JobId> order(Plugin& plugin, const Snapshot& snapshot) {
  Session session(snapshot);
  plugin.on_session_open(session);
  std::vector<JobId> ids;
  for (const PendingJob* j : session.ordered_queue()) ids.push_back(j->id);
  return ids;
}

TEST(Drf, DominantShareIsTheLargestOfCoresMemoryAndGpus) {
  const resource::NodePool pool = pool_of(2);  // 16 cores, 32 GiB
  Snapshot s;
  s.now = kNow;
  s.pool = &pool;
  s.running = {running(1, 100, 1, 8, 2 * kGiB),   // cores 8/16 = 0.5
               running(2, 200, 2, 2, 24 * kGiB),  // memory 24/32 = 0.75
               running(3, 300, 2, 1, 0, 2)};      // GPUs 2/(2+2)
  s.running.push_back(running(4, 400, 2, 1, kGiB, 2));
  const auto shares = drf_dominant_shares(s, 0);
  EXPECT_DOUBLE_EQ(shares.at(100), 0.5);
  EXPECT_DOUBLE_EQ(shares.at(200), 0.75);
  EXPECT_DOUBLE_EQ(shares.at(300), 0.5);  // half of the GPUs in use
  EXPECT_EQ(shares.count(999), 0u);
  // With the cluster's GPU count known: 2 of 8.
  EXPECT_DOUBLE_EQ(drf_dominant_shares(s, 8).at(300), 0.25);
  EXPECT_DOUBLE_EQ(drf_dominant_shares(s, 8).at(400), 0.25);
}

TEST(Drf, GpuTotalFromThePool) {
  const resource::NodePool pool = pool_of(2, 4);  // 8 GPUs
  Snapshot s;
  s.pool = &pool;
  s.running = {running(1, 100, 1, 1, 0, 2)};
  EXPECT_DOUBLE_EQ(drf_dominant_shares(s, 0).at(100), 0.25);
  EXPECT_DOUBLE_EQ(drf_dominant_shares(s, 2).at(100), 1.0);  // the option wins
}

TEST(Drf, SumsAUsersJobs) {
  const resource::NodePool pool = pool_of(2);
  Snapshot s;
  s.pool = &pool;
  s.running = {running(1, 100, 1, 4, kGiB), running(2, 100, 2, 4, kGiB)};
  EXPECT_DOUBLE_EQ(drf_dominant_shares(s, 0).at(100), 0.5);  // 8 of 16 cores
}

TEST(Drf, RequestStandsInForWhatTheAllocationDoesNotName) {
  RunningJob r;
  r.request.ntasks = 4;
  r.request.cpus_per_task = 2;
  r.request.nodes = 2;
  r.request.mem_per_node_bytes = kGiB;
  r.request.gpus_per_node = 1;
  const DrfResources use = drf_job_use(r);
  EXPECT_DOUBLE_EQ(use.cores, 8.0);
  EXPECT_DOUBLE_EQ(use.memory_bytes, 2.0 * kGiB);
  EXPECT_DOUBLE_EQ(use.gpus, 2.0);
}

TEST(DrfPlugin, LighterUserFirst) {
  const resource::NodePool pool = pool_of(2);
  Snapshot s;
  s.now = kNow;
  s.pool = &pool;
  s.running = {running(1, 100, 1, 8, 2 * kGiB), running(2, 200, 2, 2, 24 * kGiB)};
  // In submit order: user 200 (0.75), user 100 (0.5), user 300 (nothing).
  s.queue = {job(1, 200, kNow - 3), job(2, 100, kNow - 2), job(3, 300, kNow - 1),
             job(4, 100, kNow)};
  DrfPlugin plugin;
  EXPECT_EQ(order(plugin, s), (std::vector<JobId>{3, 2, 4, 1}));
  s.running.clear();  // nobody runs: submit order
  EXPECT_EQ(order(plugin, s), (std::vector<JobId>{1, 2, 3, 4}));
}

TEST(DrfPlugin, ThroughTheSchedulerWithOptions) {
  const resource::NodePool pool = pool_of(2);
  Snapshot s;
  s.now = kNow;
  s.pool = &pool;
  // User 100 holds 2 of the GPUs, user 200 holds 4 cores of the 16.
  s.running = {running(1, 100, 1, 1, 0, 2), running(2, 200, 2, 4, 0)};
  PendingJob a = job(10, 100, kNow - 1);
  a.request.ntasks = 3;
  PendingJob b = job(20, 200, kNow);
  b.request.ntasks = 3;
  s.queue = {a, b};
  // Free: 7 + 4 cores, so both fit; the order is the order of the Starts.
  // total_gpus 8: user 100 at 0.25 = user 200 at 0.25: submit order.
  auto even = Scheduler::create({{"allocate"}, {"drf"}, {{"drf.total_gpus", "8"}}});
  ASSERT_TRUE(even.is_ok()) << even.status().to_string();
  Decisions d = even->cycle(s);
  ASSERT_EQ(d.decisions.size(), 2u);
  EXPECT_EQ(std::get<Start>(d.decisions[0]).job, 10u);
  // total_gpus 4: user 100 at 0.5 goes after user 200.
  auto four = Scheduler::create({{"allocate"}, {"drf"}, {{"drf.total_gpus", "4"}}});
  ASSERT_TRUE(four.is_ok());
  d = four->cycle(s);
  ASSERT_EQ(d.decisions.size(), 2u);
  EXPECT_EQ(std::get<Start>(d.decisions[0]).job, 20u);

  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"total_gpus", "-1"}, {"total_gpus", "x"}, {"gpus", "4"}}) {
    const auto bad = Scheduler::create({{"allocate"}, {"drf"}, {{"drf." + name, value}}});
    ASSERT_FALSE(bad.is_ok()) << name;
    EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
    EXPECT_NE(bad.status().message().find("drf." + name), std::string::npos)
        << bad.status().message();
  }
}

}  // namespace
}  // namespace hpcq::sched
