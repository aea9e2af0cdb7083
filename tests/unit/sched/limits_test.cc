// Plugin "limits" and action "enqueue".
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/resource/hwloc_import.h"
#include "lib/sched/actions/enqueue.h"
#include "lib/sched/plugins/limits.h"
#include "lib/sched/scheduler.h"
#include "lib/sched/session.h"
#include "tests/unit/sched/fixtures.h"

namespace hpcq::sched {
namespace {

using namespace fixture;  // make_pool, pending, running, started, preempted, run

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
