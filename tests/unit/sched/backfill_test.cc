#include "lib/sched/actions/backfill.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <random>

#include "lib/resource/hwloc_import.h"
#include "lib/sched/planner.h"
#include "lib/sched/scheduler.h"

namespace hpcq::sched {
namespace {

constexpr TimeUs kNow = 1000 * kUsPerSecond;

resource::NodePool cluster(int nodes, const std::string& spec) {
  resource::NodePool pool;
  auto t = resource::discover_topology(spec);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  for (int i = 1; i <= nodes; ++i) {
    std::string name = "n";  // not "n" + ...: a false -Wrestrict from GCC 12 at -O3
    name += std::to_string(i);
    EXPECT_TRUE(pool.add_node(static_cast<Rank>(i), name, *t).is_ok());
  }
  return pool;
}

PendingJob job(JobId id, int ntasks, std::int64_t limit_s, int nodes = 0) {
  PendingJob j;
  j.id = id;
  j.submit_time = static_cast<TimeUs>(id);
  j.request.ntasks = ntasks;
  j.request.nodes = nodes;
  j.time_limit_s = limit_s;
  return j;
}

// A running job: `cores` lowest free cores on each of `ranks`, ending at
// kNow + end_s.
struct Run {
  std::vector<Rank> ranks;
  int cores;
  std::int64_t end_s;
};

// One decision, in a form a table can spell: Start on ranks, or Reserve at
// kNow + seconds.
struct Out {
  char kind;  // 'S' start, 'R' reserve
  JobId job;
  std::vector<Rank> ranks = {};
  std::int64_t at_s = 0;
  bool operator==(const Out&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Out& o) {
  os << o.kind << " job " << o.job;
  if (o.kind == 'S') {
    os << " on";
    for (Rank r : o.ranks) os << " " << r;
  } else {
    os << " at +" << o.at_s << "s";
  }
  return os;
}

Out start(JobId id, std::vector<Rank> ranks) { return {'S', id, std::move(ranks)}; }
Out reserve(JobId id, std::int64_t at_s) { return {'R', id, {}, at_s}; }

// The decisions as Outs, after checking that the Starts fit the pool
// together (no core given twice) and that no job is decided twice.
std::vector<Out> outs(const Decisions& d, const resource::NodePool& pool) {
  resource::NodePool check = pool;
  std::vector<Out> out;
  std::vector<JobId> seen;
  for (const Decision& decision : d.decisions) {
    if (const Start* s = std::get_if<Start>(&decision)) {
      EXPECT_TRUE(check.allocate(s->allocation).is_ok()) << "job " << s->job << " double-booked";
      Out o{'S', s->job};
      for (const auto& part : s->allocation.nodes) o.ranks.push_back(part.rank);
      out.push_back(o);
      seen.push_back(s->job);
    } else {
      const Reserve& r = std::get<Reserve>(decision);
      EXPECT_EQ((r.time - kNow) % kUsPerSecond, 0);
      out.push_back(reserve(r.job, (r.time - kNow) / kUsPerSecond));
      seen.push_back(r.job);
    }
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end()) << "a job decided twice";
  return out;
}

struct World {
  int nodes;
  std::string spec;
  std::vector<Run> running;
  std::vector<PendingJob> queue;
};

struct Cycle {
  resource::NodePool pool;
  Snapshot snapshot;
};

Cycle build(const World& s) {
  Cycle c{cluster(s.nodes, s.spec), {}};
  JobId id = 1'000'000;
  for (const Run& run : s.running) {
    RunningJob r;
    r.id = id++;
    for (Rank rank : run.ranks) {
      resource::NodeAllocation part;
      part.rank = rank;
      const resource::NodeState* node = c.pool.find(rank);
      for (int core = 0;
           core < node->total_cores() && static_cast<int>(part.cores.size()) < run.cores; ++core) {
        if (node->core_free(core)) part.cores.push_back(core);
      }
      r.allocation.nodes.push_back(part);
    }
    EXPECT_TRUE(c.pool.allocate(r.allocation).is_ok());
    r.end_estimate = kNow + run.end_s * kUsPerSecond;
    c.snapshot.running.push_back(r);
  }
  c.snapshot.now = kNow;
  c.snapshot.queue = s.queue;
  return c;
}

// depth: "" for allocate alone (no backfill), else reservation_depth.
std::vector<Out> run_cycle(const World& s, const std::string& depth) {
  SchedulerConfig config;
  if (depth.empty()) {
    config.actions = {"allocate"};
  } else {
    config.actions = {"allocate", "backfill"};
    config.options = {{"backfill.reservation_depth", depth}};
  }
  auto scheduler = Scheduler::create(config);
  EXPECT_TRUE(scheduler.is_ok()) << scheduler.status().to_string();
  Cycle c = build(s);
  c.snapshot.pool = &c.pool;
  return outs(scheduler->cycle(c.snapshot), c.pool);
}

struct Case {
  const char* what;
  World setup;
  std::string depth;
  std::vector<Out> want;
};

void run_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    EXPECT_EQ(run_cycle(c.setup, c.depth), c.want) << c.what << " (depth '" << c.depth << "')";
  }
}

const std::string kOneNode8 = "core:8 pu:1";

// One node of 8 cores, 6 of them busy until +100 s; the head job wants
// `head` cores, then `rest`.
World easy(int head, std::vector<PendingJob> rest) {
  World s{1, kOneNode8, {{{1}, 6, 100}}, {job(1, head, 1000)}};
  s.queue.insert(s.queue.end(), rest.begin(), rest.end());
  return s;
}

TEST(Backfill, Easy) {
  run_cases({
      {"allocate alone starts nothing behind a blocked head", easy(7, {job(2, 2, 50)}), "", {}},
      {"a short job backfills before the shadow time",
       easy(7, {job(2, 2, 50)}),
       "1",
       {reserve(1, 100), start(2, {1})}},
      {"a job ending exactly at the shadow time backfills",
       easy(7, {job(2, 2, 100)}),
       "1",
       {reserve(1, 100), start(2, {1})}},
      {"a long job that would delay the head does not",
       easy(7, {job(2, 2, 101)}),
       "1",
       {reserve(1, 100)}},
      {"a long job on the extra cores only backfills",
       easy(6, {job(2, 2, 5000)}),
       "1",
       {reserve(1, 100), start(2, {1})}},
      {"the extra cores are shared: the second long job waits",
       easy(6, {job(2, 1, 5000), job(3, 2, 5000), job(4, 1, 5000)}),
       "1",
       {reserve(1, 100), start(2, {1}), start(4, {1})}},
      {"a job without a time limit runs forever: extra cores only",
       easy(7, {job(2, 2, 0), job(3, 1, 0)}),
       "1",
       {reserve(1, 100), start(3, {1})}},
      {"a job too big for the cluster takes no reservation",
       {1, kOneNode8, {{{1}, 6, 100}}, {job(1, 9, 10), job(2, 7, 1000), job(3, 2, 50)}},
       "1",
       {reserve(2, 100), start(3, {1})}},
  });
}

// backfill.restricted: no extra-cores rule, only jobs that end by the
// earliest promise pass the blocked head.
TEST(Backfill, RestrictedBackfillsOnlyBeforeThePromise) {
  SchedulerConfig config;
  config.actions = {"allocate", "backfill"};
  config.options = {{"backfill.reservation_depth", "1"}, {"backfill.restricted", "true"}};
  auto scheduler = Scheduler::create(config);
  ASSERT_TRUE(scheduler.is_ok()) << scheduler.status().to_string();
  auto cycle = [&](const World& w) {
    Cycle c = build(w);
    c.snapshot.pool = &c.pool;
    return outs(scheduler->cycle(c.snapshot), c.pool);
  };
  // Full EASY starts job 2 on the extra cores (Backfill.Easy); restricted does not.
  EXPECT_EQ(cycle(easy(6, {job(2, 2, 5000)})), (std::vector<Out>{reserve(1, 100)}));
  // A job that ends by the shadow time still passes.
  EXPECT_EQ(cycle(easy(6, {job(2, 2, 100)})), (std::vector<Out>{reserve(1, 100), start(2, {1})}));
  EXPECT_FALSE(
      Scheduler::create({{"allocate", "backfill"}, {"fcfs"}, {{"backfill.restricted", "yes"}}})
          .is_ok());
}

TEST(Backfill, JobsStartedThisCycleCountUntilTheirLimit) {
  // Allocate starts job 1 (4 of 8 cores, 100 s); job 2 needs the whole node
  // when job 1 ends.
  const World base{1, kOneNode8, {}, {job(1, 4, 100), job(2, 8, 100), job(3, 4, 100)}};
  World longer = base;
  longer.queue[2] = job(3, 4, 101);
  run_cases({
      {"fits before the shadow", base, "1", {start(1, {1}), reserve(2, 100), start(3, {1})}},
      {"would delay the head", longer, "1", {start(1, {1}), reserve(2, 100)}},
  });
}

TEST(Backfill, OverdueRunningJobCountsAsEndingInOneSecond) {
  const World s{1, kOneNode8, {{{1}, 6, -50}, {{1}, 2, 0}}, {job(1, 4, 10), job(2, 1, 1)}};
  run_cases({{"overdue ends at now + 1 s", s, "1", {reserve(1, 1)}}});
}

// One node of 8 cores: 4 busy until +100 s, 2 until +200 s. Job 1 (4 cores)
// fits at +100 s leaving 2 extra cores; job 2 (4 cores) fits at +200 s unless
// job 3 (2 cores, long) takes those extra cores now.
const World kConservative{1,
                          kOneNode8,
                          {{{1}, 4, 100}, {{1}, 2, 200}},
                          {job(1, 4, 1000), job(2, 4, 100), job(3, 2, 1000)}};

TEST(Backfill, ConservativeProtectsEveryBlockedJob) {
  run_cases({
      {"EASY starts job 3 on job 1's extra cores",
       kConservative,
       "1",
       {reserve(1, 100), start(3, {1})}},
      {"depth 2 keeps job 2's start", kConservative, "2", {reserve(1, 100), reserve(2, 200)}},
      {"conservative reserves job 3 too",
       kConservative,
       "0",
       {reserve(1, 100), reserve(2, 200), reserve(3, 300)}},
      {"-1 is unlimited", kConservative, "-1", {reserve(1, 100), reserve(2, 200), reserve(3, 300)}},
      {"and so is 'unlimited'",
       kConservative,
       "unlimited",
       {reserve(1, 100), reserve(2, 200), reserve(3, 300)}},
  });
}

TEST(Backfill, ReservationDepthCountsReservations) {
  // A full 4-core node until +100 s; three whole-node jobs of 100 s each.
  const World s{
      1, "core:4 pu:1", {{{1}, 4, 100}}, {job(1, 4, 100), job(2, 4, 100), job(3, 4, 100)}};
  run_cases({
      {"depth 1", s, "1", {reserve(1, 100)}},
      {"depth 2", s, "2", {reserve(1, 100), reserve(2, 200)}},
      {"depth 3", s, "3", {reserve(1, 100), reserve(2, 200), reserve(3, 300)}},
      {"unlimited", s, "0", {reserve(1, 100), reserve(2, 200), reserve(3, 300)}},
  });
}

TEST(Backfill, GangsStartWholeOrNotAtAll) {
  // 4 nodes of 4 cores; nodes 1 and 2 busy until +100 s. Job 1 (3 whole
  // nodes) is reserved on nodes 1-3 at +100 s: node 4 is extra.
  const std::string spec = "core:4 pu:1";
  const World s{4,
                spec,
                {{{1, 2}, 4, 100}},
                {job(1, 12, 1000, 3), job(2, 2, 1000, 2), job(3, 2, 50, 2), job(4, 2, 1000, 1)}};
  run_cases({
      {"allocate alone", s, "", {}},
      {"a long 2-node job has one free node; short gang and extra-node job "
       "start",
       s,
       "1",
       {reserve(1, 100), start(3, {3, 4}), start(4, {4})}},
  });
}

TEST(Backfill, PerNodeReservations) {
  // Two 4-core nodes: node 1 busy until +100 s, node 2 half busy until
  // +200 s. The 1-node head job is reserved on node 1; node 2 is free for a
  // job of any length.
  const World s{2,
                "core:4 pu:1",
                {{{1}, 4, 100}, {{2}, 2, 200}},
                {job(1, 4, 1000, 1), job(2, 2, 5000), job(3, 1, 10)}};
  run_cases({{"a long job runs on the node the reservation leaves alone",
              s,
              "1",
              {reserve(1, 100), start(2, {2})}}});
}

PendingJob whole_nodes(PendingJob j) {
  j.request.exclusive = true;
  return j;
}

TEST(Backfill, WholeNodesArePromisedOnlyWhenIdle) {
  // Two 4-core nodes: node 1 has one core busy until +5000 s, node 2 all
  // four until +100 s. Job 1 (--exclusive, one task) does not start on node
  // 1's three free cores: it is promised node 2, whole, at +100 s.
  const World s{2,
                "core:4 pu:1",
                {{{1}, 1, 5000}, {{2}, 4, 100}},
                {whole_nodes(job(1, 1, 1000)), job(2, 1, 1000)}};
  run_cases({
      {"allocate alone starts nothing behind it", s, "", {}},
      {"promised node 2; a plain job takes a core of node 1",
       s,
       "1",
       {reserve(1, 100), start(2, {1})}},
  });
}

TEST(Backfill, NothingElseOnANodePromisedWhole) {
  // Node 1: three cores busy until +5000 s; node 2: two cores until +50 s.
  // Job 1 is promised node 2, whole, at +50 s. Job 2 (two cores, long)
  // would fit on node 2's two free cores now, but would still run then;
  // job 3 (two cores, 30 s) ends before and backfills there; job 4 (one
  // core, long) takes node 1's last core, though a whole-node job of its
  // size could not start.
  const World s{2,
                "core:4 pu:1",
                {{{1}, 3, 5000}, {{2}, 2, 50}},
                {whole_nodes(job(1, 1, 1000)), job(2, 2, 1000), job(3, 2, 30), job(4, 1, 1000)}};
  run_cases({{"the promised node is kept whole",
              s,
              "1",
              {reserve(1, 50), start(3, {2}), start(4, {1})}}});
}

TEST(Backfill, OptionsAreChecked) {
  struct Bad {
    SchedulerConfig config;
    const char* message;
  };
  const std::vector<std::string> both = {"allocate", "backfill"};
  const Bad cases[] = {
      {{both, {"fcfs"}, {{"backfill.reservation_depth", "x"}}}, "'x' is not a reservation count"},
      {{both, {"fcfs"}, {{"backfill.reservation_depth", "-2"}}}, "'-2' is not"},
      {{both, {"fcfs"}, {{"backfill.reservation_depth", "1x"}}}, "'1x' is not"},
      {{both, {"fcfs"}, {{"backfill.reservation_depth", ""}}}, "'' is not"},
      {{both, {"fcfs"}, {{"backfill.depth", "1"}}}, "unknown scheduler option 'backfill.depth'"},
      {{both, {"fcfs"}, {{"allocate.x", "1"}}}, "action 'allocate' takes no options"},
      {{{"allocate"}, {"fcfs"}, {{"backfill.reservation_depth", "1"}}},
       "is for 'backfill', which is not a configured action or plugin"},
      {{both, {"fcfs"}, {{"reservation_depth", "1"}}}, "is not <action or plugin>.<option>"},
      {{both, {"fcfs"}, {{"fcfs.x", "1"}}}, "plugin 'fcfs' takes no options"},
  };
  for (const Bad& c : cases) {
    auto s = Scheduler::create(c.config);
    ASSERT_FALSE(s.is_ok()) << c.message;
    EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
    EXPECT_NE(s.status().message().find(c.message), std::string::npos) << s.status().message();
  }
  for (const char* good : {"1", "5", "0", "-1", "unlimited"}) {
    EXPECT_TRUE(Scheduler::create({both, {"fcfs"}, {{"backfill.reservation_depth", good}}}).is_ok())
        << good;
  }
  EXPECT_TRUE(Scheduler::create({both, {"fcfs"}}).is_ok());
}

// A random cluster state and queue.
World random_setup(std::mt19937& rng, int nodes, int running, int queued) {
  World s{nodes, "pack:2 numa:2 core:4 pu:1", {}, {}};
  std::vector<int> free(static_cast<std::size_t>(nodes), 16);
  for (int i = 0; i < running; ++i) {
    const auto rank = std::uniform_int_distribution<Rank>(1, static_cast<Rank>(nodes))(rng);
    const int cores = std::uniform_int_distribution<int>(1, 8)(rng);
    if (free[rank - 1] < cores) continue;
    free[rank - 1] -= cores;
    s.running.push_back({{rank}, cores, std::uniform_int_distribution<int>(-5, 500)(rng)});
  }
  for (JobId id = 1; id <= static_cast<JobId>(queued); ++id) {
    const int n = std::uniform_int_distribution<int>(0, 3)(rng);
    PendingJob j = job(id, std::uniform_int_distribution<int>(std::max(n, 1), 24)(rng),
                       std::uniform_int_distribution<int>(0, 400)(rng), n);
    j.submit_time = std::uniform_int_distribution<TimeUs>(0, 50)(rng);
    s.queue.push_back(j);
  }
  return s;
}

TEST(Backfill, DeterministicAndNoCoreTwice) {
  std::mt19937 rng(11);
  for (int round = 0; round < 20; ++round) {
    World s = random_setup(rng, 6, 20, 60);
    for (const char* depth : {"1", "3", "0"}) {
      const std::vector<Out> first = run_cycle(s, depth);  // checks no core twice
      EXPECT_EQ(run_cycle(s, depth), first) << "round " << round;
      World reversed = s;
      std::reverse(reversed.queue.begin(), reversed.queue.end());
      EXPECT_EQ(run_cycle(reversed, depth), first) << "round " << round;
    }
  }
}

// Backfill only adds: whatever allocate alone starts, allocate + backfill
// starts too, first and in the same order.
TEST(Backfill, StartsWhatAllocateStarts) {
  std::mt19937 rng(5);
  for (int round = 0; round < 20; ++round) {
    World s = random_setup(rng, 6, 20, 60);
    const std::vector<Out> alone = run_cycle(s, "");
    const std::vector<Out> with = run_cycle(s, "1");
    ASSERT_GE(with.size(), alone.size());
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), with.begin())) << "round " << round;
  }
}

