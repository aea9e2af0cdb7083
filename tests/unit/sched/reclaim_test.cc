// Action "reclaim".
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/resource/hwloc_import.h"
#include "lib/sched/scheduler.h"
#include "lib/sched/session.h"
#include "lib/sched/actions/reclaim.h"

namespace hpcq::sched {
namespace {

// A pool of `nodes` nodes of 4 cores (ranks 1..nodes).
[[maybe_unused]] resource::NodePool make_pool(int nodes) {
  resource::NodePool pool;
  auto t = resource::discover_topology("core:4 pu:1");
  EXPECT_TRUE(t.is_ok());
  for (int r = 1; r <= nodes; ++r) {
    EXPECT_TRUE(pool.add_node(static_cast<Rank>(r), "n" + std::to_string(r), *t).is_ok());
  }
  return pool;
}

[[maybe_unused]] PendingJob pending(JobId id, int ntasks, std::string queue = "", std::uint32_t uid = 1,
                   std::int64_t time_limit_s = 3600) {
  PendingJob j;
  j.id = id;
  j.uid = uid;
  j.submit_time = static_cast<TimeUs>(id);
  j.request.ntasks = ntasks;
  j.time_limit_s = time_limit_s;
  j.queue = std::move(queue);
  return j;
}

// A running job on `cores` of each of `ranks`, taken from `pool`.
[[maybe_unused]] RunningJob running(resource::NodePool& pool, JobId id, std::vector<Rank> ranks,
                   std::vector<int> cores, std::string queue, TimeUs start,
                   std::uint32_t uid = 1) {
  RunningJob r;
  r.id = id;
  r.uid = uid;
  r.submit_time = start;
  r.start_time = start;
  r.end_estimate = start + 3600 * kUsPerSecond;
  r.time_limit_s = 3600;
  r.queue = std::move(queue);
  r.request.ntasks = static_cast<int>(ranks.size() * cores.size());
  r.request.nodes = static_cast<int>(ranks.size());
  int first = 0;
  for (Rank rank : ranks) {
    resource::NodeAllocation part;
    part.rank = rank;
    part.node = "n" + std::to_string(rank);
    part.cores = cores;
    part.numa = {0};
    part.ntasks = static_cast<int>(cores.size());
    part.first_task = first;
    first += part.ntasks;
    r.allocation.nodes.push_back(part);
  }
  EXPECT_TRUE(pool.allocate(r.allocation).is_ok());
  return r;
}

[[maybe_unused]] std::vector<JobId> started(const Decisions& d) {
  std::vector<JobId> out;
  for (const Decision& x : d.decisions) {
    if (const Start* s = std::get_if<Start>(&x)) out.push_back(s->job);
  }
  return out;
}

[[maybe_unused]] std::vector<std::pair<JobId, JobId>> preempted(const Decisions& d) {
  std::vector<std::pair<JobId, JobId>> out;
  for (const Decision& x : d.decisions) {
    if (const Preempt* p = std::get_if<Preempt>(&x)) out.emplace_back(p->job, p->for_job);
  }
  return out;
}

[[maybe_unused]] Decisions run(const Snapshot& snap, std::vector<std::string> actions,
              std::vector<std::string> plugins, std::map<std::string, std::string> options = {}) {
  auto s = Scheduler::create({std::move(actions), std::move(plugins), std::move(options)});
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s->cycle(snap);
}

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
