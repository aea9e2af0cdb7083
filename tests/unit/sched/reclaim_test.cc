// Action "reclaim".
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/resource/hwloc_import.h"
#include "lib/sched/actions/reclaim.h"
#include "lib/sched/scheduler.h"
#include "lib/sched/session.h"
#include "tests/unit/sched/fixtures.h"

namespace hpcq::sched {
namespace {

using namespace fixture;  // make_pool, pending, running, started, preempted, run

SitePolicy two_queues(PreemptMode mode_a = PreemptMode::kRequeue) {
  SitePolicy site;
  QueueConfig a;
  a.name = "a";
  a.preempt_mode = mode_a;
  QueueConfig b;
  b.name = "b";
  b.preempt_mode = PreemptMode::kRequeue;
  site.queues = {a, b};
  return site;
}

using Pairs = std::vector<std::pair<JobId, JobId>>;

TEST(ReclaimTest, AQueueBelowItsShareTakesBackFromOneAbove) {
  resource::NodePool pool = make_pool(2);
  SitePolicy site = two_queues();
  Snapshot snap;
  snap.now = 5000;
  snap.pool = &pool;
  snap.site = &site;
  // a took the whole cluster while b was idle.
  snap.running.push_back(running(pool, 100, {1}, {0, 1, 2, 3}, "a", 10));
  snap.running.push_back(running(pool, 101, {2}, {0, 1}, "a", 30));
  snap.running.push_back(running(pool, 102, {2}, {2, 3}, "a", 20));
  snap.queue.push_back(pending(1, 4, "b"));
  // Without the proportion plugin there are no shares to reclaim.
  EXPECT_TRUE(preempted(run(snap, {"allocate", "reclaim"}, {"fcfs"})).empty());
  // b deserves 4 of 8 now: the youngest jobs of a go, as many as needed.
  const Decisions d = run(snap, {"allocate", "reclaim"}, {"proportion", "fcfs"});
  EXPECT_EQ(preempted(d), (Pairs{{101, 1}, {102, 1}}));
  ASSERT_EQ(d.decisions.size(), 3u);
  EXPECT_EQ(std::get<Reserve>(d.decisions[2]).time, 5000);
}

TEST(ReclaimTest, NothingFromAQueueThatIsNotPreemptibleOrNotAboveItsShare) {
  resource::NodePool pool = make_pool(2);
  SitePolicy off = two_queues(PreemptMode::kOff);
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &off;
  snap.running.push_back(running(pool, 100, {1}, {0, 1, 2, 3}, "a", 10));
  snap.running.push_back(running(pool, 101, {2}, {0, 1, 2, 3}, "a", 20));
  snap.queue.push_back(pending(1, 4, "b"));
  EXPECT_TRUE(preempted(run(snap, {"reclaim"}, {"proportion", "fcfs"})).empty());

  // a holds exactly its share, b the rest: b's extra job is above b's share
  // and may take nothing.
  resource::NodePool pool2 = make_pool(2);
  SitePolicy on = two_queues();
  Snapshot fair;
  fair.pool = &pool2;
  fair.site = &on;
  fair.running.push_back(running(pool2, 100, {1}, {0, 1, 2, 3}, "a", 10));
  fair.running.push_back(running(pool2, 101, {2}, {0, 1, 2, 3}, "b", 20));
  fair.queue.push_back(pending(1, 2, "b"));
  fair.queue.push_back(pending(2, 2, "a"));
  EXPECT_TRUE(preempted(run(fair, {"reclaim"}, {"proportion", "fcfs"})).empty());
}

TEST(ReclaimTest, AVictimQueueGivesOnlyWhileAboveItsShare) {
  resource::NodePool pool = make_pool(3);  // 12 cores
  SitePolicy site = two_queues();
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  // a runs 10 cores, b 2 and asks for 8 more: each deserves 6.
  snap.running.push_back(running(pool, 100, {1}, {0, 1, 2, 3}, "a", 10));
  snap.running.push_back(running(pool, 101, {2}, {0, 1, 2, 3}, "a", 20));
  snap.running.push_back(running(pool, 102, {3}, {0, 1}, "a", 30));
  snap.running.push_back(running(pool, 103, {3}, {2, 3}, "b", 0));
  PendingJob one = pending(1, 4, "b");
  one.request.nodes = 1;
  PendingJob two = one;
  two.id = 2;
  two.submit_time = 2;
  snap.queue = {one, two};
  const Decisions d = run(snap, {"reclaim"}, {"proportion", "fcfs"});
  // Job 1: 102 (youngest) frees only half of n3, 101 frees n2; 102 is given
  // back as not needed. a is then at its 6: job 2 may take nothing more,
  // though stopping job 100 would make room for it.
  EXPECT_EQ(preempted(d), (Pairs{{101, 1}}));
}

TEST(ReclaimTest, Options) {
  EXPECT_TRUE(ReclaimAction::create({{"max_reclaimers", "3"}}).is_ok());
  EXPECT_EQ(ReclaimAction::create({{"max_reclaimers", "x"}}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(ReclaimAction::create({{"other", "1"}}).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace hpcq::sched
