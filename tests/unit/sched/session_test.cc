#include "lib/sched/session.h"

#include <gtest/gtest.h>

#include "lib/resource/allocator.h"
#include "lib/resource/hwloc_import.h"
#include "lib/sched/registry.h"
#include "lib/sched/scheduler.h"

namespace hpcq::sched {
namespace {

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = resource::discover_topology("core:4 pu:1");
    ASSERT_TRUE(t.is_ok());
    for (Rank r = 1; r <= 3; ++r)
      ASSERT_TRUE(pool_.add_node(r, "n" + std::to_string(r), *t).is_ok());
    snap_.pool = &pool_;
    for (JobId id = 1; id <= 4; ++id) {
      PendingJob j;
      j.id = id;
      j.submit_time = 100 - static_cast<TimeUs>(id);  // later ids submitted earlier
      j.request.ntasks = 4;
      snap_.queue.push_back(j);
    }
  }
  resource::NodePool pool_;
  Snapshot snap_;
};

std::vector<JobId> ids(const std::vector<const PendingJob*>& q) {
  std::vector<JobId> out;
  for (const PendingJob* j : q) out.push_back(j->id);
  return out;
}

TEST_F(SessionTest, JobOrderHooksThenSubmitTimeThenId) {
  Session plain(snap_);
  EXPECT_EQ(ids(plain.ordered_queue()), (std::vector<JobId>{4, 3, 2, 1}));

  Session hooked(snap_);
  // Even ids first; no opinion otherwise.
  hooked.add_job_order("even", [](const PendingJob& a, const PendingJob& b) {
    return static_cast<int>(b.id % 2 == 0) - static_cast<int>(a.id % 2 == 0);
  });
  EXPECT_EQ(ids(hooked.ordered_queue()), (std::vector<JobId>{4, 2, 3, 1}));
}

TEST_F(SessionTest, PredicatesAndScoresShapePlacement) {
  Session session(snap_);
  session.add_predicate(
      "not-n1", [](const PendingJob&, const resource::NodeState& n) { return n.rank() != 1; });
  session.add_node_score("high-rank", [](const PendingJob&, const resource::NodeState& n) {
    return static_cast<double>(n.rank());
  });
  auto a = session.place(snap_.queue[0]);
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->nodes.size(), 1u);
  EXPECT_EQ(a->nodes[0].rank, 3u);
  PendingJob wide = snap_.queue[0];
  wide.request.ntasks = 12;  // needs all three nodes, but n1 is excluded
  EXPECT_FALSE(session.place(wide).has_value());
  EXPECT_FALSE(session.fits_when_idle(wide));
}

TEST_F(SessionTest, NodeListBindsAJobToThoseNodes) {
  PendingJob bound = snap_.queue[0];
  bound.nodelist = {2};
  snap_.queue[0] = bound;
  Session session(snap_);
  EXPECT_TRUE(session.has_predicates());  // placement depends on the job now
  auto a = session.place(bound);
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->nodes.size(), 1u);
  EXPECT_EQ(a->nodes[0].rank, 2u);
  bound.request.ntasks = 8;  // two nodes' worth, but only n2 is allowed
  EXPECT_FALSE(session.place(bound).has_value());
  EXPECT_FALSE(session.fits_when_idle(bound));
  Session unbound(snap_);
  EXPECT_TRUE(unbound.place(snap_.queue[1]).has_value());
}

TEST_F(SessionTest, StatementCommitsOrDiscardsTogether) {
  Session session(snap_);
  {
    Statement st = session.statement();
    ASSERT_TRUE(st.allocate(snap_.queue[0], *session.place(snap_.queue[0])).is_ok());
    ASSERT_TRUE(st.allocate(snap_.queue[1], *session.place(snap_.queue[1])).is_ok());
    EXPECT_EQ(session.pool().free_cores(1) + session.pool().free_cores(2), 0);
    // Same cores again: refused, nothing more taken.
    resource::NodeAllocation part;
    part.rank = 1;
    part.cores = {0};
    EXPECT_EQ(st.allocate(snap_.queue[2], {{part}}).code(), Code::kFailedPrecondition);
    st.discard();
  }
  EXPECT_EQ(session.pool().free_cores(1), 4);
  EXPECT_EQ(session.pool().free_cores(2), 4);
  EXPECT_EQ(pool_.free_cores(1), 4);  // the snapshot's pool is never touched
  {
    Statement st = session.statement();
    ASSERT_TRUE(st.allocate(snap_.queue[0], *session.place(snap_.queue[0])).is_ok());
    // Destroyed without commit: discarded.
  }
  EXPECT_EQ(session.pool().free_cores(1), 4);
  Statement st = session.statement();
  ASSERT_TRUE(st.allocate(snap_.queue[3], *session.place(snap_.queue[3])).is_ok());
  st.commit();
  session.add_decision(Reserve{snap_.queue[2].id, 5000});
  Decisions d = session.take_decisions();
  ASSERT_EQ(d.decisions.size(), 2u);
  EXPECT_EQ(std::get<Start>(d.decisions[0]).job, 4u);
  EXPECT_EQ(std::get<Reserve>(d.decisions[1]).time, 5000);
  EXPECT_EQ(session.pool().free_cores(1), 0);
}

