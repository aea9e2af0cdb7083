// Action "elastic" (the priority-based elastic policy of paper 001), the
// node range in PendingJob/RunningJob and the resize helpers.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "lib/resource/hwloc_import.h"
#include "lib/sched/resize.h"
#include "lib/sched/scheduler.h"
#include "tests/unit/sched/fixtures.h"

namespace hpcq::sched {
namespace {

constexpr TimeUs kNow = 1000 * kUsPerSecond;

// `nodes` nodes of 2 cores (ranks 1..nodes); range jobs here run 2 tasks on
// each of their nodes, so a node is the unit they grow and shrink by.
resource::NodePool make_pool(int nodes) { return fixture::make_pool(nodes, "core:2 pu:1"); }

// A pending job of min_nodes..max_nodes nodes (2 tasks each); max_nodes ==
// min_nodes: rigid.
PendingJob pending(JobId id, int min_nodes, int max_nodes, bool elastic, std::int32_t priority,
                   TimeUs submit = 0) {
  PendingJob j;
  j.id = id;
  j.uid = 1;
  j.submit_time = submit != 0 ? submit : static_cast<TimeUs>(id);
  j.request.nodes = min_nodes;
  j.request.ntasks = 2 * min_nodes;
  j.time_limit_s = 3600;
  j.priority = priority;
  j.max_nodes = max_nodes;
  j.elastic = elastic;
  return j;
}

// The job running on both cores of each of `ranks`, taken from `pool`,
// started (and last resized) at `since`.
RunningJob running(resource::NodePool& pool, const PendingJob& job, std::vector<Rank> ranks,
                   TimeUs since = 0) {
  resource::Allocation allocation;
  int first = 0;
  for (Rank rank : ranks) {
    resource::NodeAllocation part;
    part.rank = rank;
    part.node = "n" + std::to_string(rank);
    part.cores = {0, 1};
    part.numa = {0};
    part.ntasks = 2;
    part.first_task = first;
    first += 2;
    allocation.nodes.push_back(part);
  }
  EXPECT_TRUE(pool.allocate(allocation).is_ok());
  return running_from(job, std::move(allocation), since, since + 3600 * kUsPerSecond);
}

Decisions run(const Snapshot& snap, std::vector<std::string> actions = {"elastic"},
              std::map<std::string, std::string> options = {{"elastic.rescale_gap_s", "0"}}) {
  auto s = Scheduler::create({std::move(actions), {"fcfs"}, std::move(options)});
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s->cycle(snap);
}

// Each decision as one short line, in order: "start 7 n1 n2", "shrink 3 n8
// n7", "expand 4 n5", "reserve 9".
std::vector<std::string> lines(const Decisions& d) {
  std::vector<std::string> out;
  auto nodes = [](const resource::Allocation& a) {
    std::string s;
    for (const auto& part : a.nodes) s += " n" + std::to_string(part.rank);
    return s;
  };
  for (const Decision& x : d.decisions) {
    if (const Start* s = std::get_if<Start>(&x)) {
      out.push_back("start " + std::to_string(s->job) + nodes(s->allocation));
    } else if (const Shrink* k = std::get_if<Shrink>(&x)) {
      std::string line = "shrink " + std::to_string(k->job);
      for (Rank r : k->nodes) line += " n" + std::to_string(r);
      out.push_back(line);
    } else if (const Expand* e = std::get_if<Expand>(&x)) {
      out.push_back("expand " + std::to_string(e->job) + nodes(e->allocation));
    } else if (const Reserve* r = std::get_if<Reserve>(&x)) {
      out.push_back("reserve " + std::to_string(r->job));
    } else {
      out.push_back("preempt");
    }
  }
  return out;
}

using Lines = std::vector<std::string>;

TEST(NodeRangeTest, RangeNeedsAMinimumBelowTheMaximumAndWholeNodes) {
  EXPECT_TRUE(has_node_range(pending(1, 2, 8, true, 0)));
  EXPECT_FALSE(has_node_range(pending(1, 4, 4, true, 0)));  // min == max: rigid
  PendingJob no_nodes = pending(1, 2, 8, true, 0);
  no_nodes.request.nodes = 0;
  EXPECT_FALSE(has_node_range(no_nodes));
  PendingJob ragged = pending(1, 2, 8, true, 0);
  ragged.request.ntasks = 3;  // not a whole number of tasks per node
  EXPECT_FALSE(has_node_range(ragged));
  const resource::ResourceRequest at5 = request_at(pending(1, 2, 8, true, 0).request, 5);
  EXPECT_EQ(at5.nodes, 5);
  EXPECT_EQ(at5.ntasks, 10);
}

TEST(ResizeTest, ShrinkAndExpandRenumberTasksBlockWise) {
  resource::NodePool pool = make_pool(4);
  const RunningJob r = running(pool, pending(1, 1, 4, true, 0), {1, 2, 3});
  const std::vector<Rank> middle = {2};
  auto less = shrunk(r.allocation, middle);
  ASSERT_TRUE(less.is_ok()) << less.status().message();
  ASSERT_EQ(less->nodes.size(), 2u);
  EXPECT_EQ(less->nodes[1].rank, 3u);
  EXPECT_EQ(less->nodes[1].first_task, 2);
  resource::Allocation added;
  added.nodes.push_back(r.allocation.nodes[1]);  // rank 2 again
  auto more = expanded(*less, added);
  ASSERT_TRUE(more.is_ok());
  EXPECT_EQ(more->nodes.back().rank, 2u);
  EXPECT_EQ(more->nodes.back().first_task, 4);
  const std::vector<Rank> all = {1, 2, 3};
  EXPECT_FALSE(shrunk(r.allocation, all).is_ok());  // a job keeps at least one node
  const std::vector<Rank> foreign = {4};
  EXPECT_FALSE(shrunk(r.allocation, foreign).is_ok());
  EXPECT_FALSE(expanded(r.allocation, r.allocation).is_ok());  // nodes it already has
}

TEST(ElasticTest, StartsBelowMaxOnWhatIsFreeRatherThanShrink) {
  resource::NodePool pool = make_pool(8);
  Snapshot snap;
  snap.now = kNow;
  snap.pool = &pool;
  // A low-priority elastic job that could give 3 nodes back.
  snap.running.push_back(running(pool, pending(1, 2, 5, true, 1), {1, 2, 3, 4, 5}));
  snap.queue.push_back(pending(2, 2, 8, true, 5));
  EXPECT_EQ(lines(run(snap)), (Lines{"start 2 n6 n7 n8"}));
  // Without the action the range job starts rigid at its minimum.
  EXPECT_EQ(lines(run(snap, {"allocate"}, {})), (Lines{"start 2 n6 n7"}));
}

TEST(ElasticTest, ShrinksLowerPriorityToAdmitHigherAndNeverAHigherOne) {
  resource::NodePool pool = make_pool(8);
  Snapshot snap;
  snap.now = kNow;
  snap.pool = &pool;
  snap.running.push_back(running(pool, pending(1, 2, 4, true, 1), {1, 2, 3, 4}));
  snap.running.push_back(running(pool, pending(2, 1, 4, true, 9), {5, 6, 7, 8}));
  snap.queue.push_back(pending(3, 2, 4, true, 5));
  // Job 1 (priority 1) gives its last nodes, down to its minimum of 2; job 2
  // (priority 9) is not touched although it could give 3. Job 3 starts on
  // the 2 nodes freed, below its maximum.
  EXPECT_EQ(lines(run(snap)), (Lines{"shrink 1 n4 n3", "start 3 n3 n4"}));
}

TEST(ElasticTest, ShrinksTowardTheNewJobsMaximum) {
  resource::NodePool pool = make_pool(8);
  Snapshot snap;
  snap.now = kNow;
  snap.pool = &pool;
  snap.running.push_back(running(pool, pending(1, 2, 8, true, 1), {1, 2, 3, 4, 5, 6, 7, 8}));
  snap.queue.push_back(pending(2, 4, 6, false, 5));  // moldable
  EXPECT_EQ(lines(run(snap)), (Lines{"shrink 1 n8 n7 n6 n5 n4 n3", "start 2 n3 n4 n5 n6 n7 n8"}));
}

TEST(ElasticTest, NeverBelowMinimumAndAGangStartsWholeOrNotAtAll) {
  resource::NodePool pool = make_pool(8);
  Snapshot snap;
  snap.now = kNow;
  snap.pool = &pool;
  // Only 2 of its 8 nodes can go; the new job needs 4 at least.
  snap.running.push_back(running(pool, pending(1, 6, 8, true, 1), {1, 2, 3, 4, 5, 6, 7, 8}));
  snap.queue.push_back(pending(2, 4, 8, true, 5));
  EXPECT_EQ(lines(run(snap)), Lines{});
  // Two victims together are enough: each gives down to its own minimum.
  resource::NodePool pool2 = make_pool(8);
  Snapshot snap2;
  snap2.now = kNow;
  snap2.pool = &pool2;
  snap2.running.push_back(running(pool2, pending(1, 2, 4, true, 1), {1, 2, 3, 4}));
  snap2.running.push_back(running(pool2, pending(2, 3, 4, true, 2), {5, 6, 7, 8}));
  snap2.queue.push_back(pending(3, 3, 3, false, 5));  // rigid, 3 nodes
  // Lowest priority first: job 1 gives 2 (to its minimum), job 2 the third.
  EXPECT_EQ(lines(run(snap2)), (Lines{"shrink 1 n4 n3", "shrink 2 n8", "start 3 n3 n4 n8"}));
}

TEST(ElasticTest, EqualPriorityShrinksTheNewestFirst) {
  resource::NodePool pool = make_pool(8);
  Snapshot snap;
  snap.now = kNow;
  snap.pool = &pool;
  snap.running.push_back(running(pool, pending(1, 2, 4, true, 3, 10), {1, 2, 3, 4}));
  snap.running.push_back(running(pool, pending(2, 2, 4, true, 3, 20), {5, 6, 7, 8}));
  snap.queue.push_back(pending(3, 2, 2, false, 3, 30));
  EXPECT_EQ(lines(run(snap)), (Lines{"shrink 2 n8 n7", "start 3 n7 n8"}));
  // A job of lower priority than every running one shrinks nobody.
  snap.queue.back().priority = 2;
  EXPECT_EQ(lines(run(snap)), Lines{});
}

TEST(ElasticTest, ExpandsInPriorityOrderUpToTheMaximum) {
  resource::NodePool pool = make_pool(7);
  Snapshot snap;
  snap.now = kNow;
  snap.pool = &pool;
  snap.running.push_back(running(pool, pending(1, 2, 8, true, 1), {1, 2}));
  snap.running.push_back(running(pool, pending(2, 2, 4, true, 5), {3, 4}));
  // Nodes 5-7 are free: job 2 (priority 5) grows to its maximum of 4 first,
  // job 1 gets the one left.
  EXPECT_EQ(lines(run(snap)), (Lines{"expand 2 n5 n6", "expand 1 n7"}));
}

TEST(ElasticTest, RescaleGapIsHonoured) {
  resource::NodePool pool = make_pool(8);
  Snapshot snap;
  snap.now = kNow;
  snap.pool = &pool;
  // Job 1 started 50 s ago, job 2 150 s ago; both priority 1.
  snap.running.push_back(
      running(pool, pending(1, 2, 4, true, 1), {1, 2, 3, 4}, kNow - 50 * kUsPerSecond));
  snap.running.push_back(
      running(pool, pending(2, 2, 4, true, 1), {5, 6, 7, 8}, kNow - 150 * kUsPerSecond));
  snap.queue.push_back(pending(3, 2, 2, false, 5));
  const std::map<std::string, std::string> gap = {{"elastic.rescale_gap_s", "100"}};
  // Job 2 is newer in standing (larger id at equal submit order) but job 1
  // is inside its gap either way: only job 2 may give nodes.
  EXPECT_EQ(lines(run(snap, {"elastic"}, gap)), (Lines{"shrink 2 n8 n7", "start 3 n7 n8"}));
  // A resize also restarts the gap: job 2 resized 99 s ago is left alone too.
  snap.running[1].last_resize = kNow - 99 * kUsPerSecond;
  EXPECT_EQ(lines(run(snap, {"elastic"}, gap)), Lines{});

  // Expansion waits for the gap as well.
  resource::NodePool pool2 = make_pool(4);
  Snapshot snap2;
  snap2.now = kNow;
  snap2.pool = &pool2;
  snap2.running.push_back(running(pool2, pending(1, 1, 4, true, 1), {1}, kNow - 50 * kUsPerSecond));
  EXPECT_EQ(lines(run(snap2, {"elastic"}, gap)), Lines{});
  snap2.running[0].last_resize = kNow - 100 * kUsPerSecond;
  EXPECT_EQ(lines(run(snap2, {"elastic"}, gap)), (Lines{"expand 1 n2 n3 n4"}));
}

TEST(ElasticTest, RigidAndMoldableRunningJobsAreNeverResized) {
  resource::NodePool pool = make_pool(6);
  Snapshot snap;
  snap.now = kNow;
  snap.pool = &pool;
  // Rigid (no range) and moldable (a range, not elastic), both priority 0.
  snap.running.push_back(running(pool, pending(1, 3, 3, true, 0), {1, 2, 3}));
  snap.running.push_back(running(pool, pending(2, 1, 6, false, 0), {4}));
  snap.queue.push_back(pending(3, 3, 3, false, 9));
  // Two nodes are free; neither job is shrunk for the high-priority job, and
  // the moldable one does not grow into them.
  EXPECT_EQ(lines(run(snap)), Lines{});
  // The same running job marked elastic would grow.
  snap.running[1].elastic = true;
  snap.queue.clear();
  EXPECT_EQ(lines(run(snap)), (Lines{"expand 2 n5 n6"}));
}

TEST(ElasticTest, LaterActionsSeeTheResizedPool) {
  resource::NodePool pool = make_pool(4);
  Snapshot snap;
  snap.now = kNow;
  snap.pool = &pool;
  snap.running.push_back(running(pool, pending(1, 1, 4, true, 5), {1, 2}));
  snap.queue.push_back(pending(2, 2, 2, false, 0));
  // Job 1 (priority 5) takes the two free nodes; job 2 (priority 0) may not
  // shrink it, and "allocate" after it must not start job 2 on those nodes;
  // backfill reserves for it at job 1's end with job 1's grown allocation.
  EXPECT_EQ(lines(run(snap, {"elastic", "allocate", "backfill"})),
            (Lines{"expand 1 n3 n4", "reserve 2"}));
}

TEST(ElasticTest, AllocateAfterItDoesNotStartAJobTwice) {
  resource::NodePool pool = make_pool(4);
  Snapshot snap;
  snap.now = kNow;
  snap.pool = &pool;
  snap.queue.push_back(pending(1, 2, 2, false, 0));
  EXPECT_EQ(lines(run(snap, {"elastic", "allocate", "backfill"})), (Lines{"start 1 n1 n2"}));
}

TEST(ElasticTest, SessionKeepsTheResizedAllocation) {
  resource::NodePool pool = make_pool(4);
  Snapshot snap;
  snap.now = kNow;
  snap.pool = &pool;
  snap.running.push_back(running(pool, pending(1, 1, 4, true, 5), {1, 2, 3}));
  Session session(snap);
  const std::vector<Rank> last = {3};
  ASSERT_TRUE(session.shrink(snap.running[0], last).is_ok());
  EXPECT_EQ(session.allocation_of(snap.running[0]).nodes.size(), 2u);
  EXPECT_EQ(session.pool().free_cores(3), 2);
  const std::vector<Rank> foreign = {4};
  EXPECT_FALSE(session.shrink(snap.running[0], foreign).is_ok());
  EXPECT_EQ(session.decisions().decisions.size(), 1u);
}

TEST(ElasticTest, RejectsUnknownOptionsAndBadGaps) {
  EXPECT_FALSE(Scheduler::create({{"elastic"}, {"fcfs"}, {{"elastic.gap", "1"}}}).is_ok());
  EXPECT_FALSE(
      Scheduler::create({{"elastic"}, {"fcfs"}, {{"elastic.rescale_gap_s", "-1"}}}).is_ok());
  EXPECT_FALSE(
      Scheduler::create({{"elastic"}, {"fcfs"}, {{"elastic.rescale_gap_s", "1m"}}}).is_ok());
  EXPECT_TRUE(
      Scheduler::create({{"elastic"}, {"fcfs"}, {{"elastic.rescale_gap_s", "30"}}}).is_ok());
}

}  // namespace
}  // namespace hpcq::sched
