// Plugin "proportion".
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <algorithm>
#include "lib/resource/hwloc_import.h"
#include "lib/sched/scheduler.h"
#include "lib/sched/session.h"

#include "lib/sched/plugins/proportion.h"
#include "tests/unit/sched/fixtures.h"

namespace hpcq::sched {
namespace {

using namespace fixture;  // make_pool, pending, running, started, preempted, run

SitePolicy two_queues(double weight_a = 1, double weight_b = 1) {
  SitePolicy site;
  QueueConfig a;
  a.name = "a";
  a.weight = weight_a;
  a.preempt_mode = PreemptMode::kRequeue;
  QueueConfig b = a;
  b.name = "b";
  b.weight = weight_b;
  site.queues = {a, b};
  return site;
}

TEST(ProportionTest, WaterFillingCapsAtRequestAndRedistributes) {
  std::vector<QueueShare> shares = {{"x", 1, 0, 0, 2, 0},
                                    {"y", 1, 0, 0, 100, 0},
                                    {"z", 2, 0, 0, 100, 0},
                                    {"idle", 5, 0, 0, 0, 0}};
  fill_deserved(shares, 12);
  EXPECT_DOUBLE_EQ(shares[0].deserved, 2);  // capped by its request
  // The idle queue's weight claims nothing; x's surplus goes 1:2 to y and z.
  EXPECT_NEAR(shares[1].deserved, 10.0 / 3, 1e-9);
  EXPECT_NEAR(shares[2].deserved, 20.0 / 3, 1e-9);
  EXPECT_DOUBLE_EQ(shares[3].deserved, 0);
  // Everyone satisfied: each gets its request and the rest stays idle.
  std::vector<QueueShare> small = {{"x", 1, 0, 0, 3, 0}, {"y", 3, 0, 0, 1, 0}};
  fill_deserved(small, 12);
  EXPECT_DOUBLE_EQ(small[0].deserved, 3);
  EXPECT_DOUBLE_EQ(small[1].deserved, 1);
}

TEST(ProportionTest, QueuesGetTheirWeightedShare) {
  resource::NodePool pool = make_pool(2);  // 8 cores
  SitePolicy site = two_queues(1, 3);
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  // Queue a submitted first, then b: FCFS alone gives a everything.
  for (JobId id = 1; id <= 8; ++id) snap.queue.push_back(pending(id, 1, "a"));
  for (JobId id = 11; id <= 18; ++id) snap.queue.push_back(pending(id, 1, "b"));
  EXPECT_EQ(started(run(snap, {"allocate"}, {"fcfs"})),
            (std::vector<JobId>{1, 2, 3, 4, 5, 6, 7, 8}));
  // a deserves 2 cores, b 6.
  std::vector<JobId> got = started(run(snap, {"allocate"}, {"proportion", "fcfs"}));
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<JobId>{1, 2, 11, 12, 13, 14, 15, 16}));
}

TEST(ProportionTest, IdleShareIsTakenWhenNobodyElseWaits) {
  resource::NodePool pool = make_pool(2);
  SitePolicy site = two_queues();
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  // b runs 1 core and wants nothing more; a may take all 7 others, above
  // the 4 its weight alone would give it.
  snap.running.push_back(running(pool, 100, {2}, {3}, "b", 0));
  for (JobId id = 1; id <= 8; ++id) snap.queue.push_back(pending(id, 1, "a"));
  EXPECT_EQ(started(run(snap, {"allocate"}, {"proportion", "fcfs"})).size(), 7u);
  {
    Session session(snap);
    ProportionPlugin plugin;
    plugin.on_session_open(session);
    const QueueShare* a = session.queue_share("a");
    ASSERT_NE(a, nullptr);
    EXPECT_DOUBLE_EQ(a->deserved, 7);  // the water-filling gave it b's idle share
  }
  // Now b waits for 3 more cores: a is held to its 4 (b deserves 4).
  for (JobId id = 21; id <= 23; ++id) snap.queue.push_back(pending(id, 1, "b"));
  std::vector<JobId> got = started(run(snap, {"allocate"}, {"proportion", "fcfs"}));
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<JobId>{1, 2, 3, 4, 21, 22, 23}));
}

TEST(ProportionTest, JobReadyFollowsInCycleAllocations) {
  resource::NodePool pool = make_pool(2);
  SitePolicy site = two_queues();
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  snap.queue.push_back(pending(1, 4, "a"));
  snap.queue.push_back(pending(2, 1, "a"));
  snap.queue.push_back(pending(3, 4, "b"));
  snap.queue.push_back(pending(4, 1, "nosuch"));
  Session session(snap);
  ProportionPlugin plugin;
  plugin.on_session_open(session);
  EXPECT_TRUE(session.job_ready(snap.queue[1]));
  EXPECT_FALSE(session.job_ready(snap.queue[3]));  // unknown queue
  Statement st = session.statement();
  ASSERT_TRUE(st.allocate(snap.queue[0], *session.place(snap.queue[0])).is_ok());
  EXPECT_DOUBLE_EQ(session.queue_share("a")->allocated, 4);
  // a holds its 4 and b still waits: one more core of a is over its share.
  EXPECT_FALSE(session.job_ready(snap.queue[1]));
  st.discard();
  EXPECT_DOUBLE_EQ(session.queue_share("a")->allocated, 0);
  EXPECT_TRUE(session.job_ready(snap.queue[1]));
}

TEST(ProportionTest, QueueOrderLeastServedFirst) {
  resource::NodePool pool = make_pool(2);
  SitePolicy site = two_queues();
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  snap.running.push_back(running(pool, 100, {1}, {0, 1, 2}, "a", 0));
  snap.queue.push_back(pending(1, 1, "a"));
  snap.queue.push_back(pending(2, 1, "b"));
  snap.queue.push_back(pending(3, 1, "a"));
  snap.queue.push_back(pending(4, 1, "b"));
  Session session(snap);
  ProportionPlugin plugin;
  plugin.on_session_open(session);
  std::vector<JobId> order;
  for (const PendingJob* j : session.ordered_queue()) order.push_back(j->id);
  EXPECT_EQ(order, (std::vector<JobId>{2, 4, 1, 3}));
}

TEST(ProportionTest, NoSitePolicyNoEffect) {
  resource::NodePool pool = make_pool(1);
  Snapshot snap;
  snap.pool = &pool;
  for (JobId id = 1; id <= 4; ++id) snap.queue.push_back(pending(id, 1));
  EXPECT_EQ(started(run(snap, {"enqueue", "allocate"}, {"proportion", "fcfs"})).size(), 4u);
}

}  // namespace
}  // namespace hpcq::sched