// No start delays a reservation: replaying the cycle's outcome (every start
// running until now + its limit, the reservations made in order), each
// reserved job's earliest start is still the time it was promised.
TEST(Backfill, StartsDelayNoReservation) {
  std::mt19937 rng(23);
  int reserved = 0;
  for (int round = 0; round < 30; ++round) {
    const World w = random_setup(rng, 6, 20, 40);
    for (const char* depth : {"1", "2", "0"}) {
      SchedulerConfig config{
          {"allocate", "backfill"}, {"fcfs"}, {{"backfill.reservation_depth", depth}}};
      auto scheduler = Scheduler::create(config);
      ASSERT_TRUE(scheduler.is_ok());
      Cycle c = build(w);
      c.snapshot.pool = &c.pool;
      const Decisions d = scheduler->cycle(c.snapshot);
      resource::NodePool after = c.pool;
      const auto limit = [&](JobId id) {
        const auto it = std::find_if(w.queue.begin(), w.queue.end(),
                                     [id](const PendingJob& j) { return j.id == id; });
        return it->time_limit_s > 0 ? it->time_limit_s * kUsPerSecond : kForever;
      };
      for (const Decision& decision : d.decisions) {
        if (const Start* s = std::get_if<Start>(&decision)) {
          ASSERT_TRUE(after.allocate(s->allocation).is_ok());
        }
      }
      Planner planner(after, kNow);
      for (const RunningJob& r : c.snapshot.running)
        planner.add_release(r.allocation, r.end_estimate);
      for (const Decision& decision : d.decisions) {
        if (const Start* s = std::get_if<Start>(&decision)) {
          planner.add_release(s->allocation, add_time(kNow, limit(s->job)));
        }
      }
      std::vector<const resource::NodeState*> nodes;
      for (const auto& n : after.nodes()) nodes.push_back(&n);
      for (const Decision& decision : d.decisions) {
        const Reserve* r = std::get_if<Reserve>(&decision);
        if (r == nullptr) continue;
        const PendingJob& j = *std::find_if(w.queue.begin(), w.queue.end(),
                                            [r](const PendingJob& q) { return q.id == r->job; });
        const auto slot = planner.earliest(j.request, limit(j.id), nodes);
        ASSERT_TRUE(slot.has_value()) << "round " << round << " job " << j.id;
        EXPECT_EQ(slot->start, r->time)
            << "round " << round << " depth " << depth << " job " << j.id;
        planner.reserve(slot->nodes, slot->start, add_time(slot->start, limit(j.id)));
        ++reserved;
      }
    }
  }
  EXPECT_GT(reserved, 50);
}

