#include "lib/sim/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/sim/metrics.h"
#include "lib/sim/policy.h"

namespace hpcq::sim {
namespace {

SimOptions fcfs_on(int nodes, int cores_per_node) {
  SimOptions options;
  options.cluster.nodes = nodes;
  options.cluster.cores_per_node = cores_per_node;
  options.scheduler = *policy_config("fcfs");
  return options;
}

std::vector<std::string> run_events(const std::vector<SimJob>& jobs, const SimOptions& options,
                                    SimResult* result = nullptr) {
  std::vector<std::string> events;
  auto r = simulate(jobs, options, [&](const SimEvent& e) { events.push_back(format_event(e)); });
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  if (result != nullptr && r.is_ok()) *result = *r;
  return events;
}

// Four jobs on one node of 4 cores, worked out by hand:
//   job 1: submit 0, runs 10 on 2 cores          -> starts 0, ends 10
//   job 2: submit 0, runs 5 on 3 cores           -> does not fit beside job 1: 10..15
//   job 3: submit 1, runs 2 on 1 core            -> fits at 1, but FCFS keeps it behind
//                                                   job 2: 10..12 beside job 2
//   job 4: submit 12, runs 4 on 4 cores          -> waits for job 2: 15..19
// waits 0, 10, 9, 3; makespan 19; work 20 + 15 + 2 + 16 = 53 core-s.
std::vector<SimJob> hand_trace() {
  return {
      {1, 100, 0, 10, 20, 2, 0},
      {2, 100, 0, 5, 5, 3, 0},
      {3, 101, 1, 2, 2, 1, 0},
      {4, 101, 12, 4, 4, 4, 0},
  };
}

TEST(SimulatorTest, FcfsHandTrace) {
  SimResult result;
  const std::vector<std::string> events = run_events(hand_trace(), fcfs_on(1, 4), &result);
  const std::vector<std::string> expected = {
      "0 1 start n0:0-1", "10 1 end n0:0-1", "10 2 start n0:0-2", "10 3 start n0:3",
      "12 3 end n0:3",    "15 2 end n0:0-2", "15 4 start n0:0-3", "19 4 end n0:0-3",
  };
  EXPECT_EQ(events, expected);

  ASSERT_EQ(result.jobs.size(), 4u);
  std::vector<std::int64_t> starts;
  for (JobId id = 1; id <= 4; ++id) {
    auto it = std::find_if(result.jobs.begin(), result.jobs.end(),
                           [&](const JobOutcome& o) { return o.id == id; });
    ASSERT_NE(it, result.jobs.end());
    starts.push_back(it->start_s);
    EXPECT_FALSE(it->backfilled);
  }
  EXPECT_EQ(starts, (std::vector<std::int64_t>{0, 10, 10, 15}));

  const Metrics m = compute_metrics(result.jobs, 4);
  EXPECT_EQ(m.jobs, 4u);
  EXPECT_EQ(m.makespan_s, 19);
  EXPECT_DOUBLE_EQ(m.utilization, 53.0 / (4 * 19));
  EXPECT_DOUBLE_EQ(m.mean_wait_s, 22.0 / 4);
  EXPECT_DOUBLE_EQ(m.p95_wait_s, 9.85);  // sorted 0 3 9 10, position 2.85
  // max(1, (w + r) / max(r, 10)): 1, 1.5, 1.1, max(1, 0.7)
  EXPECT_DOUBLE_EQ(m.mean_bsld_10, (1 + 1.5 + 1.1 + 1) / 4);
  // (w + r) / 60 unclamped: 10, 15, 11, 7 over 60; position 2.85 of 7 10 11 15
  EXPECT_NEAR(m.p95_bsld_60, (11 + 0.85 * 4) / 60.0, 1e-12);
  EXPECT_EQ(m.backfilled, 0u);
  ASSERT_EQ(m.users.size(), 2u);
  EXPECT_EQ(m.users[0].user, 100);
  EXPECT_EQ(m.users[0].jobs, 2u);
  EXPECT_DOUBLE_EQ(m.users[0].mean_wait_s, 5.0);
  EXPECT_DOUBLE_EQ(m.users[1].core_seconds, 2 + 16);
}

// --cluster FILE: nodes of different sizes, in group order. A job fits on
// the fewest nodes that hold it, so the 4-core job takes the second node.
TEST(SimulatorTest, ClusterOfNodeGroups) {
  SimOptions options = fcfs_on(1, 1);
  options.cluster.groups = {{1, flat_node_topology(2)}, {1, flat_node_topology(4)}};
  EXPECT_EQ(options.cluster.node_count(), 2);
  EXPECT_EQ(options.cluster.total_cores(), 6);
  const std::vector<SimJob> jobs = {{1, 100, 0, 10, 10, 4, 0}, {2, 100, 0, 5, 5, 2, 0}};
  EXPECT_EQ(run_events(jobs, options), (std::vector<std::string>{
                                           "0 1 start n1:0-3",
                                           "0 2 start n0:0-1",
                                           "5 2 end n0:0-1",
                                           "10 1 end n1:0-3",
                                       }));
  const std::vector<SimJob> too_big = {{1, 100, 0, 10, 10, 7, 0}};
  auto r = simulate(too_big, options);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("the cluster has 6"), std::string::npos)
      << r.status().message();
  options.cluster.groups.push_back({0, flat_node_topology(4)});
  EXPECT_FALSE(simulate(jobs, options).is_ok());
}

// Constraints over the groups' features and licenses, as hpcqd honours them.
TEST(SimulatorTest, ConstraintsAndLicenses) {
  SimOptions options = fcfs_on(1, 1);
  options.cluster.groups = {{1, flat_node_topology(2), {"a100"}},
                            {1, flat_node_topology(2), {"v100", "ib"}}};
  options.site.licenses = {{"matlab", 1}};
  options.scheduler.plugins.push_back("licenses");
  std::vector<SimJob> jobs = {{1, 100, 0, 10, 10, 1, 0},
                              {2, 100, 0, 10, 10, 1, 0},
                              {3, 100, 0, 5, 5, 1, 0},
                              {4, 100, 0, 5, 5, 1, 0}};
  jobs[0].constraint = "v100&ib";  // only n1
  jobs[1].constraint = "v100";     // n1 too, beside job 1
  jobs[2].licenses = {{"matlab", 1}};
  jobs[3].licenses = {{"matlab", 1}};  // waits for job 3's license
  EXPECT_EQ(run_events(jobs, options), (std::vector<std::string>{
                                           "0 1 start n1:0",
                                           "0 2 start n1:1",
                                           "0 3 start n0:0",
                                           "5 3 end n0:0",
                                           "5 4 start n0:0",
                                           "10 1 end n1:0",
                                           "10 2 end n1:1",
                                           "10 4 end n0:0",
                                       }));
  jobs[0].constraint = "h100";
  auto r = simulate(jobs, options);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "job 1: constraint 'h100' matches no node of the cluster");
}

