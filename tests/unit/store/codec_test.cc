#include "lib/store/codec.h"

#include <gtest/gtest.h>

namespace hpcq::store {
namespace {

job::JobSpec sample_spec() {
  job::JobSpec spec;
  spec.name = "sim \"quoted\" é";
  spec.argv = {"/usr/bin/mpirun", "-n", "8", "./a.out"};
  spec.script = "#!/bin/sh\n#HPCQ -N 2\nsrun ./a.out\n";
  spec.request.nodes = 2;
  spec.request.ntasks = 8;
  spec.request.cpus_per_task = 4;
  spec.request.mem_per_node_bytes = 0xFFFF'FFFF'FFFF'FFF0ull;  // above INT64_MAX
  spec.time_limit_s = 3600;
  spec.output = "out-%j.txt";
  spec.error = "err-%j.txt";
  spec.queue = "batch";
  spec.cwd = "/home/alice";
  spec.env = {{"PATH", "/usr/bin"}, {"OMP_NUM_THREADS", "4"}, {"EMPTY", ""}};
  spec.requeue = true;
  return spec;
}

void expect_same(const job::JobSpec& a, const job::JobSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.argv, b.argv);
  EXPECT_EQ(a.script, b.script);
  EXPECT_EQ(a.request.nodes, b.request.nodes);
  EXPECT_EQ(a.request.ntasks, b.request.ntasks);
  EXPECT_EQ(a.request.cpus_per_task, b.request.cpus_per_task);
  EXPECT_EQ(a.request.mem_per_node_bytes, b.request.mem_per_node_bytes);
  EXPECT_EQ(a.time_limit_s, b.time_limit_s);
  EXPECT_EQ(a.output, b.output);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.queue, b.queue);
  EXPECT_EQ(a.cwd, b.cwd);
  EXPECT_EQ(a.env, b.env);
  EXPECT_EQ(a.requeue, b.requeue);
}

TEST(Codec, StatesRoundTripWithUserVisibleNames) {
  const job::JobState all[] = {job::JobState::kPending,   job::JobState::kRunning,
                               job::JobState::kCompleted, job::JobState::kFailed,
                               job::JobState::kCancelled, job::JobState::kTimeout,
                               job::JobState::kNodeFail};
  for (job::JobState s : all) {
    auto back = decode_state(encode_state(s));
    ASSERT_TRUE(back.is_ok()) << encode_state(s);
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(encode_state(job::JobState::kNodeFail), "NODE_FAIL");
  EXPECT_EQ(encode_state(job::JobState::kPending), "PENDING");
  auto bad = decode_state("pending");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'pending'"), std::string::npos);
}

TEST(Codec, SpecRoundTrip) {
  job::JobSpec spec = sample_spec();
  auto back = decode_spec(encode_spec(spec));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  expect_same(spec, *back);

  job::JobSpec empty;
  auto back_empty = decode_spec(encode_spec(empty));
  ASSERT_TRUE(back_empty.is_ok());
  expect_same(empty, *back_empty);
}

// What a site's policy decides on (-w, -x, -C, --ntasks-per-node, -L,
// --gres) must survive a leader restart: a pending job that lost its
// constraint or licenses would start where or while it may not.
TEST(Codec, SitePlacementFieldsRoundTrip) {
  job::JobSpec spec = sample_spec();
  spec.nodelist = {"node1", "node2"};
  spec.exclude = {"node3"};
  spec.constraint = "a100&ib|v100";
  spec.ntasks_per_node = 4;
  spec.licenses = {{"matlab", 2}, {"fluent", 1}};
  spec.request.gres = {{"nvme", 2}};
  spec.mpi = "pmix";
  auto back = decode_spec(encode_spec(spec));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->nodelist, spec.nodelist);
  EXPECT_EQ(back->exclude, spec.exclude);
  EXPECT_EQ(back->constraint, spec.constraint);
  EXPECT_EQ(back->ntasks_per_node, 4);
  EXPECT_EQ(back->licenses, spec.licenses);
  EXPECT_EQ(back->request.gres, spec.request.gres);
  EXPECT_EQ(back->mpi, "pmix");
  EXPECT_EQ(decode_spec(R"({"licenses":{"matlab":"two"}})").status().message(),
            "spec.licenses.matlab: must be an integer");
}

