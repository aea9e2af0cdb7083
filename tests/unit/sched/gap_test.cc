// Action "gap": the migratable gap queue (papers/004, Modes A and B).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/resource/hwloc_import.h"
#include "lib/sched/scheduler.h"
#include "tests/unit/sched/fixtures.h"

namespace hpcq::sched {
namespace {

constexpr TimeUs kNow = 1000 * kUsPerSecond;

using fixture::make_pool;

PendingJob pending(JobId id, int ntasks, std::string queue = "", std::int64_t limit_s = 3600) {
  PendingJob j;
  j.id = id;
  j.uid = 1;
  j.submit_time = static_cast<TimeUs>(id);
  j.request.ntasks = ntasks;
  j.time_limit_s = limit_s;
  j.queue = std::move(queue);
  return j;
}

// Running on `cores` of node `rank`, ending (by its limit) at `end`.
RunningJob running(resource::NodePool& pool, JobId id, Rank rank, std::vector<int> cores,
                   std::string queue, TimeUs end) {
  RunningJob r;
  r.id = id;
  r.uid = 1;
  r.start_time = 0;
  r.end_estimate = end;
  r.time_limit_s = end / kUsPerSecond;
  r.queue = std::move(queue);
  r.request.ntasks = static_cast<int>(cores.size());
  resource::NodeAllocation part;
  part.rank = rank;
  part.node = "n" + std::to_string(rank);
  part.cores = std::move(cores);
  part.numa = {0};
  part.ntasks = r.request.ntasks;
  r.allocation.nodes.push_back(part);
  EXPECT_TRUE(pool.allocate(r.allocation).is_ok());
  return r;
}

// "batch" (regular, the default) and "gap" (migratable).
SitePolicy site() {
  SitePolicy s;
  QueueConfig batch;
  batch.name = "batch";
  QueueConfig gap;
  gap.name = "gap";
  gap.migratable = true;
  s.queues = {batch, gap};
  s.default_queue = "batch";
  return s;
}

Decisions run(const Snapshot& snap, std::vector<std::string> actions,
              std::map<std::string, std::string> options = {}) {
  auto s = Scheduler::create({std::move(actions), {"fcfs"}, std::move(options)});
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s->cycle(snap);
}

std::vector<JobId> started(const Decisions& d) {
  std::vector<JobId> out;
  for (const Decision& x : d.decisions) {
    if (const Start* s = std::get_if<Start>(&x)) out.push_back(s->job);
  }
  return out;
}

std::vector<Preempt> evictions(const Decisions& d) {
  std::vector<Preempt> out;
  for (const Decision& x : d.decisions) {
    if (const Preempt* p = std::get_if<Preempt>(&x)) out.push_back(*p);
  }
  return out;
}

std::vector<Migrate> moves(const Decisions& d) {
  std::vector<Migrate> out;
  for (const Decision& x : d.decisions) {
    if (const Migrate* m = std::get_if<Migrate>(&x)) out.push_back(*m);
  }
  return out;
}

// Whether the decisions promise `job` a start at `time`.
bool promised(const Decisions& d, JobId job, TimeUs time) {
  for (const Decision& x : d.decisions) {
    const Reserve* r = std::get_if<Reserve>(&x);
    if (r != nullptr && r->job == job) return r->time == time;
  }
  return false;
}

const std::vector<std::string> kActions = {"allocate", "backfill", "gap"};

// Two nodes of 4 cores: node 1 busy until `frees`, node 2 running gap jobs
// 200 (cores 0-1) and 201 (cores 2-3) with two hours to go.
struct TwoNodes {
  explicit TwoNodes(TimeUs frees, int nodes = 2) : pool(make_pool(nodes)), policy(site()) {
    snap.now = kNow;
    snap.pool = &pool;
    snap.site = &policy;
    snap.running.push_back(running(pool, 100, 1, {0, 1, 2, 3}, "batch", frees));
    snap.running.push_back(running(pool, 200, 2, {0, 1}, "gap", kNow + 7200 * kUsPerSecond));
    snap.running.push_back(running(pool, 201, 2, {2, 3}, "gap", kNow + 7200 * kUsPerSecond));
  }
  resource::NodePool pool;
  SitePolicy policy;
  Snapshot snap;
};

TEST(GapTest, GapJobsTakeCoresPromisedToAReservedJob) {
  // Node 1 busy for an hour; the 8-core job at the head waits for it and is
  // promised both nodes then. Regular backfill may not use node 2's idle
  // cores for a 2-hour job (it would delay the head); a gap job may.
  resource::NodePool pool = make_pool(2);
  SitePolicy s = site();
  Snapshot snap;
  snap.now = kNow;
  snap.pool = &pool;
  snap.site = &s;
  snap.running.push_back(running(pool, 100, 1, {0, 1, 2, 3}, "batch", kNow + 3600 * kUsPerSecond));
  snap.queue = {pending(1, 8), pending(2, 2, "batch", 7200), pending(3, 2, "gap", 7200)};
  EXPECT_EQ(started(run(snap, kActions)), std::vector<JobId>{3});
  // Without the action the gap job is an ordinary job: backfill keeps it out.
  EXPECT_TRUE(started(run(snap, {"allocate", "backfill"})).empty());
}

TEST(GapTest, RegularJobsNeverStartInReservedCoresAndGapJobsNeverBlockTheQueue) {
  resource::NodePool pool = make_pool(2);
  SitePolicy s = site();
  Snapshot snap;
  snap.now = kNow;
  snap.pool = &pool;
  snap.site = &s;
  snap.running.push_back(running(pool, 100, 1, {0, 1, 2, 3}, "batch", kNow + 3600 * kUsPerSecond));
  // A gap job first in the queue, too big to fit: the regular jobs behind
  // it are scheduled as if it were not there.
  snap.queue = {pending(1, 16, "gap"), pending(2, 4, "batch", 600)};
  const Decisions d = run(snap, kActions);
  EXPECT_EQ(started(d), std::vector<JobId>{2});
}

TEST(GapTest, GapJobsInTheWayOfACloseReservationAreCheckpointed) {
  // Node 1 frees in 30 s (within the 60 s save deadline); node 2 runs two
  // gap jobs. The head needs both nodes: backfill counts the gap cores free
  // from now, so it is promised the start in 30 s, and the gap jobs on its
  // cores are evicted now, by checkpoint (there is no other hole).
  TwoNodes t(kNow + 30 * kUsPerSecond);
  Snapshot& snap = t.snap;
  snap.queue = {pending(1, 8)};
  const Decisions d = run(snap, kActions);
  const std::vector<Preempt> e = evictions(d);
  ASSERT_EQ(e.size(), 2u);
  for (const Preempt& p : e) {
    EXPECT_EQ(p.for_job, 1u);
    EXPECT_EQ(p.mode, PreemptMode::kCheckpoint);
  }
  // With the reservation farther than the deadline, nothing is evicted yet.
  snap.running[0].end_estimate = kNow + 600 * kUsPerSecond;
  EXPECT_TRUE(evictions(run(snap, kActions)).empty());
  // ... unless the deadline is longer; evict = requeue kills instead.
  const std::vector<Preempt> late =
      evictions(run(snap, kActions, {{"gap.save_deadline_s", "900"}, {"gap.evict", "requeue"}}));
  ASSERT_EQ(late.size(), 2u);
  EXPECT_EQ(late[0].mode, PreemptMode::kRequeue);
}

TEST(GapTest, OnlyTheGapJobsInTheWayGo) {
  // The head needs 6 cores when node 1 frees: all of node 1 and two of
  // node 2. Of the two gap jobs on node 2 one is enough to move: the
  // youngest (both started at 0: then the higher id).
  resource::NodePool pool = make_pool(2);
  SitePolicy s = site();
  Snapshot snap;
  snap.now = kNow;
  snap.pool = &pool;
  snap.site = &s;
  snap.running.push_back(running(pool, 100, 1, {0, 1, 2, 3}, "batch", kNow + 10 * kUsPerSecond));
  snap.running.push_back(running(pool, 200, 2, {0, 1}, "gap", kNow + 7200 * kUsPerSecond));
  snap.running.push_back(running(pool, 201, 2, {2, 3}, "gap", kNow + 7200 * kUsPerSecond));
  snap.queue = {pending(1, 6)};
  const std::vector<Preempt> e = evictions(run(snap, kActions));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].job, 201u);
}

