// Generic resources (--gres, [[rank]] gres): counted by the NodePool per
// node, so every action that places through it honours them.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/sched/scheduler.h"
#include "tests/unit/sched/fixtures.h"

namespace hpcq::sched {
namespace {

using namespace fixture;  // make_pool, pending, running, started, preempted, run

PendingJob with_gres(PendingJob job, std::map<std::string, int> gres) {
  job.request.gres = std::move(gres);
  return job;
}

// Where each started job went: job -> its ranks.
std::map<JobId, std::vector<Rank>> placed(const Decisions& d) {
  std::map<JobId, std::vector<Rank>> out;
  for (const Decision& x : d.decisions) {
    if (const Start* s = std::get_if<Start>(&x)) {
      for (const auto& part : s->allocation.nodes) {
        out[s->job].push_back(part.rank);
        EXPECT_EQ(part.gres, s->allocation.nodes.front().gres);  // the same on every node
      }
    }
  }
  return out;
}

// `job` (running() took its cores) holds `gres` on each of its nodes too.
void hold(resource::NodePool& pool, RunningJob& job, const std::map<std::string, int>& gres) {
  ASSERT_TRUE(pool.release(job.allocation).is_ok());
  for (auto& part : job.allocation.nodes) part.gres = gres;
  job.request.gres = gres;
  ASSERT_TRUE(pool.allocate(job.allocation).is_ok());
}

// n1 none, n2 nvme:2, n3 nvme:1 and fpga:1.
resource::NodePool gres_pool() {
  resource::NodePool pool = make_pool(3);
  EXPECT_TRUE(pool.set_gres(2, {{"nvme", 2}}).is_ok());
  EXPECT_TRUE(pool.set_gres(3, {{"nvme", 1}, {"fpga", 1}}).is_ok());
  return pool;
}

TEST(GresTest, AJobGoesOnlyWhereItsCountsAreFree) {
  resource::NodePool pool = gres_pool();
  Snapshot snap;
  snap.pool = &pool;
  snap.queue.push_back(with_gres(pending(1, 1), {{"nvme", 2}}));
  snap.queue.push_back(with_gres(pending(2, 1), {{"fpga", 1}}));
  snap.queue.push_back(with_gres(pending(3, 1), {{"nvme", 1}}));  // n2's and n3's are taken
  snap.queue.push_back(pending(4, 1));
  EXPECT_EQ(placed(run(snap, {"allocate"}, {})),
            (std::map<JobId, std::vector<Rank>>{{1, {2}}, {2, {3}}, {3, {3}}, {4, {1}}}));

  // A running job holds its units: job 1 fits nowhere now.
  snap.running.push_back(running(pool, 100, {2}, {0}, "", 0));
  hold(pool, snap.running.back(), {{"nvme", 1}});
  EXPECT_EQ(pool.find(2)->free_gres("nvme"), 1);
  // Strict order: job 1 could run on an idle n2, so the jobs behind it wait.
  EXPECT_TRUE(started(run(snap, {"allocate"}, {})).empty());
  snap.queue.erase(snap.queue.begin());
  EXPECT_EQ(placed(run(snap, {"allocate"}, {})),
            (std::map<JobId, std::vector<Rank>>{{2, {3}}, {3, {2}}, {4, {1}}}));
}

TEST(GresTest, EveryNodeOfAGangHoldsTheCount) {
  resource::NodePool pool = gres_pool();
  Snapshot snap;
  snap.pool = &pool;
  PendingJob two = with_gres(pending(1, 2), {{"nvme", 1}});
  two.request.nodes = 2;
  snap.queue.push_back(two);
  EXPECT_EQ(placed(run(snap, {"allocate"}, {})), (std::map<JobId, std::vector<Rank>>{{1, {2, 3}}}));
  two.request.gres = {{"nvme", 2}};  // only n2 has two
  snap.queue = {two};
  EXPECT_TRUE(started(run(snap, {"allocate"}, {})).empty());
}

TEST(GresTest, BackfillKeepsTheWaitingJobsUnitsAndPassesOthersBy) {
  resource::NodePool pool = gres_pool();
  Snapshot snap;
  snap.pool = &pool;
  // n2's nvme are held by a running job until 3600 s.
  snap.running.push_back(running(pool, 100, {2}, {0}, "", 0));
  hold(pool, snap.running.back(), {{"nvme", 2}});
  snap.queue.push_back(with_gres(pending(1, 1), {{"nvme", 2}}));
  snap.queue.push_back(with_gres(pending(2, 1), {{"nvme", 1}}));  // n3 has one free
  snap.queue.push_back(pending(3, 1));
  const Decisions d = run(snap, {"allocate", "backfill"}, {"fcfs"});
  // Job 1 waits for n2's units (it fits when idle, so it is not passed
  // over as never runnable); the others start around it.
  EXPECT_EQ(started(d), (std::vector<JobId>{2, 3}));
  EXPECT_EQ(placed(d).at(2), (std::vector<Rank>{3}));
}

// Reserve decisions: job -> promised start, in seconds.
std::map<JobId, std::int64_t> reserved(const Decisions& d) {
  std::map<JobId, std::int64_t> out;
  for (const Decision& x : d.decisions) {
    if (const Reserve* r = std::get_if<Reserve>(&x)) out[r->job] = r->time / kUsPerSecond;
  }
  return out;
}

PendingJob lasting(PendingJob job, std::int64_t limit_s) {
  job.time_limit_s = limit_s;
  return job;
}

// n1 has `units` nvme, one of them (and core 0) held by a running job until
// 3600 s; n2 has no nvme and all its cores free. Backfill (EASY) over
// `queue`.
Decisions backfill_around_nvme(int units, std::vector<PendingJob> queue) {
  resource::NodePool pool = make_pool(2);
  EXPECT_TRUE(pool.set_gres(1, {{"nvme", units}}).is_ok());
  Snapshot snap;
  snap.pool = &pool;
  snap.running.push_back(running(pool, 100, {1}, {0}, "", 0));
  hold(pool, snap.running.back(), {{"nvme", 1}});
  snap.queue = std::move(queue);
  return run(snap, {"allocate", "backfill"}, {"fcfs"});
}

TEST(GresTest, AReservationWaitsForTheUnitsNotJustTheCores) {
  // n1's only unit is busy until 3600 s: job 1 is promised n1 then, not
  // now on n1's or n2's free cores.
  Decisions d = backfill_around_nvme(1, {
                                            with_gres(pending(1, 2), {{"nvme", 1}}),
                                            lasting(pending(2, 4), 7200),  // n2 only: fine
                                            lasting(pending(3, 3), 7200),  // would leave n1 1 core
                                            lasting(pending(4, 2), 7200),  // leaves it 2
                                            pending(5, 1),                 // ends when job 1 starts
                                        });
  EXPECT_EQ(reserved(d), (std::map<JobId, std::int64_t>{{1, 3600}}));
  EXPECT_EQ(placed(d), (std::map<JobId, std::vector<Rank>>{{2, {2}}, {4, {1}}, {5, {1}}}));

  // n1 has a second unit, free now: job 1 (both units) waits for 3600 s,
  // so a job that would hold the free one past then does not start; one
  // that gives it back before, or asks none, does.
  d = backfill_around_nvme(2, {
                                  with_gres(pending(1, 1), {{"nvme", 2}}),
                                  lasting(with_gres(pending(2, 1), {{"nvme", 1}}), 7200),
                                  lasting(with_gres(pending(3, 1), {{"nvme", 1}}), 1800),
                                  lasting(pending(4, 1), 7200),
                              });
  EXPECT_EQ(reserved(d), (std::map<JobId, std::int64_t>{{1, 3600}}));
  EXPECT_EQ(started(d), (std::vector<JobId>{3, 4}));
  EXPECT_EQ(placed(d).at(3), (std::vector<Rank>{1}));
}

TEST(GresTest, PreemptionFreesTheVictimsUnits) {
  resource::NodePool pool = make_pool(2);
  ASSERT_TRUE(pool.set_gres(1, {{"nvme", 1}}).is_ok());
  SitePolicy site;
  QueueConfig low;
  low.name = "low";
  low.preempt_mode = PreemptMode::kRequeue;
  QueueConfig high;
  high.name = "high";
  high.priority_tier = 1;
  site.queues = {low, high};
  Snapshot snap;
  snap.now = 1000;
  snap.pool = &pool;
  snap.site = &site;
  // One core of n1 with its nvme: cores are free beside it, the unit is not.
  snap.running.push_back(running(pool, 100, {1}, {0}, "low", 10));
  hold(pool, snap.running.back(), {{"nvme", 1}});
  snap.queue.push_back(with_gres(pending(1, 1, "high"), {{"nvme", 1}}));
  snap.queue[0].submit_time = 100;
  EXPECT_TRUE(started(run(snap, {"allocate"}, {"fcfs"})).empty());
  EXPECT_EQ(preempted(run(snap, {"allocate", "preempt"}, {"fcfs"})),
            (std::vector<std::pair<JobId, JobId>>{{100, 1}}));
}

TEST(GresTest, AnAdvanceReservationKeepsTheOnlyNodeWithTheUnits) {
  resource::NodePool pool = gres_pool();
  Snapshot snap;
  snap.now = 0;
  snap.pool = &pool;
  AdvanceReservation r;
  r.name = "maint";
  r.nodes = {3};
  r.start = 10 * kUsPerSecond;
  r.end = 7200 * kUsPerSecond;
  snap.reservations.push_back(r);
  snap.queue.push_back(with_gres(pending(1, 1), {{"fpga", 1}}));  // only n3 has one
  EXPECT_TRUE(started(run(snap, {"allocate", "backfill"}, {})).empty());
  snap.reservations.clear();
  EXPECT_EQ(started(run(snap, {"allocate"}, {})), (std::vector<JobId>{1}));
}

}  // namespace
}  // namespace hpcq::sched