// A job sbatch submitted keeps its SLURM_* variables across a leader
// restart: a requeued or pending one would start without them.
TEST(Codec, SlurmEnvironmentRoundTrips) {
  job::JobSpec spec = sample_spec();
  spec.slurm_environment = true;
  auto back = decode_spec(encode_spec(spec));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_TRUE(back->slurm_environment);
  EXPECT_EQ(encode_spec(sample_spec()).find("slurm"), std::string::npos) << "written only when set";
}

// A submission's idempotency key is stored with its job, so that the
// leader after a failover answers a repeat with that job, not a new one;
// a row written before keys existed has none.
TEST(Codec, SubmissionKeyRoundTrip) {
  job::JobSpec spec = sample_spec();
  spec.submission_key = "0123456789abcdef0123456789abcdef";
  auto back = decode_spec(encode_spec(spec));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->submission_key, spec.submission_key);
  auto old = decode_spec(encode_spec(sample_spec()));
  ASSERT_TRUE(old.is_ok());
  EXPECT_EQ(old->submission_key, "");
  EXPECT_EQ(encode_spec(sample_spec()).find("submission_key"), std::string::npos);
}

// Dependencies are stored as their text: '?' lists and singleton read back
// as written, and a row from before them still reads.
TEST(Codec, DependenciesRoundTripAsText) {
  for (const char* text : {"afterok:12:13,afterany:14", "singleton", "afterok:5,singleton",
                           "afterok:1?afterok:2?singleton"}) {
    job::JobSpec spec = sample_spec();
    spec.dependencies = job::parse_dependencies(text).value();
    const std::string stored = encode_spec(spec);
    EXPECT_NE(stored.find(std::string("\"dependency\":\"") + text + "\""), std::string::npos)
        << stored;
    auto back = decode_spec(stored);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_EQ(back->dependencies, spec.dependencies) << text;
  }
  auto old = decode_spec(R"({"name": "x", "dependency": "afterok:3:4"})");
  ASSERT_TRUE(old.is_ok()) << old.status().to_string();
  EXPECT_EQ(old->dependencies, (std::vector<job::Dependency>{{job::DependencyType::kAfterOk, 3},
                                                             {job::DependencyType::kAfterOk, 4}}));
  EXPECT_NE(decode_spec(R"({"dependency": "afterok:1,afterok:2?afterok:3"})")
                .status()
                .message()
                .find("--dependency"),
            std::string::npos);
}

// Commands, scripts, paths and environment values are bytes (issue 20,
// item 12): stored exactly, not replaced by U+FFFD.
TEST(Codec, SpecKeepsBytesThatAreNotUtf8) {
  job::JobSpec spec;
  spec.argv = {"/bin/echo", "caf\xe9", "\xff\xfe"};
  spec.script = "#!/bin/sh\n# \xe9t\xe9\necho hi\n";
  spec.cwd = "/home/\xe9";
  spec.output = "/tmp/out-\xff";
  spec.env = {{"LATIN1", "caf\xe9"}, {"TEXT", "caf\xc3\xa9"}};
  auto back = decode_spec(encode_spec(spec));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->argv, spec.argv);
  EXPECT_EQ(back->script, spec.script);
  EXPECT_EQ(back->cwd, spec.cwd);
  EXPECT_EQ(back->output, spec.output);
  EXPECT_EQ(back->env, spec.env);
  // What is UTF-8 stays a plain string in the column.
  EXPECT_NE(encode_spec(spec).find("\"TEXT\":\"caf\xc3\xa9\""), std::string::npos);
  EXPECT_EQ(decode_spec(R"({"argv":[{"base64":"!"}]})").status().message(),
            "spec.argv[0]: must be a string (or {\"base64\": ...})");
}

TEST(Codec, NodeRangeRoundTrip) {
  job::JobSpec spec;
  spec.argv = {"app"};
  spec.request.nodes = 1;
  spec.max_nodes = 4;
  spec.elastic = true;
  auto back = decode_spec(encode_spec(spec));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->request.nodes, 1);
  EXPECT_EQ(back->max_nodes, 4);
  EXPECT_TRUE(back->elastic);
  // A spec stored before ranges existed reads as rigid.
  auto old = decode_spec(R"({"argv":["x"]})");
  ASSERT_TRUE(old.is_ok()) << old.status().message();
  EXPECT_EQ(old->max_nodes, 0);
  EXPECT_FALSE(old->elastic);
}

