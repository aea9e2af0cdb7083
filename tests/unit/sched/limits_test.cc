// Plugin "limits" and action "enqueue".
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/resource/hwloc_import.h"
#include "lib/sched/scheduler.h"
#include "lib/sched/session.h"
#include "lib/sched/actions/enqueue.h"
#include "lib/sched/plugins/limits.h"

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

SitePolicy one_queue(QueueLimits limits) {
  SitePolicy site;
  QueueConfig q;
  q.name = "batch";
  q.limits = limits;
  site.queues.push_back(q);
  QueueConfig other;
  other.name = "other";
  site.queues.push_back(other);
  return site;
}

TEST(LimitsTest, MaxRunningJobsPerQueueCountsRunningAndThisCycle) {
  resource::NodePool pool = make_pool(4);
  SitePolicy site = one_queue({.max_running_jobs = 3});
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  snap.running.push_back(running(pool, 100, {1}, {0}, "batch", 0));
  for (JobId id = 1; id <= 4; ++id) snap.queue.push_back(pending(id, 1, "batch"));
  snap.queue.push_back(pending(5, 1, "other"));
  // Without the plugin everything starts.
  EXPECT_EQ(started(run(snap, {"allocate"}, {"fcfs"})), (std::vector<JobId>{1, 2, 3, 4, 5}));
  // One running + two started this cycle = 3; job 3 and 4 wait, and do not
  // block job 5 of another queue.
  EXPECT_EQ(started(run(snap, {"allocate"}, {"fcfs", "limits"})), (std::vector<JobId>{1, 2, 5}));
}

TEST(LimitsTest, PerUserCoresAndJobs) {
  resource::NodePool pool = make_pool(4);
  SitePolicy site = one_queue({.max_running_jobs_per_user = 2, .max_cores_per_user = 6});
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  snap.queue.push_back(pending(1, 4, "batch", /*uid=*/7));
  snap.queue.push_back(pending(2, 4, "batch", 7));  // 8 cores for uid 7: over
  snap.queue.push_back(pending(3, 2, "batch", 7));  // 6 cores: fits
  snap.queue.push_back(pending(4, 1, "batch", 7));  // a third job: over
  snap.queue.push_back(pending(5, 4, "batch", 8));  // another user
  EXPECT_EQ(started(run(snap, {"allocate"}, {"fcfs", "limits"})), (std::vector<JobId>{1, 3, 5}));
}

TEST(LimitsTest, QueueCoresAndTimeLimit) {
  resource::NodePool pool = make_pool(4);
  SitePolicy site = one_queue({.max_cores = 5, .max_time_limit_s = 600});
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  snap.queue.push_back(pending(1, 4, "batch", 1, 600));
  snap.queue.push_back(pending(2, 1, "batch", 1, 601));  // asks too long
  snap.queue.push_back(pending(3, 1, "batch", 1, 0));    // forever: too long
  snap.queue.push_back(pending(4, 2, "batch", 1, 60));   // 6 cores: over
  snap.queue.push_back(pending(5, 1, "batch", 1, 60));
  EXPECT_EQ(started(run(snap, {"allocate", "backfill"}, {"fcfs", "limits"})),
            (std::vector<JobId>{1, 5}));
}

TEST(LimitsTest, NodeLimitsCountTheWholeGangAndThePlacement) {
  resource::NodePool pool = make_pool(4);
  SitePolicy site = one_queue({.max_nodes_per_user = 2});
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  snap.running.push_back(running(pool, 100, {1}, {0, 1}, "batch", 0));  // 1 node in use
  PendingJob gang = pending(1, 2, "batch");
  gang.request.nodes = 2;  // 1 + 2 nodes: over, never half of it
  snap.queue.push_back(gang);
  // nodes = 0, 8 tasks: needs two nodes once placed (n1 has 2 cores free).
  snap.queue.push_back(pending(2, 8, "batch"));
  snap.queue.push_back(pending(3, 2, "batch"));  // fits on one node
  EXPECT_EQ(started(run(snap, {"allocate"}, {"fcfs"})), (std::vector<JobId>{1, 2, 3}));
  EXPECT_EQ(started(run(snap, {"allocate", "backfill"}, {"fcfs", "limits"})),
            (std::vector<JobId>{3}));
}

TEST(LimitsTest, UnknownQueueNeverStarts) {
  resource::NodePool pool = make_pool(1);
  SitePolicy site = one_queue({});
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  snap.queue.push_back(pending(1, 1, "nosuch"));
  snap.queue.push_back(pending(2, 1, ""));  // the default queue (the first)
  EXPECT_EQ(started(run(snap, {"allocate", "backfill"}, {"fcfs", "limits"})),
            (std::vector<JobId>{2}));
}

TEST(LimitsTest, EnqueueHoldsJobsBeyondTheLimitBeforeTheyStart) {
  resource::NodePool pool = make_pool(1);
  SitePolicy site = one_queue({.max_running_jobs = 1});
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  // The node is full with a job of another queue: nothing starts now.
  snap.running.push_back(running(pool, 100, {1}, {0, 1, 2, 3}, "other", 0));
  snap.queue.push_back(pending(1, 2, "batch"));
  snap.queue.push_back(pending(2, 2, "batch"));
  {
    Session session(snap);
    LimitsPlugin plugin;
    plugin.on_session_open(session);
    // Per job, both are within the limit (nobody of "batch" runs) ...
    EXPECT_TRUE(session.job_ready(snap.queue[0]));
    EXPECT_TRUE(session.job_ready(snap.queue[1]));
    EnqueueAction enqueue;
    enqueue.execute(session);
    // ... but only one may run at once: the second is held for the cycle.
    EXPECT_TRUE(session.job_ready(snap.queue[0]));
    EXPECT_FALSE(session.job_ready(snap.queue[1]));
  }
  // Backfill then promises the held job nothing.
  auto reserved = [](const Decisions& d) {
    std::vector<JobId> out;
    for (const Decision& x : d.decisions) {
      if (const Reserve* r = std::get_if<Reserve>(&x)) out.push_back(r->job);
    }
    return out;
  };
  const std::map<std::string, std::string> all = {{"backfill.reservation_depth", "unlimited"}};
  EXPECT_EQ(reserved(run(snap, {"allocate", "backfill"}, {"fcfs", "limits"}, all)),
            (std::vector<JobId>{1, 2}));
  EXPECT_EQ(reserved(run(snap, {"enqueue", "allocate", "backfill"}, {"fcfs", "limits"}, all)),
            (std::vector<JobId>{1}));
}

TEST(LimitsTest, EnqueueWithoutHooksAdmitsAll) {
  resource::NodePool pool = make_pool(1);
  Snapshot snap;
  snap.pool = &pool;
  snap.queue.push_back(pending(1, 2));
  snap.queue.push_back(pending(2, 2));
  EXPECT_EQ(started(run(snap, {"enqueue", "allocate"}, {"fcfs", "limits"})),
            (std::vector<JobId>{1, 2}));
}

}  // namespace
}  // namespace hpcq::sched
