// Advance reservations in the Session.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/resource/hwloc_import.h"
#include "lib/sched/scheduler.h"
#include "lib/sched/session.h"
#include "tests/unit/sched/fixtures.h"

namespace hpcq::sched {
namespace {

using namespace fixture;  // make_pool, pending, running, started, preempted, run

constexpr TimeUs kNow = 1'000'000 * kUsPerSecond;
constexpr TimeUs kHour = 3600 * kUsPerSecond;

std::vector<Rank> ranks(const resource::Allocation& a) {
  std::vector<Rank> out;
  for (const auto& n : a.nodes) out.push_back(n.rank);
  return out;
}

// n1 reserved for uid 42 over [now + 1 h, now + 3 h).
Snapshot reserved_snapshot(const resource::NodePool& pool) {
  Snapshot snap;
  snap.now = kNow;
  snap.pool = &pool;
  snap.reservations.push_back({"maint", {1}, kNow + kHour, kNow + 3 * kHour, {42}, {"physics"}});
  return snap;
}

TEST(ReservationTest, AJobThatWouldOverlapIsKeptOffTheNodes) {
  resource::NodePool pool = make_pool(2);
  Snapshot snap = reserved_snapshot(pool);
  Session session(snap);
  const PendingJob long_job = pending(1, 4, "", 1, 2 * 3600);
  auto a = session.place(long_job);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(ranks(*a), (std::vector<Rank>{2}));
  // Both nodes' worth: cannot fit without n1.
  EXPECT_FALSE(session.place(pending(2, 8, "", 1, 2 * 3600)).has_value());
  EXPECT_FALSE(session.place(pending(3, 8, "", 1, 0)).has_value());  // no limit: forever
  // But it would on the idle cluster once the reservation is over: wait.
  EXPECT_TRUE(session.fits_when_idle(pending(2, 8, "", 1, 2 * 3600)));
  // Ending by the reservation's start is fine.
  auto short_job = session.place(pending(4, 8, "", 1, 3600));
  ASSERT_TRUE(short_job.has_value());
  EXPECT_EQ(ranks(*short_job), (std::vector<Rank>{1, 2}));
  // Statement::allocate refuses n1 for the long job however it is placed.
  resource::NodeAllocation part;
  part.rank = 1;
  part.node = "n1";
  part.cores = {0};
  part.numa = {0};
  part.ntasks = 1;
  Statement st = session.statement();
  EXPECT_EQ(st.allocate(pending(5, 1, "", 1, 2 * 3600), {{part}}).code(),
            Code::kFailedPrecondition);
  EXPECT_EQ(session.candidates_any_time(long_job).size(), 2u);
}

TEST(ReservationTest, EveryActionHonoursIt) {
  resource::NodePool pool = make_pool(2);
  Snapshot snap = reserved_snapshot(pool);
  snap.running.push_back(running(pool, 100, {2}, {0, 1, 2, 3}, "", 0));
  snap.queue.push_back(pending(1, 4, "", 1, 2 * 3600));
  snap.queue.push_back(pending(2, 4, "", 1, 0));
  EXPECT_EQ(started(run(snap, {"allocate"}, {"fcfs"})), (std::vector<JobId>{}));
  EXPECT_EQ(started(run(snap, {"allocate", "backfill"}, {"fcfs"})), (std::vector<JobId>{}));
  EXPECT_EQ(started(run(snap, {"backfill"}, {"fcfs"})), (std::vector<JobId>{}));
  snap.queue.push_back(pending(3, 4, "", 1, 1800));  // ends in time
  EXPECT_EQ(started(run(snap, {"allocate", "backfill"}, {"fcfs"})), (std::vector<JobId>{3}));
  // Without the reservation the first job simply starts.
  snap.reservations.clear();
  EXPECT_EQ(started(run(snap, {"allocate"}, {"fcfs"})), (std::vector<JobId>{1}));
}

TEST(ReservationTest, AdmittedUsersAreNotRestrictedOthersOnlyAroundTheWindow) {
  resource::NodePool pool = make_pool(1);
  Snapshot snap = reserved_snapshot(pool);
  PendingJob mine = pending(1, 4, "", 42, 3600);
  PendingJob by_account = pending(2, 4, "", 7, 3600);
  by_account.account = "physics";
  PendingJob other = pending(3, 4, "", 7, 3600);
  {
    Session before(snap);  // the window has not begun; 1 h ends right at its start
    EXPECT_TRUE(before.place(other).has_value());
    other.time_limit_s = 3601;  // would run into the window
    EXPECT_FALSE(before.place(other).has_value());
    mine.time_limit_s = 3 * 3600;  // its own users may run into it, and past it
    EXPECT_TRUE(before.place(mine).has_value());
  }
  snap.now = kNow + kHour;
  {
    Session inside(snap);
    EXPECT_TRUE(inside.place(mine).has_value());
    EXPECT_TRUE(inside.place(by_account).has_value());
    EXPECT_FALSE(inside.place(pending(4, 4, "", 7, 60)).has_value());  // not admitted
  }
  // After the window the nodes are everyone's again.
  snap.now = kNow + 3 * kHour;
  {
    Session after(snap);
    EXPECT_TRUE(after.place(pending(5, 4, "", 7, 60)).has_value());
  }
  // Through the scheduler, inside the window: only the admitted job starts.
  snap.now = kNow + kHour;
  mine.time_limit_s = 3600;
  snap.queue = {pending(6, 4, "", 7, 60), mine};
  EXPECT_EQ(started(run(snap, {"allocate", "backfill"}, {"fcfs"})), (std::vector<JobId>{1}));
}

TEST(ReservationTest, AnExpiredReservationHasNoEffect) {
  resource::NodePool pool = make_pool(1);
  Snapshot snap = reserved_snapshot(pool);
  snap.now = kNow + 3 * kHour;  // == end: over
  Session session(snap);
  EXPECT_TRUE(session.place(pending(1, 4, "", 1, 0)).has_value());
  EXPECT_FALSE(session.has_predicates());
}

}  // namespace
}  // namespace hpcq::sched
