// Shared fixture of the lib/sched action and plugin tests (Volcano's
// uthelper): a pool of 4-core nodes, pending and running jobs, and what a
// cycle decided.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/resource/hwloc_import.h"
#include "lib/sched/scheduler.h"
#include "lib/sched/session.h"

namespace hpcq::sched::fixture {

// A pool of `nodes` nodes of `topology` (hwloc synthetic; 4 cores unless
// said), ranks 1..nodes, named n1..nN.
inline resource::NodePool make_pool(int nodes, const char* topology = "core:4 pu:1") {
  resource::NodePool pool;
  auto t = resource::discover_topology(topology);
  EXPECT_TRUE(t.is_ok());
  for (int r = 1; r <= nodes; ++r) {
    EXPECT_TRUE(pool.add_node(static_cast<Rank>(r), "n" + std::to_string(r), *t).is_ok());
  }
  return pool;
}

inline PendingJob pending(JobId id, int ntasks, std::string queue = "", std::uint32_t uid = 1,
                          std::int64_t time_limit_s = 3600) {
  PendingJob j;
  j.id = id;
  j.uid = uid;
  j.submit_time = static_cast<TimeUs>(id);
  j.request.ntasks = ntasks;
  j.time_limit_s = time_limit_s;
  j.queue = std::move(queue);
  return j;
}

// A running job on `cores` of each of `ranks`, taken from `pool`.
inline RunningJob running(resource::NodePool& pool, JobId id, std::vector<Rank> ranks,
                          std::vector<int> cores, std::string queue, TimeUs start,
                          std::uint32_t uid = 1) {
  RunningJob r;
  r.id = id;
  r.uid = uid;
  r.submit_time = start;
  r.start_time = start;
  r.end_estimate = start + 3600 * kUsPerSecond;
  r.time_limit_s = 3600;
  r.queue = std::move(queue);
  r.request.ntasks = static_cast<int>(ranks.size() * cores.size());
  r.request.nodes = static_cast<int>(ranks.size());
  int first = 0;
  for (Rank rank : ranks) {
    resource::NodeAllocation part;
    part.rank = rank;
    part.node = "n" + std::to_string(rank);
    part.cores = cores;
    part.numa = {0};
    part.ntasks = static_cast<int>(cores.size());
    part.first_task = first;
    first += part.ntasks;
    r.allocation.nodes.push_back(part);
  }
  EXPECT_TRUE(pool.allocate(r.allocation).is_ok());
  return r;
}

inline std::vector<JobId> started(const Decisions& d) {
  std::vector<JobId> out;
  for (const Decision& x : d.decisions) {
    if (const Start* s = std::get_if<Start>(&x)) out.push_back(s->job);
  }
  return out;
}

inline std::vector<std::pair<JobId, JobId>> preempted(const Decisions& d) {
  std::vector<std::pair<JobId, JobId>> out;
  for (const Decision& x : d.decisions) {
    if (const Preempt* p = std::get_if<Preempt>(&x)) out.emplace_back(p->job, p->for_job);
  }
  return out;
}

inline Decisions run(const Snapshot& snap, std::vector<std::string> actions,
                     std::vector<std::string> plugins,
                     std::map<std::string, std::string> options = {}) {
  auto s = Scheduler::create({std::move(actions), std::move(plugins), std::move(options)});
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s->cycle(snap);
}

}  // namespace hpcq::sched::fixture
