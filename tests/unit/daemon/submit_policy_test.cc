// The site's policy applied to submissions: queues, time limits, accounts,
// QOS and who may raise a priority.
#include "daemon/submit_policy.h"

#include <gtest/gtest.h>

namespace hpcq::daemon {
namespace {

ClusterConfig site_config() {
  ClusterConfig c;
  c.default_time_limit_s = 3600;
  QueueConfig batch;
  batch.name = "batch";
  batch.limits.max_time_limit_s = 7200;
  QueueConfig debug;
  debug.name = "debug";
  debug.default_time_limit_s = 600;
  debug.limits.max_time_limit_s = 1800;
  c.site.queues = {batch, debug};
  c.site.default_queue = "batch";
  c.site.accounts = {{"physics", "", 1.0}, {"chem", "", 1.0}};
  c.site.users = {{1000, "physics", 1.0}, {1000, "chem", 1.0}};
  c.site.qos = {{"high", 10, {}}};
  return c;
}

job::JobSpec spec() {
  job::JobSpec s;
  s.argv = {"true"};
  return s;
}

TEST(SubmitPolicy, DefaultQueueAccountAndTimeLimit) {
  job::JobSpec s = spec();
  ASSERT_TRUE(apply_submit_policy(site_config(), 1000, {}, false, s).is_ok());
  EXPECT_EQ(s.queue, "batch");
  EXPECT_EQ(s.account, "physics");  // the first association
  EXPECT_EQ(s.time_limit_s, 3600);

  job::JobSpec d = spec();
  d.queue = "debug";
  ASSERT_TRUE(apply_submit_policy(site_config(), 1000, {}, false, d).is_ok());
  EXPECT_EQ(d.time_limit_s, 600);  // the queue's default

  job::JobSpec u = spec();
  u.queue = "debug";
  u.time_limit_s = job::JobSpec::kUnlimited;
  ASSERT_TRUE(apply_submit_policy(site_config(), 1000, {}, false, u).is_ok());
  EXPECT_EQ(u.time_limit_s, 1800);  // UNLIMITED is the queue's maximum
}

TEST(SubmitPolicy, RefusalsNameTheOption) {
  struct Case {
    void (*change)(job::JobSpec&);
    std::uint32_t uid;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](job::JobSpec& s) { s.queue = "gpu"; }, 1000,
       "--queue: unknown queue 'gpu' (known: batch, debug)"},
      {[](job::JobSpec& s) { s.time_limit_s = 7201; }, 1000,
       "--time: 7201 s exceeds the limit of 7200 s of queue 'batch'"},
      {[](job::JobSpec& s) { s.account = "bio"; }, 1000, "--account: unknown account 'bio'"},
      {[](job::JobSpec& s) { s.account = "chem"; }, 0, ""},  // no associations: any account
      {[](job::JobSpec& s) { s.qos = "low"; }, 1000, "--qos: unknown qos 'low' (known: high)"},
      {[](job::JobSpec& s) { s.priority = 5; }, 1000, "--priority: only an admin"},
      {[](job::JobSpec& s) { s.priority = -5; }, 1000, ""},
  };
  for (const Case& c : cases) {
    job::JobSpec s = spec();
    c.change(s);
    Status st = apply_submit_policy(site_config(), c.uid, {}, false, s);
    if (c.expected.empty()) {
      EXPECT_TRUE(st.is_ok()) << st.message();
    } else {
      ASSERT_FALSE(st.is_ok()) << c.expected;
      EXPECT_EQ(st.message().rfind(c.expected, 0), 0u) << st.message();
    }
  }
  ClusterConfig other = site_config();
  other.site.users = {{2000, "chem", 1.0}};
  job::JobSpec s = spec();
  s.account = "physics";
  Status st = apply_submit_policy(other, 2000, {}, false, s);
  EXPECT_EQ(st.message(), "--account: user 2000 is not associated with account 'physics'");
  job::JobSpec admin = spec();
  admin.priority = 100;
  EXPECT_TRUE(apply_submit_policy(site_config(), 0, {}, true, admin).is_ok());
}

TEST(SubmitPolicy, NoQueuesConfigured) {
  ClusterConfig c;
  c.default_time_limit_s = 60;
  c.max_time_limit_s = 120;
  job::JobSpec s = spec();
  ASSERT_TRUE(apply_submit_policy(c, 5, {}, false, s).is_ok());
  EXPECT_EQ(s.queue, "");
  EXPECT_EQ(s.time_limit_s, 60);
  s.queue = "batch";
  EXPECT_EQ(apply_submit_policy(c, 5, {}, false, s).message(),
            "--queue: unknown queue 'batch' (this cluster has no queues configured)");
  job::JobSpec t = spec();
  t.time_limit_s = 121;
  EXPECT_EQ(apply_submit_policy(c, 5, {}, false, t).message(),
            "--time: 121 s exceeds the limit of 120 s");
}

