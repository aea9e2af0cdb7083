#include "lib/sched/plugins/priority.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "lib/sched/plugins/fairshare.h"
#include "lib/sched/scheduler.h"
#include "lib/sched/usage.h"

namespace hpcq::sched {
namespace {

constexpr std::int64_t kDay = 24 * 3600;
constexpr TimeUs kNow = 1'700'000'000 * kUsPerSecond;

TimeUs days_ago(double days) {
  return kNow - static_cast<TimeUs>(days * kDay * static_cast<double>(kUsPerSecond));
}

resource::NodePool pool_of(int nodes, int cores) {
  resource::NodeTopology t;
  t.packages = 1;
  t.numa = {{0, 0, 1ull << 30}};
  for (int c = 0; c < cores; ++c) t.cores.push_back({c, 0, 0, {c}});
  t.memory_bytes = 1ull << 30;
  resource::NodePool pool;
  for (int i = 1; i <= nodes; ++i) {
    EXPECT_TRUE(pool.add_node(static_cast<Rank>(i), "n" + std::to_string(i), t).is_ok());
  }
  return pool;
}

PendingJob job(JobId id, std::uint32_t uid, TimeUs submit, int ntasks = 1) {
  PendingJob j;
  j.id = id;
  j.uid = uid;
  j.submit_time = submit;
  j.request.ntasks = ntasks;
  return j;
}

// Job ids in the Session's order after `plugin` registered its hooks.
std::vector<JobId> order(Plugin& plugin, const Snapshot& snapshot) {
  Session session(snapshot);
  plugin.on_session_open(session);
  std::vector<JobId> ids;
  for (const PendingJob* j : session.ordered_queue()) ids.push_back(j->id);
  return ids;
}

MultifactorWeights only(std::uint32_t MultifactorWeights::*field) {
  MultifactorWeights w;
  w.age = w.size = w.fairshare = w.queue = w.qos = 0;
  w.*field = 1000;
  return w;
}

// Users 1 (account "heavy", used a lot) and 2 (account "light", used little).
struct World {
  World() : usage(kDay), pool(pool_of(4, 8)) {
    site.accounts = {{"heavy", "", 1.0}, {"light", "", 1.0}};
    site.users = {{1, "heavy", 1.0}, {2, "light", 1.0}};
    QueueConfig batch;
    batch.name = "batch";
    batch.priority = 10;
    QueueConfig urgent;
    urgent.name = "urgent";
    urgent.priority = 40;
    site.queues = {batch, urgent};
    site.qos = {{"normal", 0, {}}, {"high", 100, {}}};
    usage.charge(1, "heavy", 9000.0, kNow);
    usage.charge(2, "light", 1000.0, kNow);
    snapshot.now = kNow;
    snapshot.pool = &pool;
    snapshot.site = &site;
    snapshot.usage = &usage;
  }
  SitePolicy site;
  UsageLedger usage;
  resource::NodePool pool;
  Snapshot snapshot;
};

TEST(Multifactor, FactorsByHand) {
  World w;
  PendingJob j = job(1, 2, days_ago(3.5), 8);
  j.queue = "batch";
  j.qos = "high";
  const FairShareTree tree = FairShareTree::compute(&w.site, &w.usage, kNow, {});
  const MultifactorPriority calc(w.snapshot, MultifactorWeights{}, &tree);
  const MultifactorFactors f = calc.factors(j);
  EXPECT_DOUBLE_EQ(f.age, 0.5);                    // 3.5 of 7 days
  EXPECT_DOUBLE_EQ(f.size, 0.25);                  // 8 of 32 cores
  EXPECT_DOUBLE_EQ(f.fairshare, std::exp2(-0.2));  // U 0.1, S 0.5
  EXPECT_DOUBLE_EQ(f.queue, 0.25);                 // 10 of 40
  EXPECT_DOUBLE_EQ(f.qos, 1.0);
  // Defaults: age 1000, size 0, fairshare 10000, queue 1000, qos 1000.
  const double expected = 1000 * 0.5 + 10000 * std::exp2(-0.2) + 1000 * 0.25 + 1000 * 1.0;
  EXPECT_DOUBLE_EQ(calc.priority(j), expected);
  j.priority = 7;
  EXPECT_DOUBLE_EQ(calc.priority(j), expected + 7);
  EXPECT_DOUBLE_EQ(multifactor_priority(j, w.snapshot, MultifactorWeights{}, &tree), expected + 7);

  MultifactorWeights small;
  small.favor_small = true;
  small.max_age_s = kDay;
  const MultifactorPriority favor(w.snapshot, small, &tree);
  EXPECT_DOUBLE_EQ(favor.factors(j).size, 0.75);
  EXPECT_DOUBLE_EQ(favor.factors(j).age, 1.0);  // capped at max_age
  // No queue, no QOS: both factors 0; the default queue is the first.
  PendingJob plain = job(2, 2, kNow);
  EXPECT_DOUBLE_EQ(calc.factors(plain).qos, 0.0);
  EXPECT_DOUBLE_EQ(calc.factors(plain).queue, 0.25);
  Snapshot bare;
  bare.now = kNow;
  EXPECT_DOUBLE_EQ(MultifactorPriority(bare, MultifactorWeights{}, nullptr).factors(plain).queue,
                   0.0);
}

TEST(PriorityPlugin, EachWeightDecidesTheOrder) {
  World w;
  // Job 10: user 1 (heavy usage), submitted 6 days ago, 1 core, urgent queue.
  // Job 20: user 2 (light usage), submitted 1 day ago, 16 cores, high QOS.
  PendingJob old_heavy = job(10, 1, days_ago(6), 1);
  old_heavy.queue = "urgent";
  PendingJob new_light = job(20, 2, days_ago(1), 16);
  new_light.queue = "batch";
  new_light.qos = "high";
  w.snapshot.queue = {old_heavy, new_light};

  PriorityPlugin age(only(&MultifactorWeights::age));
  EXPECT_EQ(order(age, w.snapshot), (std::vector<JobId>{10, 20}));
  PriorityPlugin fairshare(only(&MultifactorWeights::fairshare));
  EXPECT_EQ(order(fairshare, w.snapshot), (std::vector<JobId>{20, 10}));
  PriorityPlugin size(only(&MultifactorWeights::size));
  EXPECT_EQ(order(size, w.snapshot), (std::vector<JobId>{20, 10}));
  MultifactorWeights small = only(&MultifactorWeights::size);
  small.favor_small = true;
  PriorityPlugin favor_small(small);
  EXPECT_EQ(order(favor_small, w.snapshot), (std::vector<JobId>{10, 20}));
  PriorityPlugin queue(only(&MultifactorWeights::queue));
  EXPECT_EQ(order(queue, w.snapshot), (std::vector<JobId>{10, 20}));
  PriorityPlugin qos(only(&MultifactorWeights::qos));
  EXPECT_EQ(order(qos, w.snapshot), (std::vector<JobId>{20, 10}));
  // Defaults: fair-share (10000) outweighs age (1000).
  PriorityPlugin defaults(MultifactorWeights{});
  EXPECT_EQ(order(defaults, w.snapshot), (std::vector<JobId>{20, 10}));
}

TEST(PriorityPlugin, UsageChangesTheOrder) {
  World w;
  w.snapshot.queue = {job(10, 1, kNow), job(20, 2, kNow)};
  PriorityPlugin plugin(MultifactorWeights{});
  EXPECT_EQ(order(plugin, w.snapshot), (std::vector<JobId>{20, 10}));
  UsageLedger swapped(kDay);
  swapped.charge(1, "heavy", 1000.0, kNow);
  swapped.charge(2, "light", 9000.0, kNow);
  w.snapshot.usage = &swapped;
  EXPECT_EQ(order(plugin, w.snapshot), (std::vector<JobId>{10, 20}));
}

TEST(PriorityPlugin, NiceOffsetAndTies) {
  World w;
  w.snapshot.usage = nullptr;
  // Same factors: ties fall to submit time, then id.
  w.snapshot.queue = {job(3, 1, kNow), job(2, 1, kNow), job(1, 1, kNow - 1)};
  PriorityPlugin plugin(MultifactorWeights{});
  EXPECT_EQ(order(plugin, w.snapshot), (std::vector<JobId>{1, 2, 3}));
  w.snapshot.queue[0].priority = 1;
  EXPECT_EQ(order(plugin, w.snapshot), (std::vector<JobId>{3, 1, 2}));
}

TEST(PriorityPlugin, StartsTheHigherPriorityJobThroughTheScheduler) {
  World w;
  const resource::NodePool one = pool_of(1, 8);
  w.snapshot.pool = &one;
  // Both want the whole node; the older job of the heavy user is first in
  // submit order, the light user's job is first in fair-share.
  w.snapshot.queue = {job(10, 1, days_ago(1), 8), job(20, 2, kNow, 8)};
  auto fcfs = Scheduler::create({{"allocate"}, {"fcfs"}});
  auto prio = Scheduler::create({{"allocate"}, {"priority"}});
  ASSERT_TRUE(fcfs.is_ok() && prio.is_ok());
  const Decisions by_fcfs = fcfs->cycle(w.snapshot);
  const Decisions by_prio = prio->cycle(w.snapshot);
  ASSERT_EQ(by_fcfs.decisions.size(), 1u);
  ASSERT_EQ(by_prio.decisions.size(), 1u);
  EXPECT_EQ(std::get<Start>(by_fcfs.decisions[0]).job, 10u);
  EXPECT_EQ(std::get<Start>(by_prio.decisions[0]).job, 20u);
}

TEST(PriorityPlugin, ParsesOptions) {
  auto w = parse_multifactor_options({{"weight_age", "5"},
                                      {"weight_size", "6"},
                                      {"weight_fairshare", "0"},
                                      {"weight_queue", "8"},
                                      {"weight_qos", "9"},
                                      {"max_age", "2d"},
                                      {"favor_small", "true"}});
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  EXPECT_EQ(w->age, 5u);
  EXPECT_EQ(w->size, 6u);
  EXPECT_EQ(w->fairshare, 0u);
  EXPECT_EQ(w->queue, 8u);
  EXPECT_EQ(w->qos, 9u);
  EXPECT_EQ(w->max_age_s, 2 * kDay);
  EXPECT_TRUE(w->favor_small);
  EXPECT_EQ(parse_multifactor_options({{"max_age", "90"}})->max_age_s, 90);
  EXPECT_EQ(parse_multifactor_options({{"max_age", "3h"}})->max_age_s, 3 * 3600);
  const MultifactorWeights defaults = *parse_multifactor_options({});
  EXPECT_EQ(defaults.age, 1000u);
  EXPECT_EQ(defaults.fairshare, 10000u);
  EXPECT_EQ(defaults.max_age_s, 7 * kDay);
}

TEST(PriorityPlugin, RejectsBadOptionsByName) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"weight_age", "-1"},    {"weight_size", "x"},   {"weight_fairshare", ""},
      {"weight_queue", "1.5"}, {"weight_qos", "1e3"},  {"max_age", "0"},
      {"max_age", "7w"},       {"favor_small", "yes"}, {"weight", "1"}};
  for (const auto& [name, value] : bad) {
    const auto s = Scheduler::create({{"allocate"}, {"priority"}, {{"priority." + name, value}}});
    ASSERT_FALSE(s.is_ok()) << name << "=" << value;
    EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
    EXPECT_NE(s.status().message().find("priority." + name), std::string::npos)
        << s.status().message();
  }
  EXPECT_TRUE(
      Scheduler::create({{"allocate"}, {"priority"}, {{"priority.weight_age", "0"}}}).is_ok());
}

