// The leader's merge of PMI fences (daemon/pmi_exchange.h FenceMerge): what
// it answers, the job's bound on one fence's keys, and how long it holds
// them.
#include "daemon/pmi_exchange.h"

#include <gtest/gtest.h>

namespace hpcq::daemon {
namespace {

constexpr TimeUs kKeep = 10 * kUsPerSecond;

FenceMerge::Key fence(std::uint32_t seq, JobId job = 7) { return {job, 0, 0, seq}; }

TEST(FenceMerge, AFenceCompletesOnceEveryNodeHasSentItsPart) {
  FenceMerge merge(1 << 20, kKeep);
  auto a = merge.add(fence(0), 2, {{3, "a=1\n"}}, 1);
  EXPECT_TRUE(a.to.empty());
  a = merge.add(fence(0), 2, {{3, "a=1\n"}}, 2);  // a copy: its sender waited two heartbeats
  EXPECT_TRUE(a.to.empty());
  a = merge.add(fence(0), 2, {{5, "b=2\n"}}, 3);
  EXPECT_TRUE(a.completed);
  EXPECT_EQ(a.to, (std::set<Rank>{3, 5}));
  EXPECT_EQ(a.kvs, "a=1\nb=2\n");
  EXPECT_TRUE(a.error.empty());
  // A node whose copy was lost asks again, and is answered alone.
  a = merge.add(fence(0), 2, {{5, "b=2\n"}}, 4);
  EXPECT_FALSE(a.completed);
  EXPECT_EQ(a.to, (std::set<Rank>{5}));
  EXPECT_EQ(a.kvs, "a=1\nb=2\n");
}

TEST(FenceMerge, AFencePastTheJobsLimitFailsOnEveryNodeAndItsKeysAreDropped) {
  FenceMerge merge(10, kKeep);
  EXPECT_TRUE(merge.add(fence(0), 3, {{1, "a=12345\n"}}, 1).to.empty());  // 8 bytes
  auto a = merge.add(fence(0), 3, {{2, "b=6\n"}}, 2);                     // 12 > 10
  EXPECT_TRUE(a.completed);
  EXPECT_EQ(a.to, (std::set<Rank>{1, 2}));
  EXPECT_TRUE(a.kvs.empty());
  EXPECT_EQ(a.error,
            "PMI fence 0 of job 7: the keys its nodes put take more than 10 bytes ([agent] "
            "pmi_max_kvs_bytes)");
  EXPECT_EQ(merge.bytes(), 0u);
  // The node that comes last is told the same.
  a = merge.add(fence(0), 3, {{4, ""}}, 3);
  EXPECT_EQ(a.to, (std::set<Rank>{4}));
  EXPECT_EQ(a.error.substr(0, 21), "PMI fence 0 of job 7:");
  // A step's fence is named with it.
  FenceMerge step_merge(1, kKeep);
  EXPECT_EQ(step_merge.add({7, 0, 2, 1}, 1, {{1, "x=\n"}}, 1).error.substr(0, 23),
            "PMI fence 1 of job 7.2:");
}

TEST(FenceMerge, AnOutcomeIsKeptOnlyWhileANodeMayAskAgain) {
  FenceMerge merge(1 << 20, kKeep);
  auto runs = [](const FenceMerge::Key&, Rank) { return false; };
  const std::string keys(100'000, 'k');
  EXPECT_TRUE(merge.add(fence(0), 1, {{1, keys}}, 1000).completed);
  EXPECT_GE(merge.bytes(), keys.size());
  EXPECT_EQ(merge.drop(1000 + kKeep, runs), 0u);  // not yet
  EXPECT_GE(merge.drop(1001 + kKeep, runs), keys.size());
  EXPECT_EQ(merge.bytes(), 0u);
  auto a = merge.add(fence(0), 1, {{1, keys}}, 2000 + kKeep);
  EXPECT_EQ(a.to, (std::set<Rank>{1}));
  EXPECT_EQ(a.error,
            "PMI fence 0 of job 7: its outcome is no longer held (it completed more than 10 s "
            "before this node asked again)");
}

TEST(FenceMerge, TheNextFenceAndTheRunsEndDropWhatIsHeld) {
  FenceMerge merge(1 << 20, kKeep);
  EXPECT_TRUE(merge.add(fence(0), 1, {{1, "a=1\n"}}, 1).completed);
  EXPECT_TRUE(merge.add(fence(0, 8), 2, {{1, "b=1\n"}}, 1).to.empty());
  EXPECT_EQ(merge.size(), 2u);
  EXPECT_TRUE(merge.add(fence(1), 1, {{1, "c=1\n"}}, 2).completed);
  EXPECT_EQ(merge.size(), 2u);  // job 7's fence 0 is over for every node
  // Job 8's run has ended: its fence half-gathered goes, job 7's stays.
  merge.drop(3, [](const FenceMerge::Key& key, Rank) { return std::get<0>(key) == 8; });
  EXPECT_EQ(merge.size(), 1u);
  merge.drop(3, [](const FenceMerge::Key&, Rank) { return true; });
  EXPECT_EQ(merge.size(), 0u);
  EXPECT_EQ(merge.bytes(), 0u);
}

}  // namespace
}  // namespace hpcq::daemon
