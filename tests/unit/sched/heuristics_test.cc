#include "lib/sched/plugins/heuristics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "lib/sched/registry.h"
#include "lib/sched/scheduler.h"

namespace hpcq::sched {
namespace {

constexpr TimeUs kS = kUsPerSecond;

PendingJob job(JobId id, std::int64_t submit_s, int procs, std::int64_t req_s) {
  PendingJob j;
  j.id = id;
  j.submit_time = submit_s * kS;
  j.request.ntasks = procs;
  j.request.cpus_per_task = 1;
  j.time_limit_s = req_s;
  return j;
}

// The queue's ids in the order the plugin (through the Session) puts them.
std::vector<JobId> order(Plugin& plugin, std::vector<PendingJob> queue, std::int64_t now_s) {
  Snapshot snapshot;
  snapshot.now = now_s * kS;
  snapshot.queue = std::move(queue);
  Session session(snapshot);
  plugin.on_session_open(session);
  std::vector<JobId> ids;
  for (const PendingJob* j : session.ordered_queue()) ids.push_back(j->id);
  return ids;
}

TEST(Heuristics, SjfOrdersByRequestThenSubmitThenId) {
  SjfPlugin sjf;
  EXPECT_EQ(
      order(sjf, {job(1, 0, 4, 300), job(2, 5, 1, 100), job(3, 1, 8, 100), job(4, 1, 1, 100)}, 10),
      (std::vector<JobId>{3, 4, 2, 1}));
  // No limit counts as the longest request.
  EXPECT_EQ(order(sjf, {job(1, 0, 1, 0), job(2, 5, 1, 1000000)}, 10), (std::vector<JobId>{2, 1}));
}

TEST(Heuristics, Wfp3ScoreIsTheirFormula) {
  // wait 100 s, request 50 s, 4 procs: -(100/50)^3 * 4 = -32.
  EXPECT_DOUBLE_EQ(wfp3_score(job(1, 0, 4, 50), 100 * kS), -32.0);
  // The larger (wait/req)^3 * procs goes first: job 2 waited as long with a
  // shorter request; job 3 has the same ratio as job 1 but more processors.
  Wfp3Plugin wfp3;
  EXPECT_EQ(
      order(wfp3, {job(1, 0, 4, 100), job(2, 0, 4, 50), job(3, 0, 8, 100), job(4, 90, 64, 100)},
            100),
      (std::vector<JobId>{2, 3, 1, 4}));
}

TEST(Heuristics, Wfp3ReordersAsTimePasses) {
  Wfp3Plugin wfp3;
  // At t=20 job 1 (submitted at 0) leads; 1000 s later job 2's shorter
  // request makes its ratio grow faster.
  const std::vector<PendingJob> q = {job(1, 0, 1, 100), job(2, 10, 1, 20)};
  EXPECT_EQ(order(wfp3, q, 11), (std::vector<JobId>{1, 2}));
  EXPECT_EQ(order(wfp3, q, 1000), (std::vector<JobId>{2, 1}));
}

TEST(Heuristics, UnicepScoreIsTheirFormula) {
  // wait 80 s, 4 procs (log2 = 2), request 10 s: -80 / 20 = -4.
  EXPECT_NEAR(unicep_score(job(1, 20, 4, 10), 100 * kS), -4.0, 1e-9);
  // One processor: log2(1 + 1e-15) is tiny, so a waiting one-core job goes
  // first, as in their code.
  UnicepPlugin unicep;
  EXPECT_EQ(order(unicep, {job(1, 0, 4, 10), job(2, 50, 1, 1000)}, 100),
            (std::vector<JobId>{2, 1}));
  EXPECT_EQ(order(unicep, {job(1, 0, 16, 100), job(2, 0, 4, 10)}, 100), (std::vector<JobId>{2, 1}));
}

TEST(Heuristics, F1ScoreIsTheirFormula) {
  EXPECT_NEAR(f1_score(job(1, 1000, 4, 100)), 2.0 * 4 + 870.0 * 3.0, 1e-9);
  // Zero submit time uses 0.1, as theirs.
  EXPECT_NEAR(f1_score(job(1, 0, 1, 10)), 1.0 + 870.0 * -1.0, 1e-9);
  F1Plugin f1;
  // Earlier submission dominates unless the job is long and wide.
  EXPECT_EQ(order(f1, {job(1, 100, 1, 10), job(2, 1000, 1, 10), job(3, 100, 256, 100000)}, 2000),
            (std::vector<JobId>{1, 2, 3}));
}

TEST(Heuristics, RegisteredByNameWithoutOptions) {
  for (const char* name : {"sjf", "wfp3", "unicep", "f1"}) {
    auto ok = Scheduler::create({{"allocate", "backfill"}, {name}});
    EXPECT_TRUE(ok.is_ok()) << name << ": " << ok.status().to_string();
    auto bad = Scheduler::create({{"allocate"}, {name}, {{std::string(name) + ".x", "1"}}});
    EXPECT_FALSE(bad.is_ok()) << name;
  }
}

TEST(Heuristics, RlSchedulerWaitIsMinusOneMinusSubmit) {
  // Their wait is scheduled_time - submit with scheduled_time = -1: for a job
  // submitted at 99 s it is -100 s whatever now is.
  // wfp3: -(-100 / 50)^3 * 4 = 32; unicep: -(-100) / (2 * 10) = 5.
  auto wfp3 = Wfp3Plugin::create({{"wait", "rlscheduler"}});
  ASSERT_TRUE(wfp3.is_ok());
  auto unicep = UnicepPlugin::create({{"wait", "rlscheduler"}});
  ASSERT_TRUE(unicep.is_ok());
  EXPECT_DOUBLE_EQ(wfp3_score(job(1, 99, 4, 50), -kS), 32.0);
  EXPECT_NEAR(unicep_score(job(1, 99, 4, 10), -kS), 5.0, 1e-9);
  // The true wait puts job 2 first at t = 1000 (-(100/5)^3 = -8000 against
  // -(1000/100)^3 = -1000); their wait never changes with the clock and puts
  // the earlier job first (-(-1/100)^3 ~ 1e-6 against -(-901/5)^3 ~ 5.9e6).
  const std::vector<PendingJob> q = {job(1, 0, 1, 100), job(2, 900, 1, 5)};
  Wfp3Plugin now_wait;
  EXPECT_EQ(order(now_wait, q, 1000), (std::vector<JobId>{2, 1}));
  EXPECT_EQ(order(**wfp3, q, 1000), (std::vector<JobId>{1, 2}));
  EXPECT_EQ(order(**wfp3, q, 5000), (std::vector<JobId>{1, 2}));
  // "now" is the default and may be given.
  EXPECT_TRUE(Wfp3Plugin::create({{"wait", "now"}}).is_ok());
  EXPECT_TRUE(
      Scheduler::create({{"allocate"}, {"unicep"}, {{"unicep.wait", "rlscheduler"}}}).is_ok());
}

TEST(Heuristics, WaitOptionRejectsBadValuesAndUnknownOptions) {
  auto bad = Wfp3Plugin::create({{"wait", "later"}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("wfp3.wait"), std::string::npos) << bad.status().message();
  auto unknown = UnicepPlugin::create({{"speed", "1"}});
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("unicep.speed"), std::string::npos);
  EXPECT_FALSE(Scheduler::create({{"allocate"}, {"sjf"}, {{"sjf.wait", "rlscheduler"}}}).is_ok());
}

}  // namespace
}  // namespace hpcq::sched
