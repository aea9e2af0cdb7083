#include "lib/resource/granularity.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hpcq::resource {
namespace {

// The paper's testbed: 4 worker nodes of 2 x 18 cores with 4 reserved (32
// usable); every job is 16 ranks.
GranularityRequest paper(Profile profile, GranularityPolicy policy, int user_workers = 0) {
  return {16, profile, policy, 4, 32, user_workers};
}

struct Row {
  const char* what;
  GranularityRequest request;
  Granularity want;
};

TEST(Granularity, Algorithm1) {
  using P = Profile;
  using G = GranularityPolicy;
  const Row rows[] = {
      {"scale, cpu", paper(P::kCpu, G::kScale), {4, 4, 4}},
      {"scale, memory", paper(P::kMemory, G::kScale), {4, 4, 4}},
      {"scale, network", paper(P::kNetwork, G::kScale), {1, 1, 1}},
      {"granularity, cpu", paper(P::kCpu, G::kGranularity), {4, 16, 4}},
      {"granularity, memory", paper(P::kMemory, G::kGranularity), {4, 16, 4}},
      {"granularity, network", paper(P::kNetwork, G::kGranularity), {1, 1, 1}},
      {"no policy, no user value", paper(P::kCpu, G::kNone), {1, 1, 1}},
      {"no policy, user says 2", paper(P::kMemory, G::kNone, 2), {1, 2, 1}},
      {"scale, fewer ranks than nodes", {2, P::kCpu, G::kScale, 4, 32, 0}, {2, 2, 2}},
      {"granularity, user overrides to 8", paper(P::kCpu, G::kGranularity, 8), {4, 8, 4}},
      {"scale, user overrides to 2", paper(P::kCpu, G::kScale, 2), {2, 2, 2}},
      {"network never one rank per worker", paper(P::kNetwork, G::kNone, 16), {1, 1, 1}},
      {"network too big for a node: one worker per node",
       {40, P::kNetwork, G::kGranularity, 4, 32, 0},
       {2, 2, 2}},
      {"no policy but too big for one node", {40, P::kCpu, G::kNone, 4, 32, 0}, {2, 2, 2}},
      {"user workers above ranks are clamped", {3, P::kCpu, G::kNone, 4, 32, 10}, {1, 3, 1}},
  };
  for (const Row& row : rows) {
    auto got = choose_granularity(row.request);
    ASSERT_TRUE(got.is_ok()) << row.what << ": " << got.status().to_string();
    EXPECT_EQ(got->nodes, row.want.nodes) << row.what;
    EXPECT_EQ(got->workers, row.want.workers) << row.what;
    EXPECT_EQ(got->groups, row.want.groups) << row.what;
  }
}

TEST(Granularity, Errors) {
  EXPECT_EQ(
      choose_granularity({0, Profile::kCpu, GranularityPolicy::kScale, 4, 32, 0}).status().code(),
      Code::kInvalidArgument);
  EXPECT_EQ(
      choose_granularity({16, Profile::kCpu, GranularityPolicy::kScale, 4, 32, -1}).status().code(),
      Code::kInvalidArgument);
  auto too_big = choose_granularity({200, Profile::kCpu, GranularityPolicy::kScale, 4, 32, 0});
  ASSERT_FALSE(too_big.is_ok());
  EXPECT_EQ(too_big.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(too_big.status().message().find("200 ranks"), std::string::npos);
}

TEST(Granularity, Algorithm2RoundRobinAndProportionalResources) {
  // 10 ranks over 4 workers: 3, 3, 2, 2 slots; 10 CPUs and 10 GiB in all.
  auto workers = split_workers(10, {2, 4, 2}, 10'000, 10ULL << 30);
  ASSERT_TRUE(workers.is_ok());
  ASSERT_EQ(workers->size(), 4u);
  const std::vector<std::vector<int>> ranks = {{0, 4, 8}, {1, 5, 9}, {2, 6}, {3, 7}};
  std::uint64_t memory = 0;
  std::int64_t cpu = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    const Worker& w = (*workers)[i];
    EXPECT_EQ(w.id, static_cast<int>(i));
    EXPECT_EQ(w.ranks, ranks[i]);
    EXPECT_EQ(w.cpu_millis, 1000 * w.slots());
    EXPECT_EQ(w.memory_bytes, (10ULL << 30) / 10 * static_cast<std::uint64_t>(w.slots()));
    memory += w.memory_bytes;
    cpu += w.cpu_millis;
  }
  EXPECT_EQ(memory, 10ULL << 30);
  EXPECT_EQ(cpu, 10'000);
  // Balanced groups (each worker to the lightest, lowest id on ties): 3+2
  // ranks in each.
  EXPECT_EQ((*workers)[0].group, 0);
  EXPECT_EQ((*workers)[1].group, 1);
  EXPECT_EQ((*workers)[2].group, 0);
  EXPECT_EQ((*workers)[3].group, 1);

  const std::vector<std::string> hosts = {"w0", "w1", "w2"};
  EXPECT_EQ(hostfile(*workers, hosts), "w0 slots=3\nw1 slots=3\nw2 slots=2\nworker-3 slots=2\n");
}

TEST(Granularity, PaperJobsEndToEnd) {
  // CM_G: a 16-rank DGEMM job (16 CPUs, 32 GiB) is 16 one-slot workers in 4
  // groups of 4; CM_S: 4 workers of 4 slots, 4 CPUs and 8 GiB each.
  auto g = choose_granularity(paper(Profile::kCpu, GranularityPolicy::kGranularity));
  ASSERT_TRUE(g.is_ok());
  auto fine = split_workers(16, *g, 16'000, 32ULL << 30);
  ASSERT_TRUE(fine.is_ok());
  ASSERT_EQ(fine->size(), 16u);
  std::vector<int> per_group(4, 0);
  for (const Worker& w : *fine) {
    EXPECT_EQ(w.slots(), 1);
    EXPECT_EQ(w.cpu_millis, 1000);
    EXPECT_EQ(w.memory_bytes, 2ULL << 30);
    per_group[static_cast<std::size_t>(w.group)]++;
  }
  EXPECT_EQ(per_group, (std::vector<int>{4, 4, 4, 4}));

  auto s = choose_granularity(paper(Profile::kMemory, GranularityPolicy::kScale));
  ASSERT_TRUE(s.is_ok());
  auto coarse = split_workers(16, *s, 16'000, 32ULL << 30);
  ASSERT_TRUE(coarse.is_ok());
  ASSERT_EQ(coarse->size(), 4u);
  for (const Worker& w : *coarse) {
    EXPECT_EQ(w.slots(), 4);
    EXPECT_EQ(w.cpu_millis, 4000);
    EXPECT_EQ(w.memory_bytes, 8ULL << 30);
    EXPECT_EQ(w.group, w.id);
  }
  EXPECT_FALSE(split_workers(0, *s, 1, 1).is_ok());
  EXPECT_FALSE(split_workers(4, {1, 0, 1}, 1, 1).is_ok());
}

TEST(Granularity, Names) {
  for (Profile p : {Profile::kCpu, Profile::kMemory, Profile::kNetwork}) {
    EXPECT_EQ(parse_profile(profile_name(p)), p);
  }
  EXPECT_EQ(parse_profile("network"), Profile::kNetwork);
  EXPECT_EQ(parse_profile("memory"), Profile::kMemory);
  EXPECT_FALSE(parse_profile("CPU").has_value());
  EXPECT_FALSE(parse_profile("").has_value());
  for (GranularityPolicy p :
       {GranularityPolicy::kScale, GranularityPolicy::kGranularity, GranularityPolicy::kNone}) {
    EXPECT_EQ(parse_policy(policy_name(p)), p);
  }
  EXPECT_EQ(parse_policy("granularity"), GranularityPolicy::kGranularity);
  EXPECT_FALSE(parse_policy("fine").has_value());
}

}  // namespace
}  // namespace hpcq::resource