TEST_F(SessionTest, JobReadyHooksKeepAJobOffEveryPath) {
  Session session(snap_);
  session.add_job_ready("not-2", [](const PendingJob& j) { return j.id != 2; });
  const PendingJob& two = snap_.queue[1];
  EXPECT_FALSE(session.job_ready(two));
  EXPECT_TRUE(session.job_ready(snap_.queue[0]));
  EXPECT_FALSE(session.place(two).has_value());
  EXPECT_TRUE(session.candidates(two).empty());
  EXPECT_FALSE(session.fits_when_idle(two));  // passed over, not waited for
  EXPECT_TRUE(session.has_predicates());
  resource::NodeAllocation part;
  part.rank = 1;
  part.cores = {0, 1, 2, 3};
  Statement st = session.statement();
  EXPECT_EQ(st.allocate(two, {{part}}).code(), Code::kFailedPrecondition);
  EXPECT_EQ(session.pool().free_cores(1), 4);
  session.hold(1);
  EXPECT_TRUE(session.held(1));
  EXPECT_FALSE(session.place(snap_.queue[0]).has_value());
}

TEST_F(SessionTest, EveryActionSkipsAJobThatIsNotReady) {
  for (const std::vector<std::string>& actions :
       {std::vector<std::string>{"allocate"}, std::vector<std::string>{"backfill"}}) {
    auto s = Scheduler::create({actions, {"fcfs"}, {}});
    ASSERT_TRUE(s.is_ok());
    Session session(snap_);
    session.add_job_ready("not-3", [](const PendingJob& j) { return j.id != 3; });
    for (const auto& entry : action_registry()) {
      if (entry.name != actions[0]) continue;
      auto action = entry.make({});
      ASSERT_TRUE(action.is_ok());
      (*action)->execute(session);
    }
    std::vector<JobId> started;
    for (const Decision& d : session.take_decisions().decisions) {
      if (const Start* st = std::get_if<Start>(&d)) started.push_back(st->job);
    }
    // Job 3 is second in order (submitted before 2 and 1) and is skipped,
    // not waited for: 4, 2 and 1 start... three nodes of 4 cores.
    EXPECT_EQ(started, (std::vector<JobId>{4, 2, 1})) << actions[0];
  }
}

TEST_F(SessionTest, AllocationHooksSeeAppliedAndUndonePlacements) {
  Session session(snap_);
  int cores = 0;
  session.add_on_allocate(
      "count", [&](const PendingJob&, const resource::Allocation& a) { cores += a.total_cores(); });
  session.add_on_deallocate(
      "count", [&](const PendingJob&, const resource::Allocation& a) { cores -= a.total_cores(); });
  // At most one node per job.
  session.add_allocatable("one-node", [](const PendingJob&, const resource::Allocation& a) {
    return a.nodes.size() <= 1;
  });
  {
    Statement st = session.statement();
    ASSERT_TRUE(st.allocate(snap_.queue[0], *session.place(snap_.queue[0])).is_ok());
    ASSERT_TRUE(st.allocate(snap_.queue[1], *session.place(snap_.queue[1])).is_ok());
    EXPECT_EQ(cores, 8);
  }  // discarded
  EXPECT_EQ(cores, 0);
  PendingJob wide = snap_.queue[0];
  wide.request.ntasks = 8;
  EXPECT_FALSE(session.place(wide).has_value());
  EXPECT_FALSE(session.fits_when_idle(wide));
  Statement st = session.statement();
  ASSERT_TRUE(st.allocate(snap_.queue[2], *session.place(snap_.queue[2])).is_ok());
  st.commit();
  EXPECT_EQ(cores, 4);
}

}  // namespace
}  // namespace hpcq::sched