// Gres per node over the groups' gres: a job waits for the units it asks.
TEST(SimulatorTest, GresAreHeldPerNode) {
  SimOptions options = fcfs_on(1, 1);
  options.cluster.groups = {{1, flat_node_topology(2), {}, {}},
                            {1, flat_node_topology(2), {}, {{"nvme", 1}}}};
  std::vector<SimJob> jobs = {{1, 100, 0, 10, 10, 1, 0}, {2, 100, 0, 5, 5, 1, 0}};
  jobs[0].gres = {{"nvme", 1}};  // only n1 has one
  jobs[1].gres = {{"nvme", 1}};  // waits for it, beside a free core
  EXPECT_EQ(run_events(jobs, options), (std::vector<std::string>{
                                           "0 1 start n1:0",
                                           "10 1 end n1:0",
                                           "10 2 start n1:0",
                                           "15 2 end n1:0",
                                       }));
  jobs[0].gres = {{"nvme", 2}};
  auto r = simulate(jobs, options);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "job 1: gres fits no node of the cluster its constraint allows");
}

TEST(SimulatorTest, UserEstimatesOrExactOnlyChangeWhatTheSchedulerIsTold) {
  // FCFS ignores estimates: the schedule is the same.
  SimOptions exact = fcfs_on(1, 4);
  exact.estimates = Estimates::kExact;
  EXPECT_EQ(run_events(hand_trace(), exact), run_events(hand_trace(), fcfs_on(1, 4)));
}