TEST(Backfill, LargeCycle) {
  // 4,096 nodes of 16 cores, 5,000 running jobs, 10,000 queued: completes,
  // and no core is given twice (bench/sched_bench.cc measures it).
  std::mt19937 rng(3);
  World s = random_setup(rng, 4096, 5000, 10'000);
  const std::vector<Out> out = run_cycle(s, "1");
  EXPECT_FALSE(out.empty());
  EXPECT_EQ(std::count_if(out.begin(), out.end(), [](const Out& o) { return o.kind == 'R'; }), 1);
}

PendingJob with_gpus(PendingJob j, int per_node, int per_task = 0) {
  j.request.gpus_per_node = per_node;
  j.request.gpus_per_task = per_task;
  return j;
}

// Two 4-core nodes: node 1 has 2 GPUs, `held` of them (and core 0) busy
// until +3600 s; node 2 has no GPU. allocate + backfill (EASY) over `queue`.
std::vector<Out> run_around_gpus(int held, std::vector<PendingJob> queue) {
  auto t = resource::discover_topology("core:4 pu:1");
  EXPECT_TRUE(t.is_ok());
  resource::NodeTopology gpu_node = *t;
  gpu_node.gpus = {{0, 0, "cuda0", ""}, {1, 0, "cuda1", ""}};
  resource::NodePool pool;
  EXPECT_TRUE(pool.add_node(1, "n1", gpu_node).is_ok());
  EXPECT_TRUE(pool.add_node(2, "n2", *t).is_ok());
  RunningJob r;
  r.id = 1'000'000;
  resource::NodeAllocation part;
  part.rank = 1;
  part.cores = {0};
  for (int g = 0; g < held; ++g) part.gpus.push_back(g);
  r.allocation.nodes.push_back(part);
  EXPECT_TRUE(pool.allocate(r.allocation).is_ok());
  r.end_estimate = kNow + 3600 * kUsPerSecond;
  Snapshot snapshot;
  snapshot.now = kNow;
  snapshot.pool = &pool;
  snapshot.running.push_back(r);
  snapshot.queue = std::move(queue);
  auto scheduler = Scheduler::create({{"allocate", "backfill"}, {"fcfs"}});
  EXPECT_TRUE(scheduler.is_ok()) << scheduler.status().to_string();
  return outs(scheduler->cycle(snapshot), pool);
}

TEST(Backfill, AReservationWaitsForTheGpusNotJustTheCores) {
  // Node 1's GPUs are busy until +3600 s: job 1 is promised node 1 then,
  // not now on free cores; what starts now leaves it 2 cores then.
  EXPECT_EQ(
      run_around_gpus(2,
                      {
                          with_gpus(job(1, 2, 3600), 2), job(2, 4, 7200),  // node 2 only: fine
                          job(3, 3, 7200),  // would leave node 1 one core
                          job(4, 2, 7200),  // leaves it two
                          job(5, 1, 3600),  // ends when job 1 starts
                      }),
      (std::vector<Out>{reserve(1, 3600), start(2, {2}), start(4, {1}), start(5, {1})}));
  // One GPU is free now: job 1 (both) waits for +3600 s, so a job that
  // would hold the free one past then does not start; one that gives it
  // back before, or asks none (the same shape otherwise), does.
  EXPECT_EQ(run_around_gpus(1,
                            {
                                with_gpus(job(1, 1, 3600), 2),
                                with_gpus(job(2, 1, 7200), 1),
                                with_gpus(job(3, 1, 1800), 0, 1),
                                job(4, 1, 7200),
                            }),
            (std::vector<Out>{reserve(1, 3600), start(3, {1}), start(4, {1})}));
}

// Node 1 of two 4-core nodes is kept over [+100 s, +200 s) for uid 7; node 2
// is busy until +1000 s. Backfill runs alone (it does allocate's work too).
std::vector<Out> run_with_reservation(std::vector<PendingJob> queue, const std::string& depth) {
  const World w{2, "core:4 pu:1", {{{2}, 4, 1000}}, std::move(queue)};
  SchedulerConfig config{{"backfill"}, {"fcfs"}, {{"backfill.reservation_depth", depth}}};
  auto scheduler = Scheduler::create(config);
  EXPECT_TRUE(scheduler.is_ok()) << scheduler.status().to_string();
  Cycle c = build(w);
  c.snapshot.pool = &c.pool;
  AdvanceReservation r;
  r.name = "maint";
  r.nodes = {1};
  r.start = kNow + 100 * kUsPerSecond;
  r.end = kNow + 200 * kUsPerSecond;
  r.uids = {7};
  c.snapshot.reservations.push_back(r);
  return outs(scheduler->cycle(c.snapshot), c.pool);
}

PendingJob by(std::uint32_t uid, PendingJob j) {
  j.uid = uid;
  return j;
}

TEST(Backfill, AdvanceReservationsHoldTheirNodes) {
  EXPECT_EQ(run_with_reservation({by(1, job(1, 4, 100))}, "1"), (std::vector<Out>{start(1, {1})}))
      << "a job that ends when the reservation starts runs now";
  EXPECT_EQ(run_with_reservation({by(1, job(1, 4, 150))}, "1"), (std::vector<Out>{reserve(1, 200)}))
      << "a longer one is promised the node after the window, not before";
  EXPECT_EQ(run_with_reservation(
                {by(1, job(1, 4, 150)), by(7, job(2, 4, 150)), by(1, job(3, 1, 50))}, "0"),
            (std::vector<Out>{reserve(1, 200), start(2, {1}), reserve(3, 350)}))
      << "the reservation's own user may run in it; others wait for their "
         "promises";
  EXPECT_EQ(run_with_reservation({by(1, job(1, 8, 150, 2))}, "1"),
            (std::vector<Out>{reserve(1, 1000)}))
      << "a gang that needs the reserved node waits for the window and for "
         "node 2";
}

}  // namespace
}  // namespace hpcq::sched
