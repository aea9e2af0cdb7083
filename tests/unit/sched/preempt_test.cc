// Action "preempt".
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/resource/hwloc_import.h"
#include "lib/sched/actions/preempt.h"
#include "lib/sched/scheduler.h"
#include "lib/sched/session.h"
#include "tests/unit/sched/fixtures.h"

namespace hpcq::sched {
namespace {

using namespace fixture;  // make_pool, pending, running, started, preempted, run

// Queues "low" (tier 0) and "high" (tier 1), both preemptible by mode.
SitePolicy tiers(PreemptMode low_mode = PreemptMode::kRequeue) {
  SitePolicy site;
  QueueConfig low;
  low.name = "low";
  low.preempt_mode = low_mode;
  QueueConfig high;
  high.name = "high";
  high.priority_tier = 1;
  high.preempt_mode = PreemptMode::kCancel;
  site.queues = {low, high};
  return site;
}

std::vector<JobId> reserved(const Decisions& d) {
  std::vector<JobId> out;
  for (const Decision& x : d.decisions) {
    if (const Reserve* r = std::get_if<Reserve>(&x)) out.push_back(r->job);
  }
  return out;
}

using Pairs = std::vector<std::pair<JobId, JobId>>;

TEST(PreemptTest, ByQueueTierTakesTheYoungestWholeJob) {
  resource::NodePool pool = make_pool(2);
  SitePolicy site = tiers();
  Snapshot snap;
  snap.now = 1000;
  snap.pool = &pool;
  snap.site = &site;
  snap.running.push_back(running(pool, 100, {1}, {0, 1, 2, 3}, "low", 10));
  snap.running.push_back(running(pool, 101, {2}, {0, 1, 2, 3}, "low", 20));
  snap.queue.push_back(pending(1, 4, "high"));
  snap.queue[0].submit_time = 100;  // after the running jobs
  EXPECT_TRUE(preempted(run(snap, {"allocate"}, {"fcfs"})).empty());
  const Decisions d = run(snap, {"allocate", "preempt"}, {"fcfs"});
  EXPECT_EQ(preempted(d), (Pairs{{101, 1}}));
  EXPECT_EQ(reserved(d), (std::vector<JobId>{1}));
  EXPECT_EQ(std::get<Preempt>(d.decisions[0]).mode, PreemptMode::kRequeue);
  EXPECT_EQ(std::get<Reserve>(d.decisions[1]).time, 1000);
  // A job of the same tier preempts nobody (fcfs: the running jobs are older).
  snap.queue[0].queue = "low";
  EXPECT_TRUE(preempted(run(snap, {"allocate", "preempt"}, {"fcfs"})).empty());
}

TEST(PreemptTest, ModeOffAndJobsThatWouldNotFitAnywayPreemptNothing) {
  resource::NodePool pool = make_pool(2);
  SitePolicy off = tiers(PreemptMode::kOff);
  SitePolicy on = tiers();
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &off;
  snap.running.push_back(running(pool, 100, {1}, {0, 1, 2, 3}, "low", 10));
  snap.running.push_back(running(pool, 101, {2}, {0, 1, 2, 3}, "high", 20));
  snap.queue.push_back(pending(1, 4, "high"));
  snap.queue[0].submit_time = 100;  // after the running jobs
  EXPECT_TRUE(preempted(run(snap, {"preempt"}, {"fcfs"})).empty());
  snap.site = &on;
  // Needs both nodes, but the other one runs a job of its own tier: even
  // with every candidate gone it would not fit, so nobody is stopped.
  snap.queue[0].request.ntasks = 8;
  EXPECT_TRUE(preempted(run(snap, {"preempt"}, {"fcfs"})).empty());
  // More than the cluster has: never.
  snap.queue[0].request.ntasks = 9;
  EXPECT_TRUE(preempted(run(snap, {"preempt"}, {"fcfs"})).empty());
  snap.queue[0].request.ntasks = 4;
  EXPECT_EQ(preempted(run(snap, {"preempt"}, {"fcfs"})), (Pairs{{100, 1}}));
}

TEST(PreemptTest, FewestVictimsAndAGangGoesWhole) {
  resource::NodePool pool = make_pool(3);
  SitePolicy site = tiers();
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  // n1: one 4-core job; n2: three small young ones + one core of "high".
  snap.running.push_back(running(pool, 100, {1}, {0, 1, 2, 3}, "low", 10));
  snap.running.push_back(running(pool, 101, {2}, {0}, "low", 20));
  snap.running.push_back(running(pool, 102, {2}, {1}, "low", 30));
  snap.running.push_back(running(pool, 103, {2}, {2}, "low", 40));
  snap.running.push_back(running(pool, 104, {2}, {3}, "high", 0));
  // n3: a job of "high", so that only n1 or n2 can make room.
  snap.running.push_back(running(pool, 105, {3}, {0, 1, 2, 3}, "high", 0));
  PendingJob job = pending(1, 4, "high");
  job.request.nodes = 1;
  snap.queue.push_back(job);
  // The three small ones are youngest and tried first, but cannot make room
  // on n2; the big one alone can, and the small ones are given back.
  EXPECT_EQ(preempted(run(snap, {"preempt"}, {"fcfs"})), (Pairs{{100, 1}}));

  // A gang over n1 and n2 (2 cores each) is stopped whole for a 2-core job.
  resource::NodePool pool2 = make_pool(2);
  Snapshot gang;
  gang.pool = &pool2;
  gang.site = &site;
  gang.running.push_back(running(pool2, 200, {1, 2}, {0, 1}, "low", 10));
  gang.running.push_back(running(pool2, 201, {1, 2}, {2, 3}, "high", 10));
  gang.queue.push_back(pending(1, 2, "high"));
  const Decisions d = run(gang, {"preempt"}, {"fcfs"});
  EXPECT_EQ(preempted(d), (Pairs{{200, 1}}));
}

TEST(PreemptTest, ByPriorityWithinAQueue) {
  resource::NodePool pool = make_pool(1);
  SitePolicy site = tiers();
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  RunningJob low = running(pool, 100, {1}, {0, 1}, "low", 10);
  low.priority = 1;
  RunningJob mid = running(pool, 101, {1}, {2, 3}, "low", 5);
  mid.priority = 5;
  snap.running = {low, mid};
  PendingJob job = pending(1, 2, "low");
  job.priority = 3;
  snap.queue.push_back(job);
  auto by_priority = [](Session& session) {
    session.add_job_order("prio", [](const PendingJob& a, const PendingJob& b) {
      return a.priority == b.priority ? 0 : (a.priority > b.priority ? -1 : 1);
    });
  };
  {
    Session session(snap);
    PreemptAction().execute(session);
    EXPECT_TRUE(preempted(session.take_decisions()).empty());  // no order: nobody is lower
  }
  {
    Session session(snap);
    by_priority(session);
    PreemptAction().execute(session);
    EXPECT_EQ(preempted(session.take_decisions()), (Pairs{{100, 1}}));
  }
  {
    Session session(snap);
    by_priority(session);
    PreemptAction({.max_preemptors = 8, .by_priority = false}).execute(session);
    EXPECT_TRUE(preempted(session.take_decisions()).empty());
  }
}

TEST(PreemptTest, ByQos) {
  resource::NodePool pool = make_pool(1);
  SitePolicy site = tiers();
  site.qos = {{"normal", 0, {}}, {"urgent", 10, {"normal"}}};
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  RunningJob r = running(pool, 100, {1}, {0, 1, 2, 3}, "low", 10);
  r.qos = "normal";
  snap.running = {r};
  PendingJob job = pending(1, 4, "low");
  snap.queue.push_back(job);
  const std::map<std::string, std::string> no_prio = {{"preempt.by_priority", "false"}};
  EXPECT_TRUE(preempted(run(snap, {"preempt"}, {"fcfs"}, no_prio)).empty());
  snap.queue[0].qos = "urgent";
  EXPECT_EQ(preempted(run(snap, {"preempt"}, {"fcfs"}, no_prio)), (Pairs{{100, 1}}));
}

TEST(PreemptTest, AVictimOnceAndPromisedCoresNotCountedTwice) {
  resource::NodePool pool = make_pool(2);
  SitePolicy site = tiers();
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  // n1: two one-core low jobs and two free cores; n2: full with an older
  // high job (not a victim: it is ahead of the pending jobs in FCFS order).
  snap.running.push_back(running(pool, 100, {1}, {0}, "low", 10));
  snap.running.push_back(running(pool, 101, {1}, {1}, "low", 10));
  snap.running.push_back(running(pool, 102, {2}, {0, 1, 2, 3}, "high", 0));
  PendingJob first = pending(1, 3, "high");
  first.request.nodes = 1;
  PendingJob second = first;
  second.id = 2;
  second.submit_time = 2;
  snap.queue = {first, second};
  const Decisions d = run(snap, {"preempt"}, {"fcfs"});
  // Job 1 takes job 101's core and the two free ones. Job 2 would fit with
  // job 100 gone only by counting those free cores again: it gets nothing.
  EXPECT_EQ(preempted(d), (Pairs{{101, 1}}));
  EXPECT_EQ(reserved(d), (std::vector<JobId>{1}));
  // A victim is stopped once: preempt run twice in a cycle adds nothing.
  EXPECT_EQ(preempted(run(snap, {"preempt", "reclaim"}, {"fcfs", "proportion"})),
            (Pairs{{101, 1}}));
}

TEST(PreemptTest, ReservationsStillApply) {
  resource::NodePool pool = make_pool(1);
  SitePolicy site = tiers();
  Snapshot snap;
  snap.now = 1000 * kUsPerSecond;
  snap.pool = &pool;
  snap.site = &site;
  snap.running.push_back(running(pool, 100, {1}, {0, 1, 2, 3}, "low", 10));
  snap.queue.push_back(pending(1, 4, "high", 1, 3600));
  EXPECT_EQ(preempted(run(snap, {"preempt"}, {"fcfs"})), (Pairs{{100, 1}}));
  // n1 is reserved for somebody else from in ten minutes: the job could not
  // run there even with the victim gone.
  snap.reservations.push_back(
      {"maint", {1}, snap.now + 600 * kUsPerSecond, snap.now + 7200 * kUsPerSecond, {99}, {}});
  EXPECT_TRUE(preempted(run(snap, {"preempt"}, {"fcfs"})).empty());
}

TEST(PreemptTest, Options) {
  EXPECT_TRUE(PreemptAction::create({{"max_preemptors", "2"}, {"by_priority", "false"}}).is_ok());
  EXPECT_EQ(PreemptAction::create({{"max_preemptors", "0"}}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(PreemptAction::create({{"by_priority", "yes"}}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(PreemptAction::create({{"depth", "1"}}).status().code(), Code::kInvalidArgument);
}

TEST(PreemptTest, MaxPreemptorsBoundsTheWork) {
  resource::NodePool pool = make_pool(2);
  SitePolicy site = tiers();
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  snap.running.push_back(running(pool, 100, {1}, {0, 1, 2, 3}, "low", 10));
  snap.running.push_back(running(pool, 101, {2}, {0, 1, 2, 3}, "low", 20));
  snap.queue.push_back(pending(1, 4, "high"));
  snap.queue.push_back(pending(2, 4, "high"));
  EXPECT_EQ(preempted(run(snap, {"preempt"}, {"fcfs"})).size(), 2u);
  EXPECT_EQ(preempted(run(snap, {"preempt"}, {"fcfs"}, {{"preempt.max_preemptors", "1"}})),
            (Pairs{{101, 1}}));
}

}  // namespace
}  // namespace hpcq::sched