TEST(FairSharePlugin, OrdersByFairShareAlone) {
  World w;
  // The heavy user's job is older and in the urgent queue: only fair-share
  // puts the light user's job first.
  PendingJob heavy = job(10, 1, days_ago(6));
  heavy.queue = "urgent";
  w.snapshot.queue = {heavy, job(20, 2, kNow)};
  FairSharePlugin plugin;
  EXPECT_EQ(order(plugin, w.snapshot), (std::vector<JobId>{20, 10}));
  w.snapshot.usage = nullptr;  // equal factors: submit order
  EXPECT_EQ(order(plugin, w.snapshot), (std::vector<JobId>{10, 20}));
  const auto s = Scheduler::create({{"allocate"}, {"fairshare"}, {{"fairshare.x", "1"}}});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("fairshare.x"), std::string::npos);
}

TEST(PriorityPlugin, TenThousandJobsOrderInTensOfMilliseconds) {
  World w;
  SitePolicy site = w.site;
  for (int a = 0; a < 50; ++a) site.accounts.push_back({"acct" + std::to_string(a), "", 1.0 + a});
  for (std::uint32_t u = 100; u < 1100; ++u) {
    site.users.push_back({u, "acct" + std::to_string(u % 50), 1.0});
    w.usage.charge(u, "", static_cast<double>(u % 97) * 100.0, kNow);
  }
  w.snapshot.site = &site;
  for (JobId id = 1; id <= 10000; ++id) {
    PendingJob j = job(id, static_cast<std::uint32_t>(100 + id % 1000),
                       kNow - static_cast<TimeUs>((id * 7919) % 100000) * kUsPerSecond,
                       static_cast<int>(1 + id % 16));
    j.queue = id % 3 == 0 ? "urgent" : "batch";
    w.snapshot.queue.push_back(j);
  }
  PriorityPlugin plugin(MultifactorWeights{});
  const auto start = std::chrono::steady_clock::now();
  const std::vector<JobId> ids = order(plugin, w.snapshot);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  ASSERT_EQ(ids.size(), 10000u);
  // Non-increasing priority along the order.
  const FairShareTree tree = FairShareTree::compute(w.snapshot);
  const MultifactorPriority calc(w.snapshot, MultifactorWeights{}, &tree);
  std::vector<double> by_id(10001);
  for (const PendingJob& j : w.snapshot.queue) by_id[j.id] = calc.priority(j);
  for (std::size_t i = 1; i < ids.size(); ++i) EXPECT_GE(by_id[ids[i - 1]], by_id[ids[i]]);
  // Tens of ms in an optimised build; generous for sanitizer and debug builds.
  EXPECT_LT(ms, 1000) << "ordering 10,000 jobs took " << ms << " ms";
  std::printf("priority: ordered 10,000 jobs in %lld ms\n", static_cast<long long>(ms));
}

}  // namespace
}  // namespace hpcq::sched
