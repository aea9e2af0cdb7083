// hpcq.toml parsing: defaults, every section, and bad input naming file:line.
#include "lib/core/config.h"

#include <gtest/gtest.h>

#include <csignal>
#include <map>
#include <string>
#include <vector>

namespace hpcq {
namespace {

const char* kRank0 =
    "[[rank]]\nname = \"leader\"\nendpoint = \"tcp://127.0.0.1:7000\"\n"
    "public_key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"\n";

TEST(ConfigTest, DefaultsAndRanks) {
  std::string text = std::string("[overlay]\nfanout = 2\n") + kRank0 +
                     "[[rank]]\nname = \"node1\"\nendpoint = \"tcp://127.0.0.1:7001\"\n"
                     "public_key = \"Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID\"\n"
                     "topology = \"pack:2 numa:2 core:4 pu:1\"\n";
  auto c = parse_config(text, "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->fanout, 2);
  EXPECT_EQ(c->heartbeat_interval_ms, 1000);
  EXPECT_EQ(c->fence_after_ms(), 9000);  // a node's jobs end before the leader gives up on it
  ASSERT_EQ(c->ranks.size(), 2u);
  EXPECT_EQ(c->ranks[0].topology, "host");
  EXPECT_EQ(c->ranks[1].topology, "pack:2 numa:2 core:4 pu:1");
  EXPECT_EQ(c->actions, std::vector<std::string>{"allocate"});
  EXPECT_EQ(c->mpi, "pmi1,pmix");  // both interfaces unless the site says
}

TEST(ConfigTest, TheSitesMpiDefault) {
  for (const char* mpi : {"pmi1", "pmix", "pmi1,pmix", "none"}) {
    auto c = parse_config(std::string("[leader]\nmpi = \"") + mpi + "\"\n" + kRank0, "t.toml");
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    EXPECT_EQ(c->mpi, mpi);
  }
  auto c = parse_config(std::string("[leader]\nmpi = \"pmix,pmi1\"\n") + kRank0, "t.toml");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("(want pmi1, pmix, pmi1,pmix or none)"), std::string::npos)
      << c.status().message();
}

TEST(ConfigTest, TheLeadersCandidatesEndpoints) {
  auto c = parse_config(
      "[[rank]]\nname = \"leader\"\n"
      "endpoints = [\"tcp://h1:7000\", \"tcp://h2:7000\"]\n"
      "public_key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"\n",
      "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->ranks[0].endpoint, "tcp://h1:7000");
  EXPECT_EQ(c->ranks[0].endpoints, (std::vector<std::string>{"tcp://h1:7000", "tcp://h2:7000"}));
  c = parse_config(kRank0, "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->ranks[0].endpoints, std::vector<std::string>{"tcp://127.0.0.1:7000"});
}

TEST(ConfigTest, SchedGranularityTableTurnsOnThePlugin) {
  auto c =
      parse_config(std::string("[sched.granularity]\npolicy = \"scale\"\n") + kRank0, "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->scheduler_options.at("granularity.policy"), "scale");
  EXPECT_EQ(c->plugins, (std::vector<std::string>{"fcfs", "granularity"}));
  c = parse_config(std::string("[scheduler]\nplugins = [\"fcfs\", \"granularity\"]\n"
                               "[sched.granularity]\npolicy = \"none\"\n") +
                       kRank0,
                   "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->plugins, (std::vector<std::string>{"fcfs", "granularity"}));
  c = parse_config(std::string("[sched.granularity]\nshape = 1\n") + kRank0, "t.toml");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("unknown key 'sched.granularity.shape'"), std::string::npos);
}

TEST(ConfigTest, ResizeKeys) {
  auto defaults = parse_config(kRank0, "t.toml");
  ASSERT_TRUE(defaults.is_ok()) << defaults.status().message();
  EXPECT_EQ(defaults->resize_timeout_ms, 30000);
  EXPECT_EQ(defaults->resize_signal, SIGUSR1);
  auto c = parse_config(std::string("[leader]\nresize_timeout_ms = 500\n"
                                    "[agent]\nresize_signal = \"USR2\"\n") +
                            kRank0,
                        "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->resize_timeout_ms, 500);
  EXPECT_EQ(c->resize_signal, SIGUSR2);
  c = parse_config(std::string("[agent]\nresize_signal = \"none\"\n") + kRank0, "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->resize_signal, 0);
}

TEST(ConfigTest, NodeScripts) {
  auto defaults = parse_config(kRank0, "t.toml");
  ASSERT_TRUE(defaults.is_ok()) << defaults.status().message();
  EXPECT_EQ(defaults->agent_prolog, "");
  EXPECT_EQ(defaults->agent_script_timeout_s, 60);
  EXPECT_EQ(defaults->agent_health_check_interval_s, 60);
  auto c = parse_config(std::string("[agent]\nprolog = \"/etc/hpcq/prolog\"\n"
                                    "epilog = \"/etc/hpcq/epilog\"\n"
                                    "health_check = \"/usr/sbin/nhc\"\n"
                                    "health_check_interval_s = 300\nscript_timeout_s = 10\n") +
                            kRank0,
                        "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->agent_prolog, "/etc/hpcq/prolog");
  EXPECT_EQ(c->agent_epilog, "/etc/hpcq/epilog");
  EXPECT_EQ(c->agent_health_check, "/usr/sbin/nhc");
  EXPECT_EQ(c->agent_health_check_interval_s, 300);
  EXPECT_EQ(c->agent_script_timeout_s, 10);
}

TEST(ConfigTest, GpuDevicesAndPrivateTmp) {
  auto defaults = parse_config(kRank0, "t.toml");
  ASSERT_TRUE(defaults.is_ok()) << defaults.status().message();
  EXPECT_TRUE(defaults->agent_gpu_devices.empty());
  EXPECT_EQ(defaults->agent_private_tmp, "off");
  auto c =
      parse_config(std::string("[agent]\ngpu_devices = [\"/dev/nvidia0\", [\"/dev/dri/card1\", "
                               "\"/dev/dri/renderD129\"]]\nprivate_tmp = \"tmpfs\"\n") +
                       kRank0,
                   "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->agent_gpu_devices,
            (std::vector<std::vector<std::string>>{{"/dev/nvidia0"},
                                                   {"/dev/dri/card1", "/dev/dri/renderD129"}}));
  EXPECT_EQ(c->agent_private_tmp, "tmpfs");
}

// Each text (with kRank0 after it) refused, its one-line message holding
// the expected words.
void expect_refused_in_one_line(const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& [text, expected] : cases) {
    auto r = parse_config(text + kRank0, "t.toml");
    ASSERT_FALSE(r.is_ok()) << text;
    EXPECT_NE(r.status().message().find(expected), std::string::npos)
        << "message: " << r.status().message() << "\nexpected: " << expected;
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
  }
}

// Every number key is checked against what it is used for: a value that
// passes never breaks every job later (issue 45 item 8: pids_per_core =
// 99999999999999999999 was taken, and every launch then failed).
TEST(ConfigTest, NumberKeysAreRangeChecked) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[agent]\npids_per_core = 99999999999999999999\n", "t.toml:2"},
      {"[agent]\npids_per_core = 9999999999\n",
       "t.toml:2: 'agent.pids_per_core' must be from 0 to 4194304, got 9999999999"},
      {"[agent]\nkill_grace_s = 99999999\n", "'agent.kill_grace_s' must be from 1 to 3600"},
      {"[agent]\nscript_timeout_s = 4294967296\n", "'agent.script_timeout_s' must be from 1"},
      {"[agent]\nhealth_check_interval_s = 0\n", "'agent.health_check_interval_s' must be"},
      {"[leader]\nlease_s = 100000\n", "'leader.lease_s' must be from 1 to 3600"},
      {"[leader]\ndefault_time_limit_s = 0\n", "'leader.default_time_limit_s' must be from 1"},
      {"[leader]\nmax_time_limit_s = 9223372036854775807\n", "'leader.max_time_limit_s'"},
      {"[leader]\nresize_timeout_ms = 1e3\n", "'leader.resize_timeout_ms' must be an integer"},
      {"[overlay]\nheartbeat_interval_ms = 4294967296\n", "'overlay.heartbeat_interval_ms'"},
      {"[api]\nmax_message_bytes = 10\n", "'api.max_message_bytes' must be from 4096"},
      {"[scheduler]\nqueue_depth = 2147483648\n", "'scheduler.queue_depth' must be from 1"},
      {"[[queue]]\nname = \"a\"\npriority = 99999999999\n", "'queue a.priority' must be"},
      {"[[queue]]\nname = \"a\"\nweight = 1e300\n", "'queue a.weight' must be positive"},
  };
  expect_refused_in_one_line(cases);
}

TEST(ConfigTest, PmiMaxKvsBytesIsRangeChecked) {
  EXPECT_EQ(parse_config(kRank0, "t.toml")->pmi_max_kvs_bytes, 64 << 20);
  auto c = parse_config(std::string("[agent]\npmi_max_kvs_bytes = 1048576\n") + kRank0, "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->pmi_max_kvs_bytes, 1048576);
  for (const char* bad : {"0", "-1", "4095", "17179869185"}) {
    auto b =
        parse_config(std::string("[agent]\npmi_max_kvs_bytes = ") + bad + "\n" + kRank0, "t.toml");
    ASSERT_FALSE(b.is_ok()) << bad;
    EXPECT_EQ(b.status().message(), std::string("t.toml:2: 'agent.pmi_max_kvs_bytes' must be "
                                                "from 4096 to 17179869184, got ") +
                                        bad);
  }
}

TEST(ConfigTest, MetricsPerNode) {
  auto c = parse_config(
      std::string("[metrics]\nlisten = \"127.0.0.1:9464\"\nper_node = true\n") + kRank0, "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_TRUE(c->metrics_per_node);
  EXPECT_FALSE(parse_config(kRank0, "t.toml")->metrics_per_node);
}

TEST(ConfigTest, LicensesTurnOnTheirPlugin) {
  auto c = parse_config(std::string("[licenses]\nmatlab = 10\nfluent = 2\n") + kRank0, "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->site.licenses, (std::map<std::string, int>{{"fluent", 2}, {"matlab", 10}}));
  EXPECT_EQ(c->plugins, (std::vector<std::string>{"fcfs", "licenses"}));
}

TEST(ConfigTest, RankGres) {
  const std::string node1 =
      "[[rank]]\nname = \"node1\"\nendpoint = \"tcp://127.0.0.1:7001\"\n"
      "public_key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf8\"\n";
  auto c = parse_config(std::string(kRank0) + node1 + "gres = { nvme = 2, fpga = 1 }\n", "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->ranks[1].gres, (std::map<std::string, int>{{"fpga", 1}, {"nvme", 2}}));
  EXPECT_TRUE(c->ranks[0].gres.empty());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"gres = { gpu = 2 }\n",
       "t.toml:9: 'gres.gpu': GPUs are not gres here; the agent finds "
       "them and jobs ask with --gpus-per-node or --gpus-per-task"},
      {"gres = { nvme = 0 }\n", "t.toml:9: 'gres.nvme' must be a positive integer"},
      {"gres = { \"a b\" = 1 }\n",
       "t.toml:9: bad gres name 'a b' (letters, digits, '_', '-', '.')"},
      {"gres = [\"nvme\"]\n", "t.toml:9: 'gres' must be a table"},
  };
  for (const auto& [text, expected] : bad) {
    auto r = parse_config(std::string(kRank0) + node1 + text, "t.toml");
    ASSERT_FALSE(r.is_ok()) << text;
    EXPECT_EQ(r.status().message(), expected);
  }
  auto sim = parse_sim_cluster("[[nodes]]\ncount = 2\ncores = 4\ngres = { nvme = 1 }\n", "c.toml");
  ASSERT_TRUE(sim.is_ok()) << sim.status().message();
  EXPECT_EQ(sim->groups[0].gres, (std::map<std::string, int>{{"nvme", 1}}));
}

TEST(ConfigTest, SitePolicyAndSchedulerOptions) {
  std::string text = std::string(
                         "[scheduler]\nactions = [\"allocate\", \"backfill\"]\n"
                         "usage_half_life_s = 3600\ndecision_log = \"/tmp/d.jsonl\"\n"
                         "queue_depth = 50\nfull_queue_depth = 500\nfull_cycle_interval_s = 0\n"
                         "[scheduler.options]\n\"backfill.reservation_depth\" = 2\n"
                         "[scheduler.options.priority]\nweight_age = 10\nfavor_small = true\n"
                         "[[queue]]\nname = \"batch\"\ndefault = true\nmax_cores_per_user = 8\n"
                         "max_time_limit_s = 7200\n"
                         "[[queue]]\nname = \"urgent\"\npriority_tier = 2\nweight = 3.5\n"
                         "preempt_mode = \"requeue\"\n"
                         "[[qos]]\nname = \"low\"\n[[qos]]\nname = \"high\"\npriority = 100\n"
                         "preempt = [\"low\"]\n"
                         "[[account]]\nname = \"physics\"\nshares = 3\n"
                         "[[account]]\nname = \"theory\"\nparent = \"physics\"\n"
                         "[[user]]\nuid = 1000\naccount = \"theory\"\nshares = 2\n"
                         "[[user]]\nname = \"root\"\naccount = \"physics\"\n") +
                     kRank0;
  auto c = parse_config(text, "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->usage_half_life_s, 3600);
  EXPECT_EQ(c->decision_log, "/tmp/d.jsonl");
  EXPECT_EQ(c->queue_depth, 50);
  EXPECT_EQ(c->full_queue_depth, 500);
  EXPECT_EQ(c->full_cycle_interval_s, 0);
  EXPECT_EQ(c->scheduler_options.at("backfill.reservation_depth"), "2");
  EXPECT_EQ(c->scheduler_options.at("priority.weight_age"), "10");
  EXPECT_EQ(c->scheduler_options.at("priority.favor_small"), "true");
  ASSERT_EQ(c->site.queues.size(), 2u);
  EXPECT_EQ(c->site.default_queue, "batch");
  EXPECT_EQ(c->site.queues[0].limits.max_cores_per_user, 8);
  EXPECT_EQ(c->site.queues[0].limits.max_time_limit_s, 7200);
  EXPECT_EQ(c->site.queues[1].preempt_mode, PreemptMode::kRequeue);
  EXPECT_EQ(c->site.queues[1].priority_tier, 2);
  EXPECT_DOUBLE_EQ(c->site.queues[1].weight, 3.5);
  ASSERT_EQ(c->site.qos.size(), 2u);
  EXPECT_EQ(c->site.qos[1].preempt, std::vector<std::string>{"low"});
  ASSERT_EQ(c->site.accounts.size(), 2u);
  EXPECT_EQ(c->site.accounts[1].parent, "physics");
  ASSERT_EQ(c->site.users.size(), 2u);
  EXPECT_EQ(c->site.users[0].uid, 1000u);
  EXPECT_EQ(c->site.users[1].uid, 0u);
}

TEST(ConfigTest, AQueuesNodesAndWhoMayUseIt) {
  std::string text = std::string(
                         "[[queue]]\nname = \"gpu\"\nnodes = \"node[1-2]\"\n"
                         "allow_groups = [\"ml\"]\nallow_accounts = [\"physics\", \"chem\"]\n") +
                     kRank0 +
                     "[[rank]]\nname = \"node1\"\nendpoint = \"tcp://127.0.0.1:7001\"\n"
                     "public_key = \"Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID\"\n"
                     "[[rank]]\nname = \"node2\"\nendpoint = \"tcp://127.0.0.1:7002\"\n"
                     "public_key = \"Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hIE\"\n";
  auto c = parse_config(text, "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const QueueConfig& q = c->site.queues.at(0);
  EXPECT_EQ(q.nodes, (std::vector<std::string>{"node1", "node2"}));
  EXPECT_EQ(q.allow_groups, std::vector<std::string>{"ml"});
  EXPECT_EQ(q.allow_accounts, (std::vector<std::string>{"physics", "chem"}));
  for (const auto& [nodes, expected] : std::vector<std::pair<std::string, std::string>>{
           {"node[1-3]", "queue 'gpu' names 'node3', which is not a node's [[rank]]"},
           {"leader", "queue 'gpu' names 'leader', which is not a node's [[rank]]"},
           {"node[1-", "'queue gpu.nodes': bad node list"},
           {"", "'queue gpu.nodes': bad node list '': it is empty"}}) {
    std::string bad = text;
    bad.replace(bad.find("node[1-2]"), 9, nodes);
    auto r = parse_config(bad, "t.toml");
    ASSERT_FALSE(r.is_ok()) << nodes;
    EXPECT_NE(r.status().message().find(expected), std::string::npos) << r.status().message();
  }
}

TEST(ConfigTest, BadSitePolicy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[[queue]]\nweight = 1.0\n", "[[queue]] needs a name"},
      {"[[queue]]\nname = \"a\"\n[[queue]]\nname = \"a\"\n", "duplicate queue 'a'"},
      {"[[queue]]\nname = \"a\"\ndefault = true\n[[queue]]\nname = \"b\"\ndefault = true\n",
       "both the default"},
      {"[[queue]]\nname = \"a\"\npreempt_mode = \"maybe\"\n", "preempt_mode' must be"},
      {"[[queue]]\nname = \"a\"\nmax_cores = -1\n",
       "'queue a.max_cores' must be from 0 to 1000000000, got -1"},
      {"[[queue]]\nname = \"a\"\nweight = 0\n", "weight' must be positive"},
      {"[[queue]]\nname = \"a\"\nmax_cpus = 3\n", "unknown key 'queue.max_cpus'"},
      {"[[qos]]\nname = \"h\"\npreempt = [\"nope\"]\n", "preempts unknown qos 'nope'"},
      // Names and values from the file are escaped: the message stays one line.
      {"[[qos]]\nname = \"h\"\npreempt = [\"no\\npe\"]\n", "preempts unknown qos 'no\\x0ape'"},
      {"[leader]\nmpi = \"pm\\ni1\"\n", "'leader.mpi' is 'pm\\x0ai1'"},
      {"[leader]\n\"a\\nb\" = 1\n", "unknown key 'leader.a\\x0ab'"},
      {"[[account]]\nname = \"a\"\nparent = \"b\"\n", "unknown parent 'b'"},
      {"[[user]]\nuid = 5\naccount = \"nope\"\n", "needs a configured account"},
      {"[[user]]\nname = \"no-such-user-xyz\"\naccount = \"root\"\n", "unknown user"},
      {"[[user]]\naccount = \"root\"\n", "exactly one of name and uid"},
      {"[scheduler.options]\ndepth = 3\n", "is not \"<action or plugin>.<option>\""},
      {"[scheduler]\nusage_half_life_s = -1\n", "must be from 0 to 3162240000, got -1"},
      {"[scheduler]\nfull_queue_depth = 0\n",
       "'scheduler.full_queue_depth' must be from 1 to 2147483647, got 0"},
      {"[scheduler]\nfull_cycle_interval_s = -1\n", "must be from 0 to 86400, got -1"},
      {"[api]\nlisten = \"0.0.0.0:8443\"\n", "listen needs tls_cert and tls_key"},
      {"[api]\nport = 1\n", "unknown key 'api.port'"},
      {"[[portal]]\nname = \"p\"\ntoken_sha256 = \"abc\"\nusers = [\"a\"]\n",
       "must be 64 lowercase hex digits"},
      {"[[portal]]\nname = \"p\"\ntoken_sha256 = \"" + std::string(64, 'a') + "\"\nusers = []\n",
       "'portal p.users' names nobody"},
  };
  expect_refused_in_one_line(cases);
}

struct BadCase {
  std::string text;
  std::string expected;  // substring of the message
};

TEST(ConfigTest, BadInputNamesFileLineAndKey) {
  const std::vector<BadCase> cases = {
      {"[leader]\nstate_dirr = \"/x\"\n", "t.toml:2: unknown key 'leader.state_dirr'"},
      {"[overlay]\nfanout = \"wide\"\n", "t.toml:2: 'overlay.fanout' must be an integer"},
      {"[overlay]\nfanout = 0\n", "t.toml:2: 'overlay.fanout' must be from 1 to 65536, got 0"},
      {"[overlay]\nheartbeat_interval_ms = 500\nnode_down_after_ms = 100\n",
       "heartbeat_interval_ms <"},
      {"[overlay]\nnode_unresponsive_after_ms = 20000\n", "< node_down_after_ms"},
      {"[overlay]\nheartbeat_interval_ms = 1000\nnode_unresponsive_after_ms = 1500\n"
       "node_down_after_ms = 2000\n",
       "node_down_after_ms > 2 x heartbeat_interval_ms"},
      {"bogus = 1\n", "t.toml:1: unknown key 'bogus'"},
      {"[leader\n", "t.toml:1: "},
      {"[leader]\nsocket = \"/x\"\n", "no [[rank]]"},
      {"[[rank]]\nname = \"a\"\nendpoint = \"tcp://h:1\"\npublic_key = \"short\"\n", "public_key"},
      {std::string(kRank0) + kRank0, "duplicate node name 'leader'"},
      {"[[rank]]\nname = \"a\"\nendpoint = \"tcp://h:1\"\nendpoints = [\"tcp://h:1\"]\n",
       "has both endpoint and endpoints"},
      {"[[rank]]\nname = \"a\"\nendpoints = [\"tcp://h:1\", \"tcp://h:1\"]\n"
       "public_key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"\n",
       "duplicate endpoint 'tcp://h:1'"},
      {std::string(kRank0) + "[[rank]]\nname = \"b\"\nendpoints = [\"tcp://h:2\"]\n",
       "only rank 0 (the leader's candidates) lists endpoints"},
      {"[[rank]]\nname = \"a\"\nendpoints = []\n", "rank 0 has no endpoint"},
      {"[leader]\netcd_cert = \"/c.pem\"\netcd_key = \"/c.key\"\n",
       "leader.etcd_cert and leader.etcd_key go together, with etcd_ca"},
      {"[leader]\netcd_ca = \"/ca.pem\"\netcd_key = \"/c.key\"\n",
       "leader.etcd_cert and leader.etcd_key go together"},
      // Issue 45: an etcd store without client certificates and a store key
      // is one anybody who reaches it can run jobs as root through.
      {"[leader]\nstore = \"etcd\"\netcd_endpoints = [\"h:2379\"]\n",
       "leader.store = \"etcd\" needs etcd_ca, etcd_cert and etcd_key"},
      {"[leader]\nstore = \"etcd\"\netcd_endpoints = [\"h:2379\"]\netcd_ca = \"/ca.pem\"\n"
       "etcd_cert = \"/c.pem\"\netcd_key = \"/c.key\"\n",
       "and a store_key"},
      {"[leader]\netcd_insecure = \"yes\"\n", "bad value for 'leader.etcd_insecure'"},
      {"rank = 3\n", "array of tables"},
      {"# comment\n'\xff'\n", "t.toml:2: not valid UTF-8"},
      {"x = \"\xc3\"\n", "t.toml:1: not valid UTF-8"},
      {"[leader]\nresize_timeout_ms = 0\n",
       "t.toml:2: 'leader.resize_timeout_ms' must be from 1 to 86400000, got 0"},
      {"[agent]\nresize_signal = \"SIGKILL\"\n",
       "t.toml:2: 'agent.resize_signal' unknown signal 'SIGKILL'"},
      {"[metrics]\nlisten = \"9464\"\n", "t.toml:2: 'metrics.listen' want ADDR:PORT, got '9464'"},
      {"[licenses]\nmatlab = 0\n", "t.toml:2: 'licenses.matlab' must be a positive integer"},
      {"[licenses]\n\"a b\" = 1\n", "t.toml:2: bad license name 'a b'"},
      {"[licenses]\nmatlab = \"ten\"\n", "t.toml:2: bad value for 'licenses.matlab'"},
      {"[metrics]\nlisten = \"127.0.0.1:\"\n", "'metrics.listen' want ADDR:PORT"},
      {"[agent]\nprolog = \"prolog.sh\"\n",
       "t.toml:2: 'agent.prolog' must be an absolute path, got 'prolog.sh'"},
      {"[agent]\nhealth_check_interval_s = 0\n",
       "t.toml:2: 'agent.health_check_interval_s' must be from 1 to 86400, got 0"},
      {"[agent]\ngpu_devices = \"/dev/nvidia0\"\n",
       "t.toml:2: 'agent.gpu_devices' must be an array (one entry per GPU)"},
      {"[agent]\ngpu_devices = [\"nvidia0\"]\n",
       "t.toml:2: 'agent.gpu_devices' must name absolute paths, got 'nvidia0'"},
      {"[agent]\ngpu_devices = [[]]\n", "'agent.gpu_devices' names a GPU with no device file"},
      {"[agent]\ngpu_devices = [0]\n", "'agent.gpu_devices' entries must be paths"},
      {"[agent]\nprivate_tmp = \"yes\"\n",
       "t.toml:2: 'agent.private_tmp' must be \"off\", \"dir\" or \"tmpfs\", got 'yes'"},
  };
  for (const auto& c : cases) {
    auto r = parse_config(c.text, "t.toml");
    ASSERT_FALSE(r.is_ok()) << c.text;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos)
        << "message: " << r.status().message() << "\nexpected: " << c.expected;
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
  }
}

TEST(ConfigTest, MissingFile) {
  auto r = load_config("/nonexistent/hpcq.toml");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("/nonexistent/hpcq.toml"), std::string::npos);
}

TEST(SimClusterTest, GroupsInOrder) {
  auto c = parse_sim_cluster(
      "[[nodes]]\ncount = 4\ncores = 16\n\n[[nodes]]\ntopology = \"pack:2 numa:2 core:4 pu:1\"\n",
      "c.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->groups.size(), 2u);
  EXPECT_EQ(c->groups[0].count, 4);
  EXPECT_EQ(c->groups[0].cores, 16);
  EXPECT_EQ(c->groups[1].count, 1);
  EXPECT_EQ(c->groups[1].topology, "pack:2 numa:2 core:4 pu:1");
  EXPECT_EQ(c->groups[1].where, "c.toml:5");
}

TEST(SimClusterTest, BadFilesNameFileAndLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "c.toml: no [[nodes]]"},
      {"[[nodes]]\ncount = 2\n", "c.toml:1: each [[nodes]] needs either 'cores' or 'topology'"},
      {"[[nodes]]\ncores = 2\ntopology = \"core:2\"\n", "not both"},
      {"[[nodes]]\ncores = 0\n", "c.toml:2: 'nodes.cores' must be from 1 to 1048576, got 0"},
      {"[[nodes]]\ncores = 2\nmemory = 3\n", "c.toml:3: unknown key 'nodes.memory'"},
      {"[scheduler]\n", "unknown key 'scheduler'"},
      {"[[nodes]\n", "c.toml:1:"},
  };
  for (const auto& [text, expected] : cases) {
    auto r = parse_sim_cluster(text, "c.toml");
    ASSERT_FALSE(r.is_ok()) << text;
    EXPECT_NE(r.status().message().find(expected), std::string::npos)
        << "message: " << r.status().message() << "\nexpected: " << expected;
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(load_sim_cluster("/nonexistent/c.toml").status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace hpcq