TEST(SimulatorTest, KillAtLimitEndsJobsAtTheirRequest) {
  SimOptions options = fcfs_on(1, 4);
  options.kill_at_limit = true;
  std::vector<SimJob> jobs = hand_trace();
  jobs[0].requested_s = 4;  // runs 10 in the trace
  SimResult result;
  const std::vector<std::string> events = run_events(jobs, options, &result);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[1], "4 1 end n0:0-1");
}

TEST(SimulatorTest, EasyBackfillsThroughTheSameScheduler) {
  // Job 3 (1 core, 2 s) fits beside job 1 at time 1 and ends long before job
  // 2's reservation: EASY starts it at once, and it counts as backfilled.
  SimOptions easy = fcfs_on(1, 4);
  easy.scheduler = *policy_config("easy");
  SimResult result;
  const std::vector<std::string> events = run_events(hand_trace(), easy, &result);
  const std::vector<std::string> expected = {
      "0 1 start n0:0-1",  "1 3 start n0:2",  "3 3 end n0:2",      "10 1 end n0:0-1",
      "10 2 start n0:0-2", "15 2 end n0:0-2", "15 4 start n0:0-3", "19 4 end n0:0-3",
  };
  EXPECT_EQ(events, expected);
  const Metrics m = compute_metrics(result.jobs, 4);
  EXPECT_EQ(m.backfilled, 1u);
  EXPECT_DOUBLE_EQ(m.mean_wait_s, (0 + 10 + 0 + 3) / 4.0);
}

TEST(SimulatorTest, ZeroRuntimeJobsFreeTheirCoresAtOnce) {
  // Job 1 takes the whole node for 0 s; job 2, queued at the same time,
  // starts in a second cycle at that same time.
  const std::vector<SimJob> jobs = {{1, 0, 5, 0, 1, 2, 0}, {2, 0, 5, 3, 3, 2, 0}};
  const std::vector<std::string> events = run_events(jobs, fcfs_on(1, 2));
  const std::vector<std::string> expected = {"5 1 start n0:0-1", "5 1 end n0:0-1",
                                             "5 2 start n0:0-1", "8 2 end n0:0-1"};
  EXPECT_EQ(events, expected);
}

TEST(SimulatorTest, JobsSpreadOverNodes) {
  const std::vector<SimJob> jobs = {{1, 0, 0, 3, 3, 6, 0}};
  const std::vector<std::string> events = run_events(jobs, fcfs_on(2, 4));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], "0 1 start n0:0-3 n1:0-1");
}

// A deterministic pseudo-random trace (a fixed LCG, not std::rand).
std::vector<SimJob> random_trace(int n) {
  std::uint64_t state = 12345;
  auto next = [&](std::uint64_t mod) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % mod;
  };
  std::vector<SimJob> jobs;
  std::int64_t t = 0;
  for (int i = 0; i < n; ++i) {
    t += static_cast<std::int64_t>(next(4));  // many equal submit times
    const auto run = static_cast<std::int64_t>(next(500));
    jobs.push_back({static_cast<JobId>(n - i), static_cast<std::int64_t>(next(5)), t, run,
                    run + static_cast<std::int64_t>(next(300)), 1 + static_cast<int>(next(64)), 0});
  }
  return jobs;
}

TEST(SimulatorTest, DeterministicEventLog) {
  const std::vector<SimJob> jobs = random_trace(2000);
  const std::vector<std::string> a = run_events(jobs, fcfs_on(4, 16));
  const std::vector<std::string> b = run_events(jobs, fcfs_on(4, 16));
  EXPECT_EQ(a.size(), 4000u);
  EXPECT_EQ(a, b);
  // Input order does not matter: the simulator orders by (submit, id).
  std::vector<SimJob> reversed(jobs.rbegin(), jobs.rend());
  EXPECT_EQ(run_events(reversed, fcfs_on(4, 16)), a);
}

