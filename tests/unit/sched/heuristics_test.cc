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
  EXPECT_EQ(order(sjf, {job(1, 0, 4, 300), job(2, 5, 1, 100), job(3, 1, 8, 100), job(4, 1, 1, 100)},
                  10),
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
  EXPECT_EQ(order(wfp3, {job(1, 0, 4, 100), job(2, 0, 4, 50), job(3, 0, 8, 100), job(4, 90, 64, 100)},
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
  EXPECT_EQ(order(unicep, {job(1, 0, 16, 100), job(2, 0, 4, 10)}, 100),
            (std::vector<JobId>{2, 1}));
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

}  // namespace
}  // namespace hpcq::sched
