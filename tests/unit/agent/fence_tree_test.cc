#include "agent/fence_tree.h"

#include <gtest/gtest.h>

#include <set>

namespace hpcq::agent {
namespace {

// A fanout-2 tree: 0 -> {1, 2}, 1 -> {3, 4}, 2 -> {5, 6}, 3 -> {7, 8}.
constexpr int kFanout = 2;
constexpr std::size_t kMaxBytes = 1 << 20;

overlay::PmiFence contribution(Rank from, std::vector<Rank> world, std::uint32_t seq = 0) {
  overlay::PmiFence f;
  f.set_job_id(9);
  f.set_attempt(0);
  f.set_seq(seq);
  f.set_nodes(static_cast<std::uint32_t>(world.size()));
  for (Rank r : world) f.add_world(r);
  overlay::PmiContribution& part = *f.add_parts();
  part.set_rank(from);
  part.set_kvs("k" + std::to_string(from) + "=v\n");
  return f;
}

std::set<Rank> parts_of(const overlay::PmiFence& f) {
  std::set<Rank> ranks;
  for (const auto& p : f.parts()) ranks.insert(p.rank());
  return ranks;
}

TEST(FenceTree, AnInteriorNodeSendsItsSubtreeAsOne) {
  FenceTree tree(1, kFanout, kMaxBytes);
  const std::vector<Rank> world{1, 2, 3, 4, 7};  // 1, 3, 4, 7 are under 1
  EXPECT_TRUE(tree.up(contribution(3, world), 10).empty());
  EXPECT_TRUE(tree.up(contribution(7, world), 11).empty());
  EXPECT_TRUE(tree.up(contribution(1, world), 12).empty());  // its own
  auto out = tree.up(contribution(4, world), 13);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(parts_of(out[0]), (std::set<Rank>{1, 3, 4, 7}));
  EXPECT_EQ(out[0].parts(0).kvs(), "k3=v\n");
  EXPECT_EQ(out[0].nodes(), 5u);
  EXPECT_EQ(out[0].world_size(), 5);
  // A copy that comes after it went on passes straight through.
  out = tree.up(contribution(3, world), 14);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(parts_of(out[0]), (std::set<Rank>{3}));
}

TEST(FenceTree, WhatPassesTheJobsLimitGoesOnAtOnceInsteadOfBeingHeld) {
  // The leader fails such a fence; no agent on the way holds more of it.
  FenceTree tree(1, kFanout, 64);
  const std::vector<Rank> world{1, 3, 4};
  overlay::PmiFence big = contribution(3, world);
  big.mutable_parts(0)->set_kvs(std::string(70, 'k') + "=\n");
  auto out = tree.up(std::move(big), 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(parts_of(out[0]), (std::set<Rank>{3}));
  // The others pass straight through.
  EXPECT_EQ(tree.up(contribution(4, world), 2).size(), 1u);
  EXPECT_EQ(tree.up(contribution(1, world), 3).size(), 1u);
}

TEST(FenceTree, ANodeWithNoneOfItsWorldBelowSendsAtOnce) {
  FenceTree leaf(4, kFanout, kMaxBytes);
  EXPECT_EQ(leaf.up(contribution(4, {2, 4}), 1).size(), 1u);
  FenceTree interior(1, kFanout, kMaxBytes);  // a world of 2 and 3: only 3 is under 1
  EXPECT_EQ(interior.up(contribution(3, {2, 3}), 1).size(), 1u);
}

TEST(FenceTree, ACopyOfAHeldContributionSendsOnWhatIsHeld) {
  // 4's contribution cannot come (its node is gone, or the tree healed
  // around 1): 3 asks again after two heartbeats, and what is here goes on.
  FenceTree tree(1, kFanout, kMaxBytes);
  const std::vector<Rank> world{3, 4};
  EXPECT_TRUE(tree.up(contribution(3, world), 1).empty());
  auto out = tree.up(contribution(3, world), 2);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(parts_of(out[0]), (std::set<Rank>{3}));
  // 4's comes later: it passes through.
  EXPECT_EQ(tree.up(contribution(4, world), 3).size(), 1u);
}

TEST(FenceTree, FencesAreKeptApartAndHeldOnesExpire) {
  FenceTree tree(1, kFanout, kMaxBytes);
  const std::vector<Rank> world{3, 4};
  EXPECT_TRUE(tree.up(contribution(3, world, 0), 1).empty());
  EXPECT_TRUE(tree.up(contribution(4, world, 1), 2).empty());  // another fence
  EXPECT_TRUE(tree.expire(11, 10).empty());
  auto out = tree.expire(12, 10);  // fence 0 was held since 1
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seq(), 0u);
  EXPECT_EQ(tree.up(contribution(4, world, 0), 13).size(), 1u);  // went on: through
  auto rest = tree.expire(100, 10);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].seq(), 1u);
  // A contribution to a fence of the world that went on long ago (its node
  // was late) passes through too, until the world is forgotten.
  EXPECT_EQ(tree.up(contribution(3, world, 0), 200 * kUsPerSecond).size(), 1u);
  EXPECT_TRUE(tree.expire(200 * kUsPerSecond + FenceTree::kForgetAfter + 1, 10).empty());
  EXPECT_TRUE(
      tree.up(contribution(3, world, 1), 200 * kUsPerSecond + FenceTree::kForgetAfter + 2).empty());
}

TEST(FenceTree, AnOutcomeGoesOnOnceToEachChildSubtreeThatNeedsIt) {
  FenceTree tree(1, kFanout, kMaxBytes);
  overlay::PmiFenceDone done;
  done.set_kvs("all");
  for (Rank r : {1, 4, 7, 8}) done.add_to(r);
  FenceTree::Down d = tree.down(1, done);
  EXPECT_TRUE(d.here);
  ASSERT_EQ(d.onward.size(), 2u);
  EXPECT_EQ(d.onward[0].first, 7u);  // 7 and 8 are under 3, which is not in the world
  EXPECT_EQ(std::vector<Rank>(d.onward[0].second.to().begin(), d.onward[0].second.to().end()),
            (std::vector<Rank>{7, 8}));
  EXPECT_EQ(d.onward[0].second.kvs(), "all");
  EXPECT_EQ(d.onward[1].first, 4u);
  // Passing through 3 (not a destination): split again, one copy each.
  d = FenceTree(3, kFanout, kMaxBytes).down(7, d.onward[0].second);
  EXPECT_FALSE(d.here);
  ASSERT_EQ(d.onward.size(), 2u);
  EXPECT_EQ(d.onward[0].first, 7u);
  EXPECT_EQ(d.onward[1].first, 8u);
  // Without a list: the addressee alone.
  overlay::PmiFenceDone plain;
  d = FenceTree(8, kFanout, kMaxBytes).down(8, plain);
  EXPECT_TRUE(d.here);
  EXPECT_TRUE(d.onward.empty());
}

}  // namespace
}  // namespace hpcq::agent