TEST(SimulatorTest, ImpossibleJobIsAnErrorOrSkipped) {
  std::vector<SimJob> jobs = hand_trace();
  jobs.push_back({9, 1, 3, 10, 10, 5, 42});
  auto r = simulate(jobs, fcfs_on(1, 4));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "job 9 (trace line 42) needs 5 cores; the cluster has 4");

  SimOptions skip = fcfs_on(1, 4);
  skip.skip_impossible = true;
  auto s = simulate(jobs, skip);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->skipped, 1u);
  EXPECT_EQ(s->jobs.size(), 4u);
}

TEST(SimulatorTest, BadInputIsRejected) {
  std::vector<SimJob> dup = hand_trace();
  dup[1].id = 1;
  auto d = simulate(dup, fcfs_on(1, 4));
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().message(), "duplicate job id 1");

  std::vector<SimJob> negative = {{1, 0, 0, -3, 3, 1, 7}};
  auto n = simulate(negative, fcfs_on(1, 4));
  ASSERT_FALSE(n.is_ok());
  EXPECT_EQ(n.status().message(), "job 1 (trace line 7): negative runtime -3");

  auto c = simulate(hand_trace(), fcfs_on(0, 4));
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);

  SimOptions bad_action = fcfs_on(1, 4);
  bad_action.scheduler.actions = {"nosuch"};
  auto b = simulate(hand_trace(), bad_action);
  ASSERT_FALSE(b.is_ok());
  EXPECT_EQ(b.status().code(), Code::kInvalidArgument);
}

// A stand-in for a preemption action: while job 1 runs and job 2 waits, it
// preempts job 1 for job 2; otherwise the "sjf" scheduler decides (job 2's
// shorter request puts it first once job 1 is back in the queue).
std::function<sched::Decisions(const sched::Snapshot&)> fake_preemptor(PreemptMode mode) {
  auto sjf = std::make_shared<sched::Scheduler>(
      std::move(sched::Scheduler::create({{"allocate"}, {"sjf"}})).value());
  return [sjf, mode](const sched::Snapshot& snapshot) {
    const bool one_runs = std::any_of(snapshot.running.begin(), snapshot.running.end(),
                                      [](const sched::RunningJob& j) { return j.id == 1; });
    const bool two_waits = std::any_of(snapshot.queue.begin(), snapshot.queue.end(),
                                       [](const sched::PendingJob& j) { return j.id == 2; });
    if (one_runs && two_waits) return sched::Decisions{{sched::Preempt{1, 2, mode}}};
    return sjf->cycle(snapshot);
  };
}

std::vector<SimJob> preempt_trace() {
  return {{1, 0, 0, 100, 100, 4, 0, "low"}, {2, 0, 10, 5, 5, 4, 0, "high"}};
}

TEST(SimulatorTest, RequeuedVictimLosesItsWorkAndRunsAgain) {
  SimOptions options = fcfs_on(1, 4);
  options.decide = fake_preemptor(PreemptMode::kRequeue);
  SimResult result;
  const std::vector<std::string> events = run_events(preempt_trace(), options, &result);
  const std::vector<std::string> expected = {
      "0 1 start n0:0-3", "10 1 end n0:0-3",   "10 2 start n0:0-3",
      "15 2 end n0:0-3",  "15 1 start n0:0-3", "115 1 end n0:0-3",
  };
  EXPECT_EQ(events, expected);
  EXPECT_EQ(result.preempted, 1u);
  ASSERT_EQ(result.jobs.size(), 2u);  // the cut run leaves no outcome
  EXPECT_EQ(result.jobs[1].id, 1u);
  EXPECT_EQ(result.jobs[1].submit_s, 0);  // its original submit time
  EXPECT_EQ(result.jobs[1].start_s, 15);
  EXPECT_EQ(result.jobs[1].end_s, 115);
  EXPECT_EQ(result.jobs[1].queue, "low");
  const Metrics m = compute_metrics(result.jobs, 4);
  EXPECT_DOUBLE_EQ(m.mean_wait_s, (15 + 0) / 2.0);
  ASSERT_EQ(m.queues.size(), 2u);
  EXPECT_EQ(m.queues[0].queue, "high");
}

