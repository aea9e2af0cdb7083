// Jobs for the store engines' tests: a job with most fields set, an
// allocation on two nodes, and a comparison of everything a store keeps.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "lib/job/job.h"
#include "lib/resource/allocation.h"

namespace hpcq::store {

inline job::Job sample_job(JobId id) {
  job::Job j;
  j.id = id;
  j.uid = 1000 + static_cast<std::uint32_t>(id);
  j.gid = 100;
  j.user = "alice";
  j.spec.name = "job-" + std::to_string(id);
  j.spec.argv = {"/bin/sleep", "60"};
  j.spec.request.nodes = 2;
  j.spec.request.ntasks = 4;
  j.spec.request.cpus_per_task = 2;
  j.spec.request.mem_per_node_bytes = 1ull << 30;
  j.spec.time_limit_s = 600;
  j.spec.env = {{"HOME", "/home/alice"}};
  j.spec.requeue = true;
  j.state = job::JobState::kPending;
  j.reason = "waiting for resources";
  j.submit_time = 1'700'000'000'000'000 + static_cast<TimeUs>(id);
  return j;
}

inline resource::Allocation sample_allocation() {
  resource::Allocation a;
  a.cpus_per_task = 2;
  for (Rank r : {3u, 4u}) {
    resource::NodeAllocation n;
    n.rank = r;
    n.node = "node00" + std::to_string(r);
    n.cores = {0, 1, 2, 3};
    n.numa = {0};
    n.memory_bytes = 1ull << 30;
    n.ntasks = 2;
    n.first_task = (r == 3) ? 0 : 2;
    a.nodes.push_back(n);
  }
  return a;
}

inline void expect_same_job(const job::Job& a, const job::Job& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.uid, b.uid);
  EXPECT_EQ(a.gid, b.gid);
  EXPECT_EQ(a.user, b.user);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.exit_code, b.exit_code);
  EXPECT_EQ(a.reason, b.reason);
  EXPECT_EQ(a.submit_time, b.submit_time);
  EXPECT_EQ(a.start_time, b.start_time);
  EXPECT_EQ(a.end_time, b.end_time);
  EXPECT_EQ(a.requeue_count, b.requeue_count);
  EXPECT_EQ(a.held, b.held);
  EXPECT_EQ(a.cpu_time_us, b.cpu_time_us);
  EXPECT_EQ(a.max_memory_bytes, b.max_memory_bytes);
  EXPECT_EQ(a.spec.batch, b.spec.batch);
  EXPECT_EQ(a.spec.forward_output, b.spec.forward_output);
  EXPECT_EQ(a.spec.warn_signal, b.spec.warn_signal);
  EXPECT_EQ(a.spec.warn_seconds, b.spec.warn_seconds);
  EXPECT_EQ(a.spec.name, b.spec.name);
  EXPECT_EQ(a.spec.argv, b.spec.argv);
  EXPECT_EQ(a.spec.request.nodes, b.spec.request.nodes);
  EXPECT_EQ(a.spec.request.ntasks, b.spec.request.ntasks);
  EXPECT_EQ(a.spec.request.cpus_per_task, b.spec.request.cpus_per_task);
  EXPECT_EQ(a.spec.request.mem_per_node_bytes, b.spec.request.mem_per_node_bytes);
  EXPECT_EQ(a.spec.time_limit_s, b.spec.time_limit_s);
  EXPECT_EQ(a.spec.env, b.spec.env);
  EXPECT_EQ(a.spec.requeue, b.spec.requeue);
  ASSERT_EQ(a.allocation.nodes.size(), b.allocation.nodes.size());
  EXPECT_EQ(a.allocation.cpus_per_task, b.allocation.cpus_per_task);
  for (std::size_t i = 0; i < a.allocation.nodes.size(); ++i) {
    EXPECT_EQ(a.allocation.nodes[i].rank, b.allocation.nodes[i].rank);
    EXPECT_EQ(a.allocation.nodes[i].node, b.allocation.nodes[i].node);
    EXPECT_EQ(a.allocation.nodes[i].cores, b.allocation.nodes[i].cores);
    EXPECT_EQ(a.allocation.nodes[i].first_task, b.allocation.nodes[i].first_task);
  }
}

}  // namespace hpcq::store