// Requests no configured node set could ever hold are refused at submit, with
// the limit named (they waited for ever, "(Priority)"), unless a node whose
// shape is not known yet could hold them.
ClusterConfig four_nodes() {
  ClusterConfig c = site_config();
  c.ranks.resize(5);  // the leader and four nodes
  return c;
}

std::string refusal(const ClusterConfig& config, job::JobSpec s) {
  Status st = apply_submit_policy(config, 1000, {}, false, s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.message();
  return st.message();
}

// -C/--constraint: only nodes with the features count, within the queue's.
TEST(SubmitPolicy, ConstraintsCountOnlyNodesWithTheFeatures) {
  ClusterConfig c = four_nodes();
  for (std::size_t r = 0; r < c.ranks.size(); ++r) c.ranks[r].name = "n" + std::to_string(r);
  c.ranks[1].features = {"a100", "ib"};
  c.ranks[2].features = {"a100"};
  c.ranks[3].features = {"v100", "ib"};
  job::JobSpec s = spec();
  s.constraint = "a100&ib";
  EXPECT_TRUE(apply_submit_policy(c, 1000, {}, false, s).is_ok());
  s.request.nodes = 2;
  s.request.ntasks = 2;
  EXPECT_EQ(refusal(c, s), "--nodes: 2 nodes, -C/--constraint 'a100&ib' leaves 1");
  s.constraint = "a100|ib";
  s.request.nodes = 3;
  s.request.ntasks = 3;
  EXPECT_TRUE(apply_submit_policy(c, 1000, {}, false, s).is_ok());
  s = spec();
  s.constraint = "h100";
  EXPECT_EQ(refusal(c, s), "-C/--constraint 'h100': no node has those features");
  c.site.queues[0].nodes = {"n3", "n4"};
  s.constraint = "a100";
  EXPECT_EQ(refusal(c, s), "-C/--constraint 'a100': no node of queue 'batch' has those features");
}

// --gres: a name some node has; a count per node that enough nodes the job
// may run on hold.
TEST(SubmitPolicy, GresCountsPerNodeWithinTheQueue) {
  ClusterConfig c = four_nodes();
  for (std::size_t r = 0; r < c.ranks.size(); ++r) c.ranks[r].name = "n" + std::to_string(r);
  c.ranks[1].gres = {{"nvme", 2}};
  c.ranks[2].gres = {{"nvme", 1}, {"fpga", 1}};
  c.ranks[3].features = {"ib"};
  job::JobSpec s = spec();
  s.request.gres = {{"nvme", 2}};
  EXPECT_TRUE(apply_submit_policy(c, 1000, {}, false, s).is_ok());
  s.request.gres = {{"tape", 1}};
  EXPECT_EQ(refusal(c, s), "--gres: unknown generic resource 'tape' (known: fpga, nvme)");
  s.request.gres = {{"nvme", 3}};
  EXPECT_EQ(refusal(c, s),
            "--gres: nvme:3: no node the job may run on has that many (the most: 2)");
  s.request.gres = {{"nvme", 2}, {"fpga", 1}};
  EXPECT_EQ(refusal(c, s), "--gres: no node the job may run on has all of what it asks");
  s.request.gres = {{"nvme", 1}};
  s.request.nodes = 3;
  s.request.ntasks = 3;
  EXPECT_EQ(refusal(c, s), "--nodes: 3 nodes, --gres leaves 2");
  s = spec();
  s.request.gres = {{"nvme", 1}};
  s.constraint = "ib";
  EXPECT_EQ(refusal(c, s),
            "--gres: nvme:1: no node the job may run on has that many (the most: 0)");
  c.site.queues[0].nodes = {"n3", "n4"};
  s.constraint = "";
  EXPECT_EQ(refusal(c, s),
            "--gres: nvme:1: no node of queue 'batch' the job may run on has that many (the "
            "most: 0)");
}

// A queue bound to a node set (Slurm's partition Nodes=), open to some
// groups or accounts only (AllowGroups, AllowAccounts).
TEST(SubmitPolicy, AQueuesNodesGroupsAndAccounts) {
  ClusterConfig c = four_nodes();
  for (std::size_t r = 0; r < c.ranks.size(); ++r) c.ranks[r].name = "n" + std::to_string(r);
  QueueConfig& gpu = c.site.queues[0];
  gpu.nodes = {"n3", "n4"};
  job::JobSpec s = spec();
  s.request.nodes = 3;
  s.request.ntasks = 3;
  EXPECT_EQ(refusal(c, s), "--nodes: 3 nodes, queue 'batch' has 2");
  s = spec();
  s.nodelist = {"n1"};
  EXPECT_EQ(refusal(c, s), "--nodelist: node 'n1' is not in queue 'batch' (its nodes: n[3-4])");
  s = spec();
  s.exclude = {"n3", "n4"};
  EXPECT_EQ(refusal(c, s), "--exclude: no node is left to run on");
  s = spec();
  s.request.nodes = 2;
  s.request.ntasks = 2;
  EXPECT_TRUE(apply_submit_policy(c, 1000, {}, false, s).is_ok());

  gpu.allow_groups = {"gpu", "ml"};
  s = spec();
  Status st = apply_submit_policy(c, 1000, {"users", "physics"}, false, s);
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  EXPECT_EQ(st.message(), "--queue: queue 'batch' is open to groups gpu, ml only");
  s = spec();
  EXPECT_TRUE(apply_submit_policy(c, 1000, {"users", "ml"}, false, s).is_ok());
  s = spec();
  EXPECT_TRUE(apply_submit_policy(c, 0, {}, true, s).is_ok()) << "an admin uses any queue";
  gpu.allow_groups.clear();
  gpu.allow_accounts = {"chem"};
  s = spec();
  st = apply_submit_policy(c, 1000, {}, false, s);
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  EXPECT_EQ(st.message(), "--queue: queue 'batch' is not open to account 'physics'");
  s = spec();
  s.account = "chem";
  EXPECT_TRUE(apply_submit_policy(c, 1000, {}, false, s).is_ok());
}

TEST(SubmitPolicy, MoreNodesThanConfiguredOrAQueueAllows) {
  job::JobSpec s = spec();
  s.request.nodes = 99;
  s.request.ntasks = 99;
  EXPECT_EQ(refusal(four_nodes(), s), "--nodes: 99 nodes, the cluster has 4");
  s.request.nodes = 4;
  s.request.ntasks = 4;
  job::JobSpec ok = s;
  EXPECT_TRUE(apply_submit_policy(four_nodes(), 1000, {}, false, ok).is_ok());
  ClusterConfig limited = four_nodes();
  limited.site.queues[0].limits.max_nodes = 2;
  EXPECT_EQ(refusal(limited, s), "--nodes: 4 nodes exceed the limit of queue 'batch' (2)");
  limited.site.queues[0].limits.max_nodes = 0;
  limited.site.queues[0].limits.max_cores_per_user = 3;
  EXPECT_EQ(refusal(limited, s),
            "--ntasks: 4 cores exceed the limit of queue 'batch' (3 per user)");
}

std::vector<std::optional<NodeShape>> shapes(int nodes, int cores, std::uint64_t memory,
                                             int gpus = 0) {
  return std::vector<std::optional<NodeShape>>(static_cast<std::size_t>(nodes),
                                               NodeShape{cores, memory, gpus});
}

TEST(CheckFits, WhatNoNodeCouldHoldIsRefusedNamingTheLimit) {
  const auto cluster = shapes(4, 16, 64ULL << 30);
  job::JobSpec s = spec();
  EXPECT_TRUE(check_fits(cluster, s).is_ok());
  s.request.ntasks = 1000;
  EXPECT_EQ(check_fits(cluster, s).message(),
            "--ntasks: 1000 tasks of 1 cores do not fit on the cluster (room for 64)");
  s.request.ntasks = 64;
  EXPECT_TRUE(check_fits(cluster, s).is_ok());
  s.request.nodes = 2;
  EXPECT_EQ(check_fits(cluster, s).message(),
            "--ntasks: 64 tasks of 1 cores do not fit on the 2 largest nodes (room for 32)");
  s = spec();
  s.request.cpus_per_task = 4096;
  EXPECT_EQ(check_fits(cluster, s).message(),
            "--cpus-per-task: 4096 cores for one task, the largest node has 16");
  s = spec();
  s.request.mem_per_node_bytes = 1ULL << 50;
  EXPECT_NE(check_fits(cluster, s).message().find("--mem: "), std::string::npos);
  s = spec();
  s.request.gpus_per_task = 1;
  EXPECT_EQ(check_fits(cluster, s).message(), "--gpus-per-task: 1 GPUs, no node has GPUs");
  EXPECT_TRUE(check_fits(shapes(1, 16, 1ULL << 30, 2), s).is_ok());
}

TEST(CheckFits, ANodeOfUnknownShapeCouldHoldAnything) {
  auto cluster = shapes(3, 4, 1ULL << 30);
  cluster.push_back(std::nullopt);  // configured, never said Hello
  job::JobSpec s = spec();
  s.request.cpus_per_task = 64;
  EXPECT_TRUE(check_fits(cluster, s).is_ok());
}

TEST(CheckFits, OversubscribedTasksAreNotCounted) {
  job::JobSpec s = spec();
  s.request.ntasks = 100;
  s.request.oversubscribe = true;
  EXPECT_TRUE(check_fits(shapes(1, 4, 1ULL << 30), s).is_ok());
}

}  // namespace
}  // namespace hpcq::daemon