TEST(SimulatorTest, CancelledVictimEndsWhereItWasStopped) {
  SimOptions options = fcfs_on(1, 4);
  options.decide = fake_preemptor(PreemptMode::kCancel);
  SimResult result;
  const std::vector<std::string> events = run_events(preempt_trace(), options, &result);
  const std::vector<std::string> expected = {"0 1 start n0:0-3", "10 1 end n0:0-3",
                                             "10 2 start n0:0-3", "15 2 end n0:0-3"};
  EXPECT_EQ(events, expected);
  EXPECT_EQ(result.preempted, 1u);
  ASSERT_EQ(result.jobs.size(), 2u);
  EXPECT_EQ(result.jobs[0].id, 1u);
  EXPECT_EQ(result.jobs[0].end_s, 10);
}

TEST(SimulatorTest, PreemptingAJobThatIsNotRunningIsABug) {
  SimOptions options = fcfs_on(1, 4);
  options.decide = [](const sched::Snapshot&) {
    return sched::Decisions{{sched::Preempt{7, 1, PreemptMode::kRequeue}}};
  };
  auto r = simulate(preempt_trace(), options);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
  EXPECT_EQ(r.status().message(), "scheduler preempted job 7, which is not running");
}

TEST(SimulatorTest, HeuristicPoliciesReorderTheQueue) {
  // One 4-core node kept busy by job 1 until 10; jobs 2 (long) and 3
  // (short) wait. FCFS runs 2 first, SJF runs 3 first.
  const std::vector<SimJob> jobs = {
      {1, 0, 0, 10, 10, 4, 0}, {2, 0, 1, 50, 50, 4, 0}, {3, 0, 2, 5, 5, 4, 0}};
  SimOptions sjf = fcfs_on(1, 4);
  sjf.scheduler = *policy_config("sjf");
  const std::vector<std::string> events = run_events(jobs, sjf);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[2], "10 3 start n0:0-3");
  EXPECT_EQ(run_events(jobs, fcfs_on(1, 4))[2], "10 2 start n0:0-3");
}

TEST(SimulatorTest, UsageIsChargedAtEachRunsEndAndDecays) {
  // Job 1 (user 7) runs 4 cores x 100 s and ends at 100; at job 2's arrival
  // (150) the ledger the scheduler sees holds 400 core-s halved once per
  // 100 s: 400 * 2^-0.5.
  SimOptions options = fcfs_on(1, 4);
  options.half_life_s = 100;
  auto fcfs = std::make_shared<sched::Scheduler>(
      std::move(sched::Scheduler::create({{"allocate"}, {"fcfs"}})).value());
  std::vector<double> seen;  // user 7's usage at each cycle
  options.decide = [fcfs, &seen](const sched::Snapshot& snapshot) {
    EXPECT_NE(snapshot.usage, nullptr);
    if (snapshot.usage != nullptr) seen.push_back(snapshot.usage->usage(7, "", snapshot.now));
    return fcfs->cycle(snapshot);
  };
  auto r = simulate({{1, 7, 0, 100, 100, 4, 0}, {2, 8, 150, 1, 1, 1, 0}}, options);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_DOUBLE_EQ(seen[0], 0.0);
  EXPECT_NEAR(seen[1], 400.0 * std::pow(2.0, -0.5), 1e-9);
  ASSERT_EQ(r->usage.size(), 2u);
  EXPECT_EQ(r->usage[0].uid, 7u);
  EXPECT_DOUBLE_EQ(r->usage[0].core_seconds, 400.0);
  EXPECT_EQ(r->usage[0].as_of, 100 * kUsPerSecond);
  EXPECT_EQ(r->usage[1].uid, 8u);
  EXPECT_DOUBLE_EQ(r->usage[1].core_seconds, 1.0);
}

TEST(SimulatorTest, APreemptedRunIsChargedToo) {
  // Job 1 runs 10 s on 4 cores before it is requeued, then its whole 100 s:
  // 40 + 400 core-s, no decay.
  SimOptions options = fcfs_on(1, 4);
  options.half_life_s = 0;
  options.decide = fake_preemptor(PreemptMode::kRequeue);
  auto r = simulate(preempt_trace(), options);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->usage.size(), 1u);  // both jobs are user 0
  EXPECT_DOUBLE_EQ(r->usage[0].core_seconds, 40.0 + 20.0 + 400.0);
}