TEST(Codec, PlacementOptionsRoundTrip) {
  job::JobSpec spec;
  spec.argv = {"true"};
  spec.request.gpus_per_task = 2;
  spec.request.mem_per_cpu_bytes = 1 << 20;
  spec.request.node_distribution = resource::Distribution::kCyclic;
  spec.request.core_distribution = resource::Distribution::kCyclic;
  spec.request.cpu_bind = resource::CpuBind::kNone;
  spec.request.numa_policy = resource::NumaPolicy::kSingleNumaNode;
  spec.request.oversubscribe = true;
  spec.request.gres = {{"nvme", 2}, {"fpga", 1}};
  spec.profile = "memory";
  spec.workers = 3;
  auto back = decode_spec(encode_spec(spec));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->request.gpus_per_task, 2);
  EXPECT_EQ(back->request.mem_per_cpu_bytes, 1u << 20);
  EXPECT_EQ(back->request.node_distribution, resource::Distribution::kCyclic);
  EXPECT_EQ(back->request.core_distribution, resource::Distribution::kCyclic);
  EXPECT_EQ(back->request.cpu_bind, resource::CpuBind::kNone);
  EXPECT_EQ(back->request.numa_policy, resource::NumaPolicy::kSingleNumaNode);
  EXPECT_TRUE(back->request.oversubscribe);
  EXPECT_EQ(back->request.gres, (std::map<std::string, int>{{"fpga", 1}, {"nvme", 2}}));
  EXPECT_EQ(back->profile, "memory");
  EXPECT_EQ(back->workers, 3);

  resource::Allocation a;
  resource::NodeAllocation part;
  part.rank = 1;
  part.node = "n1";
  part.cores = {0, 1};
  part.numa = {0};
  part.gpus = {0, 1};
  part.gres = {{"nvme", 2}};
  part.ntasks = 2;
  part.workers.push_back({0, 1, {0, 2}, {0, 1}});
  a.nodes.push_back(part);
  a.gpus_per_task = 1;
  a.shared = true;
  a.node_distribution = resource::Distribution::kCyclic;
  a.cpu_bind = resource::CpuBind::kThreads;
  auto alloc = decode_allocation(encode_allocation(a));
  ASSERT_TRUE(alloc.is_ok()) << alloc.status().message();
  EXPECT_EQ(alloc->gpus_per_task, 1);
  EXPECT_TRUE(alloc->shared);
  EXPECT_EQ(alloc->node_distribution, resource::Distribution::kCyclic);
  EXPECT_EQ(alloc->cpu_bind, resource::CpuBind::kThreads);
  EXPECT_EQ(alloc->nodes[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(alloc->nodes[0].gres, (std::map<std::string, int>{{"nvme", 2}}));
  ASSERT_EQ(alloc->nodes[0].workers.size(), 1u);
  EXPECT_EQ(alloc->nodes[0].workers[0].group, 1);
  EXPECT_EQ(alloc->nodes[0].workers[0].ranks, (std::vector<int>{0, 2}));

  EXPECT_FALSE(decode_spec(R"({"argv":["x"],"request":{"cpu_bind":"sockets"}})").is_ok());
  EXPECT_EQ(decode_spec(R"({"argv":["x"],"request":{"gres":{"nvme":"2"}}})").status().message(),
            "spec.request.gres.nvme: must be an integer");
}

TEST(Codec, SpecWithInvalidUtf8StillEncodesAsValidJson) {
  job::JobSpec spec;
  spec.name = std::string("bad\xff\xfe", 5);
  auto back = decode_spec(encode_spec(spec));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->name.substr(0, 3), "bad");
}

TEST(Codec, AllocationRoundTrip) {
  resource::Allocation a;
  a.cpus_per_task = 2;
  resource::NodeAllocation n0;
  n0.rank = 1;
  n0.node = "node001";
  n0.cores = {0, 1, 2, 3};
  n0.numa = {0};
  n0.memory_bytes = 8ull << 30;
  n0.ntasks = 2;
  n0.first_task = 0;
  resource::NodeAllocation n1 = n0;
  n1.rank = 7;
  n1.node = "node007";
  n1.cores = {16, 17, 48, 49};
  n1.numa = {1, 3};
  n1.first_task = 2;
  a.nodes = {n0, n1};

  auto back = decode_allocation(encode_allocation(a));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->cpus_per_task, 2);
  ASSERT_EQ(back->nodes.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back->nodes[i].rank, a.nodes[i].rank);
    EXPECT_EQ(back->nodes[i].node, a.nodes[i].node);
    EXPECT_EQ(back->nodes[i].cores, a.nodes[i].cores);
    EXPECT_EQ(back->nodes[i].numa, a.nodes[i].numa);
    EXPECT_EQ(back->nodes[i].memory_bytes, a.nodes[i].memory_bytes);
    EXPECT_EQ(back->nodes[i].ntasks, a.nodes[i].ntasks);
    EXPECT_EQ(back->nodes[i].first_task, a.nodes[i].first_task);
  }

  auto empty = decode_allocation(encode_allocation({}));
  ASSERT_TRUE(empty.is_ok());
  EXPECT_TRUE(empty->empty());
}