TEST(GapTest, AGapJobInTheWayMovesToAHoleThatLasts) {
  // The head asks for two whole nodes: nodes 1 and 2 once node 1 frees in
  // 30 s. Node 3 has two idle cores that no reservation needs: one of the
  // gap jobs in the head's way moves there (Migrate); the other has nowhere
  // to go and is checkpointed. No new gap job starts where the move goes.
  TwoNodes t(kNow + 30 * kUsPerSecond, 3);
  Snapshot& snap = t.snap;
  snap.running.push_back(running(t.pool, 101, 3, {0, 1}, "batch", kNow + 9000 * kUsPerSecond));
  PendingJob head = pending(1, 8);
  head.request.nodes = 2;
  snap.queue = {head, pending(2, 1, "gap", 7200)};
  const Decisions d = run(snap, kActions);
  const std::vector<Migrate> m = moves(d);
  ASSERT_EQ(m.size(), 1u);
  ASSERT_EQ(m[0].allocation.nodes.size(), 1u);
  EXPECT_EQ(m[0].allocation.nodes[0].rank, 3u);
  EXPECT_EQ(m[0].allocation.nodes[0].cores, (std::vector<int>{2, 3}));
  const std::vector<Preempt> e = evictions(d);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].job, m[0].job);
  EXPECT_EQ(e[0].for_job, 1u);
  EXPECT_TRUE(started(d).empty());
  // While they are saved, the hole stays the moving job's: the queued gap
  // job does not start there (without the hold it would).
  Snapshot saving = snap;
  for (RunningJob& r : saving.running) {
    if (r.id == m[0].job || r.id == e[0].job) r.leaving = true;
    if (r.id == m[0].job) r.moving_to = {3};
  }
  EXPECT_TRUE(started(run(saving, kActions)).empty());
  for (RunningJob& r : saving.running) r.moving_to.clear();
  EXPECT_EQ(started(run(saving, kActions)), std::vector<JobId>{2});
  // gap.migrate = false: both checkpointed and requeued.
  const Decisions off = run(snap, kActions, {{"gap.migrate", "false"}});
  EXPECT_TRUE(moves(off).empty());
  EXPECT_EQ(evictions(off).size(), 2u);
}