TEST(SimulatorTest, MultifactorFavoursTheUserWhoUsedLess) {
  // User 1's job 1 fills the node until 1000; then user 1's job 2 (submitted
  // first) and user 2's job 3 wait. FCFS (and EASY) run job 2 first;
  // multifactor's fair-share factor (user 1 used everything: 2^-2 against
  // user 2's 1) puts job 3 first.
  const std::vector<SimJob> jobs = {
      {1, 1, 0, 1000, 1000, 4, 0}, {2, 1, 10, 10, 10, 4, 0}, {3, 2, 20, 10, 10, 4, 0}};
  SimOptions multifactor = fcfs_on(1, 4);
  multifactor.scheduler = *policy_config("multifactor");
  EXPECT_EQ(run_events(jobs, multifactor)[2], "1000 3 start n0:0-3");
  SimOptions easy = fcfs_on(1, 4);
  easy.scheduler = *policy_config("easy");
  EXPECT_EQ(run_events(jobs, easy)[2], "1000 2 start n0:0-3");
}

TEST(PolicyTest, TableMapsNamesToConfigs) {
  auto fcfs = policy_config("fcfs");
  ASSERT_TRUE(fcfs.is_ok());
  EXPECT_EQ(fcfs->actions, std::vector<std::string>{"allocate"});
  EXPECT_EQ(fcfs->plugins, std::vector<std::string>{"fcfs"});
  EXPECT_TRUE(fcfs->options.empty());

  auto unknown = policy_config("sjf-magic");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_EQ(unknown.status().message(),
            "unknown policy 'sjf-magic' (known: " + policy_names() + ")");
  // Every row names a configuration the scheduler accepts.
  for (const PolicyEntry& p : policies()) {
    auto config = policy_config(p.name);
    ASSERT_TRUE(config.is_ok()) << p.name;
    EXPECT_TRUE(sched::Scheduler::create(*config).is_ok()) << p.name;
  }
}

}  // namespace
}  // namespace hpcq::sim

namespace hpcq::sim {
namespace {

SimOptions gap_options() {
  SimOptions options;
  options.cluster.nodes = 1;
  options.cluster.cores_per_node = 4;
  options.scheduler = *policy_config("gap");
  options.scheduler.options["gap.save_deadline_s"] = "60";
  QueueConfig regular;
  regular.name = "regular";
  QueueConfig gap;
  gap.name = "gap";
  gap.migratable = true;
  options.site.queues = {regular, gap};
  options.site.default_queue = "regular";
  options.checkpoint_s = 20;
  return options;
}

std::map<JobId, std::pair<std::int64_t, std::int64_t>> runs_of(const SimResult& r) {
  std::map<JobId, std::pair<std::int64_t, std::int64_t>> runs;
  for (const JobOutcome& o : r.jobs) runs[o.id] = {o.start_s, o.end_s};
  return runs;
}

// papers/004: one node of 4 cores. Job 1 (regular) runs 0..100 on 2 cores;
// job 2 (gap, 1000 s of work) fills the other 2 at 0; job 3 (regular, 4
// cores) arrives at 50 and is promised 100: within the 60 s save deadline,
// so job 2 is checkpointed at 50 with 50 s done. Job 3 runs 100..110; job 2
// restarts at 110 with 950 s left + 20 s of checkpoint cost: ends 1080.
TEST(SimGap, CheckpointedGapJobKeepsItsWorkAndPaysItsCost) {
  SimOptions options = gap_options();
  std::vector<SimJob> jobs = {
      {1, 1, 0, 100, 100, 2, 0},
      {2, 1, 0, 1000, 1000, 2, 0, "gap"},
      {3, 1, 50, 10, 10, 4, 0},
  };
  auto r = simulate(jobs, options, nullptr);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->checkpointed, 1u);
  EXPECT_DOUBLE_EQ(r->lost_core_seconds, 0);
  EXPECT_DOUBLE_EQ(r->preempted_core_seconds, 100);  // 50 s on 2 cores
  std::map<JobId, std::pair<std::int64_t, std::int64_t>> runs;
  for (const JobOutcome& o : r->jobs) runs[o.id] = {o.start_s, o.end_s};
  EXPECT_EQ(runs[3], (std::pair<std::int64_t, std::int64_t>{100, 110}));  // not delayed
  EXPECT_EQ(runs[2], (std::pair<std::int64_t, std::int64_t>{110, 1080}));