TEST(Codec, AbsentFieldsTakeDefaultsAndUnknownOnesAreIgnored) {
  auto spec = decode_spec(R"({"name": "x", "from_the_future": [1, 2]})");
  ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
  EXPECT_EQ(spec->name, "x");
  EXPECT_EQ(spec->request.ntasks, 1);
  EXPECT_EQ(spec->request.cpus_per_task, 1);
  EXPECT_FALSE(spec->requeue);
}

struct BadCase {
  const char* json;
  const char* message_part;
};

TEST(Codec, BadSpecJsonIsAnErrorNamingTheField) {
  const BadCase cases[] = {
      {"", "not valid JSON"},
      {"{\"name\": ", "not valid JSON"},
      {"[1, 2]", "must be a JSON object"},
      {"\"text\"", "must be a JSON object"},
      {R"({"name": 3})", "spec.name: must be a string"},
      {R"({"argv": ["a", 2]})", "spec.argv[1]: must be a string"},
      {R"({"argv": "a b"})", "spec.argv: must be an array"},
      {R"({"request": {"ntasks": "8"}})", "spec.request.ntasks: must be an integer"},
      {R"({"request": {"ntasks": 1.5}})", "spec.request.ntasks: must be an integer"},
      {R"({"request": {"ntasks": 4294967296}})", "spec.request.ntasks: 4294967296 is out of range"},
      {R"({"request": {"mem_per_node_bytes": -1}})", "must not be negative"},
      {R"({"env": {"A": 1}})", "spec.env.A: must be a string"},
      {R"({"requeue": "yes"})", "spec.requeue: must be true or false"},
  };
  for (const BadCase& c : cases) {
    auto r = decode_spec(c.json);
    ASSERT_FALSE(r.is_ok()) << c.json;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << c.json;
    EXPECT_NE(r.status().message().find(c.message_part), std::string::npos)
        << c.json << " -> " << r.status().message();
  }
}

TEST(Codec, NodeDetailRoundTripsAndOldRowsRead) {
  const std::string text = encode_node_detail({18446744073709551615ULL});
  EXPECT_EQ(text, R"({"incarnation":18446744073709551615})");
  EXPECT_EQ(decode_node_detail(text)->incarnation, 18446744073709551615ULL);
  EXPECT_EQ(decode_node_detail("")->incarnation, 0u);
  EXPECT_EQ(decode_node_detail("{}")->incarnation, 0u);
  auto bad = decode_node_detail(R"({"incarnation":"7"})");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(), "node.incarnation: must be an integer");
  EXPECT_FALSE(decode_node_detail("[1]").is_ok());
  EXPECT_FALSE(decode_node_detail(R"({"incarnation":-1})").is_ok());
}

TEST(Codec, BadAllocationJsonIsAnError) {
  const BadCase cases[] = {
      {"{", "allocation: not valid JSON"},
      {"null", "allocation: must be a JSON object"},
      {R"({"nodes": {}})", "allocation.nodes: must be an array"},
      {R"({"nodes": [{"cores": [0, "1"]}]})", "allocation.nodes[0].cores[1]: must be an integer"},
      {R"({"nodes": [{"rank": -1}]})", "allocation.nodes[0].rank: -1 must not be negative"},
      {R"({"nodes": [7]})", "allocation.nodes[0]: must be an object"},
  };
  for (const BadCase& c : cases) {
    auto r = decode_allocation(c.json);
    ASSERT_FALSE(r.is_ok()) << c.json;
    EXPECT_NE(r.status().message().find(c.message_part), std::string::npos)
        << c.json << " -> " << r.status().message();
  }
}

}  // namespace
}  // namespace hpcq::store