TEST(GapTest, AHoleThatEndsBeforeTheJobIsNoHole) {
  // As above, but the second job is promised node 3 in an hour (job 101
  // ends then; it needs a whole node), before the gap jobs' two hours are
  // up: they would be evicted there again, so both are checkpointed.
  TwoNodes t(kNow + 30 * kUsPerSecond, 3);
  Snapshot& snap = t.snap;
  snap.running.push_back(running(t.pool, 101, 3, {0, 1}, "batch", kNow + 3600 * kUsPerSecond));
  PendingJob head = pending(1, 8);
  head.request.nodes = 2;
  PendingJob second = pending(2, 4);
  second.request.nodes = 1;
  snap.queue = {head, second};
  const Decisions d = run(snap, kActions, {{"backfill.reservation_depth", "0"}});
  EXPECT_TRUE(moves(d).empty());
  EXPECT_EQ(evictions(d).size(), 2u);
}

TEST(GapTest, ModeASavesEveryGapJobAtTheEndOfItsSlot) {
  // Job 200 started a slot ago, 201 just now: only 200 is saved, for nobody
  // in particular; nothing else is in the way.
  TwoNodes t(kNow + 7200 * kUsPerSecond);
  Snapshot& snap = t.snap;
  snap.running[1].start_time = kNow - 600 * kUsPerSecond;
  snap.running[2].start_time = kNow - 60 * kUsPerSecond;
  const std::vector<Preempt> e =
      evictions(run(snap, kActions, {{"gap.mode", "a"}, {"gap.slot_s", "600"}}));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].job, 200u);
  EXPECT_EQ(e[0].for_job, 0u);
  EXPECT_EQ(e[0].mode, PreemptMode::kCheckpoint);
  // Mode B leaves both running.
  EXPECT_TRUE(evictions(run(snap, kActions)).empty());
}

TEST(GapTest, AJobThatFitsInGapCoresNowIsPromisedNowAndTheyAllGo) {
  // Node 1's job ends in 1 s; node 2 runs two gap jobs. A 4-core job fits
  // on node 2 once both gap jobs have gone, which they do at once (they
  // give their cores back as their save begins): it is promised now -- not
  // in 1 s, where node 1's end would let it start with one gap job fewer
  // gone while it waits for no reason (as it would not without the gap
  // queue).
  TwoNodes t(kNow + 1 * kUsPerSecond);
  Snapshot& snap = t.snap;
  snap.queue = {pending(1, 4)};
  const Decisions d = run(snap, kActions, {{"gap.migrate", "false"}});
  EXPECT_TRUE(promised(d, 1, kNow));
  EXPECT_EQ(evictions(d).size(), 2u);
}

TEST(GapTest, AJobPastItsEndEstimateStillHoldsItsCores) {
  // Node 1's job should have ended 100 s ago and still runs (traces have
  // such jobs); node 2 runs two gap jobs. Backfill counts it as ending in
  // 1 s and the gap cores as free now, so the 4-core head is promised now,
  // on node 2: the gap jobs there must go now. Counting the late job's
  // cores as free already would promise node 1 instead, evict nothing, and
  // leave the head waiting for the late job as well as for the gap jobs.
  TwoNodes t(kNow - 100 * kUsPerSecond);
  Snapshot& snap = t.snap;
  snap.queue = {pending(1, 4)};
  const Decisions d = run(snap, kActions, {{"gap.migrate", "false"}});
  EXPECT_TRUE(promised(d, 1, kNow));
  EXPECT_EQ(evictions(d).size(), 2u);
}

TEST(GapTest, JobsOnTheirWayOutGetNoDecision) {
  TwoNodes t(kNow + 30 * kUsPerSecond);
  Snapshot& snap = t.snap;
  snap.running[1].leaving = true;
  snap.running[2].leaving = true;
  snap.queue = {pending(1, 8)};
  const Decisions d = run(snap, kActions);
  EXPECT_TRUE(evictions(d).empty());
  EXPECT_TRUE(moves(d).empty());
}

TEST(GapTest, BadOptionsAreRefused) {
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"gap.save_deadline_s", "-1"},
                                                        {"gap.save_deadline_s", "soon"},
                                                        {"gap.evict", "kill"},
                                                        {"gap.mode", "c"},
                                                        {"gap.slot_s", "0"},
                                                        {"gap.migrate", "yes"},
                                                        {"gap.late", "kill"},
                                                        {"gap.save_s", "30"},
                                                        {"gap.slots", "1"}}) {
    auto s = Scheduler::create({kActions, {"fcfs"}, {{key, value}}});
    EXPECT_FALSE(s.is_ok()) << key << "=" << value;
  }
}

}  // namespace
}  // namespace hpcq::sched