  // Evicted by requeue, the work is lost: 1000 s again from 110.
  options.scheduler.options["gap.evict"] = "requeue";
  r = simulate(jobs, options, nullptr);
  ASSERT_TRUE(r.is_ok());
  EXPECT_DOUBLE_EQ(r->lost_core_seconds, 100);
  for (const JobOutcome& o : r->jobs) runs[o.id] = {o.start_s, o.end_s};
  EXPECT_EQ(runs[2], (std::pair<std::int64_t, std::int64_t>{110, 1110}));

  // In a container at efficiency 0.5 its work takes twice as long.
  options.scheduler.options.erase("gap.evict");
  options.container_efficiency = 0.5;
  jobs.erase(jobs.begin() + 2);  // no eviction
  r = simulate(jobs, options, nullptr);
  ASSERT_TRUE(r.is_ok());
  for (const JobOutcome& o : r->jobs) runs[o.id] = {o.start_s, o.end_s};
  EXPECT_EQ(runs[2], (std::pair<std::int64_t, std::int64_t>{0, 2000}));
}

// A save takes checkpoint_s, but the gap job gives its cores back at once
// (frozen for the dump). Job 3 is promised 1000 (job 1's limit): the
// simulator wakes at 1000 - 60, the gap job is saved from 940 (back in the
// queue at 960, kept out of job 3's cores) and job 3 starts at 1000. When
// job 1 ends early (at 500), job 3 starts at once: the save does not delay
// it, and the gap job loses nothing.
TEST(SimGap, SavesFreeTheCoresAtOnceAndRunByTheDeadline) {
  SimOptions options = gap_options();
  std::vector<SimJob> jobs = {
      {1, 1, 0, 1000, 1000, 2, 0},
      {2, 1, 0, 5000, 5000, 2, 0, "gap"},
      {3, 1, 10, 10, 10, 4, 0},
  };
  auto r = simulate(jobs, options, nullptr);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->checkpointed, 1u);
  EXPECT_EQ(runs_of(*r)[3].first, 1000);
  // Saved at 940 after 940 s of work; back at 1010 (job 3 done) for the
  // rest plus a restore: 4060 + 20.
  EXPECT_EQ(runs_of(*r)[2], (std::pair<std::int64_t, std::int64_t>{1010, 5090}));

  jobs[0].runtime_s = 500;  // ends half-way through its limit
  r = simulate(jobs, options, nullptr);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(runs_of(*r)[3].first, 500);
  EXPECT_DOUBLE_EQ(r->lost_core_seconds, 0);
  // Its image is ready at 520: the rest, 4500 s, plus a restore.
  EXPECT_EQ(runs_of(*r)[2], (std::pair<std::int64_t, std::int64_t>{520, 5040}));
}

// Mode A: saved at the end of every slot (100 s), whatever else happens:
// 0..100 (+10 s until its image is ready), 110..210 (90 s of work after a 10 s restore, +10),
// 220..290 (the last 60 s after a restore).
TEST(SimGap, ModeASavesAtEverySlotEnd) {
  SimOptions options = gap_options();
  options.checkpoint_s = 10;
  options.scheduler.options["gap.mode"] = "a";
  options.scheduler.options["gap.slot_s"] = "100";
  std::vector<SimJob> jobs = {{2, 1, 0, 250, 250, 2, 0, "gap"}};
  auto r = simulate(jobs, options, nullptr);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->checkpointed, 2u);
  EXPECT_DOUBLE_EQ(r->lost_core_seconds, 0);
  EXPECT_EQ(runs_of(*r)[2], (std::pair<std::int64_t, std::int64_t>{220, 290}));
}

}  // namespace
}  // namespace hpcq::sim
