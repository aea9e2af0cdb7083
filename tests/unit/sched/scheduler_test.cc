#include "lib/sched/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "lib/resource/hwloc_import.h"

namespace hpcq::sched {
namespace {

resource::NodeTopology topo(const std::string& spec) {
  auto t = resource::discover_topology(spec);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return *t;
}

resource::NodePool cluster(int nodes, const std::string& spec = "core:4 pu:1") {
  resource::NodePool pool;
  const resource::NodeTopology t = topo(spec);
  for (int i = 1; i <= nodes; ++i) {
    EXPECT_TRUE(pool.add_node(static_cast<Rank>(i), "n" + std::to_string(i), t).is_ok());
  }
  return pool;
}

PendingJob job(JobId id, TimeUs submit, int ntasks, int nodes = 0) {
  PendingJob j;
  j.id = id;
  j.submit_time = submit;
  j.request.ntasks = ntasks;
  j.request.nodes = nodes;
  return j;
}

Scheduler fcfs() {
  auto s = Scheduler::create({{"allocate"}, {"fcfs"}});
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return std::move(s).value();
}

struct Started {
  JobId job;
  std::vector<Rank> ranks;
  bool operator==(const Started&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Started& s) {
  os << "job " << s.job << " on";
  for (Rank r : s.ranks) os << " " << r;
  return os;
}

// The Start decisions, after checking that they all fit the pool together.
std::vector<Started> starts(const Decisions& d, const resource::NodePool& pool) {
  resource::NodePool check = pool;
  std::vector<Started> out;
  for (const Decision& decision : d.decisions) {
    const Start* start = std::get_if<Start>(&decision);
    if (start == nullptr) continue;
    EXPECT_TRUE(check.allocate(start->allocation).is_ok())
        << "job " << start->job << " double-booked";
    Started s{start->job, {}};
    for (const auto& part : start->allocation.nodes) s.ranks.push_back(part.rank);
    out.push_back(s);
  }
  return out;
}

struct Case {
  const char* what;
  int nodes;
  std::vector<std::pair<Rank, std::vector<int>>> used;  // cores already running jobs
  std::vector<Rank> down;
  std::vector<PendingJob> queue;
  std::vector<Started> want;
};

TEST(Scheduler, FcfsAllocate) {
  const Case cases[] = {
      {"submit order, not queue order",
       2,
       {},
       {},
       {job(3, 30, 1), job(2, 20, 4), job(1, 10, 4)},
       {{1, {1}}, {2, {2}}}},
      {"a blocked job blocks those behind it",
       2,
       {},
       {},
       {job(1, 10, 2), job(2, 20, 8), job(3, 30, 1)},
       {{1, {1}}}},
      {"blocked by running jobs", 2, {{1, {0, 1}}}, {}, {job(1, 10, 8), job(2, 20, 1)}, {}},
      {"ties broken by id",
       2,
       {},
       {},
       {job(5, 10, 4), job(3, 10, 4), job(4, 10, 4)},
       {{3, {1}}, {4, {2}}}},
      {"2-node gang starts on both", 2, {}, {}, {job(1, 10, 2, 2)}, {{1, {1, 2}}}},
      {"2-node gang waits for both",
       2,
       {{2, {0, 1, 2, 3}}},
       {},
       {job(1, 10, 2, 2), job(2, 20, 1)},
       {}},
      {"unschedulable node skipped", 2, {}, {1}, {job(1, 10, 4), job(2, 20, 1)}, {{1, {2}}}},
      {"a job that never fits is passed over",
       2,
       {},
       {},
       {job(1, 10, 100), job(2, 20, 3, 3), job(3, 30, 1)},
       {{3, {1}}}},
      {"a gang needing a down node is passed over",
       2,
       {},
       {2},
       {job(1, 10, 2, 2), job(2, 20, 1)},
       {{2, {1}}}},
      {"many small jobs fill the cluster, no core twice",
       2,
       {{1, {2}}},
       {},
       {job(1, 1, 1), job(2, 2, 1), job(3, 3, 1), job(4, 4, 1), job(5, 5, 1), job(6, 6, 1),
        job(7, 7, 1), job(8, 8, 1), job(9, 9, 1)},
       {{1, {1}}, {2, {1}}, {3, {1}}, {4, {2}}, {5, {2}}, {6, {2}}, {7, {2}}}},
      {"empty queue", 2, {}, {}, {}, {}},
  };
  for (const Case& c : cases) {
    resource::NodePool pool = cluster(c.nodes);
    for (const auto& [rank, cores] : c.used) {
      resource::NodeAllocation part;
      part.rank = rank;
      part.cores = cores;
      ASSERT_TRUE(pool.allocate({{part}}).is_ok()) << c.what;
    }
    for (Rank r : c.down) pool.set_schedulable(r, false);
    Snapshot snap;
    snap.now = 1000;
    snap.pool = &pool;
    snap.queue = c.queue;
    Scheduler scheduler = fcfs();
    EXPECT_EQ(starts(scheduler.cycle(snap), pool), c.want) << c.what;
  }
}

TEST(Scheduler, UnknownNamesAreRejected) {
  struct Bad {
    SchedulerConfig config;
    const char* message;
  };
  const Bad cases[] = {
      {{{"allocate", "x"}, {"fcfs"}}, "unknown scheduler action 'x'"},
      {{{"allocate"}, {"fcfs", "y"}}, "unknown scheduler plugin 'y'"},
      {{{"allocate", "allocate"}, {"fcfs"}}, "listed twice"},
      {{{}, {"fcfs"}}, "no scheduler actions"},
  };
  for (const Bad& c : cases) {
    auto s = Scheduler::create(c.config);
    ASSERT_FALSE(s.is_ok()) << c.message;
    EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
    EXPECT_NE(s.status().message().find(c.message), std::string::npos) << s.status().message();
  }
  EXPECT_TRUE(Scheduler::create({}).is_ok());  // defaults: allocate + fcfs
  EXPECT_TRUE(Scheduler::create({{"allocate"}, {}}).is_ok());
}

TEST(Scheduler, NoPoolSchedulesNothing) {
  Snapshot snap;
  snap.queue = {job(1, 1, 1)};
  EXPECT_TRUE(fcfs().cycle(snap).decisions.empty());
}

std::vector<std::pair<JobId, std::vector<int>>> flatten(const Decisions& d) {
  std::vector<std::pair<JobId, std::vector<int>>> out;
  for (const Decision& decision : d.decisions) {
    const Start& s = std::get<Start>(decision);
    std::vector<int> where;
    for (const auto& part : s.allocation.nodes) {
      where.push_back(static_cast<int>(part.rank));
      where.insert(where.end(), part.cores.begin(), part.cores.end());
    }
    out.emplace_back(s.job, where);
  }
  return out;
}

TEST(Scheduler, SameSnapshotSameDecisions) {
  resource::NodePool pool = cluster(8, "pack:2 numa:2 core:4 pu:1");
  std::mt19937 rng(7);
  Snapshot snap;
  snap.pool = &pool;
  for (JobId id = 1; id <= 300; ++id) {
    PendingJob j = job(id, std::uniform_int_distribution<TimeUs>(0, 50)(rng),
                       std::uniform_int_distribution<int>(1, 6)(rng));
    j.request.cpus_per_task = std::uniform_int_distribution<int>(1, 3)(rng);
    snap.queue.push_back(j);
  }
  const auto first = flatten(fcfs().cycle(snap));
  ASSERT_FALSE(first.empty());
  Scheduler again = fcfs();
  EXPECT_EQ(flatten(again.cycle(snap)), first);
  EXPECT_EQ(flatten(again.cycle(snap)), first);
  std::reverse(snap.queue.begin(), snap.queue.end());
  EXPECT_EQ(flatten(again.cycle(snap)), first);
  starts(again.cycle(snap), pool);  // and they fit together
}

TEST(Scheduler, TenThousandJobQueue) {
  resource::NodePool pool = cluster(64, "pack:2 numa:2 core:4 pu:1");  // 1024 cores
  Snapshot snap;
  snap.pool = &pool;
  for (JobId id = 1; id <= 10'000; ++id) snap.queue.push_back(job(id, static_cast<TimeUs>(id), 1));
  Scheduler scheduler = fcfs();
  Decisions empty_cluster = scheduler.cycle(snap);
  ASSERT_EQ(empty_cluster.decisions.size(), 1024u);
  for (const Decision& d : empty_cluster.decisions) {
    ASSERT_TRUE(pool.allocate(std::get<Start>(d).allocation).is_ok());
  }
  // The cluster is now full: the cycle stops at the head of the queue.
  snap.queue.erase(snap.queue.begin(), snap.queue.begin() + 1024);
  EXPECT_TRUE(scheduler.cycle(snap).decisions.empty());
}

}  // namespace
}  // namespace hpcq::sched
