#include "lib/sched/fairshare.h"

#include <gtest/gtest.h>

#include <cmath>

namespace hpcq::sched {
namespace {

constexpr std::int64_t kDay = 24 * 3600;
constexpr TimeUs kNow = 1'700'000'000 * kUsPerSecond;

// Two accounts under root with shares 3:1, user 1 in "a", user 2 in "b".
SitePolicy three_to_one() {
  SitePolicy site;
  site.accounts = {{"a", "", 3.0}, {"b", "", 1.0}};
  site.users = {{1, "a", 1.0}, {2, "b", 1.0}};
  return site;
}

TEST(FairShareTree, ThreeToOneAccountsByHand) {
  const SitePolicy site = three_to_one();
  UsageLedger usage(kDay);
  usage.charge(1, "a", 60.0, kNow);
  usage.charge(2, "b", 40.0, kNow);
  const FairShareTree tree = FairShareTree::compute(&site, &usage, kNow, {});
  // S_a = 3/4, U_a = 0.6, UE = U under root: F = 2^(-0.6/0.75) = 2^-0.8.
  // S_b = 1/4, U_b = 0.4: F = 2^(-0.4/0.25) = 2^-1.6.
  EXPECT_DOUBLE_EQ(tree.factor(1, "a"), std::exp2(-0.8));
  EXPECT_DOUBLE_EQ(tree.factor(2, "b"), std::exp2(-1.6));
  const FairShareNode* a = tree.find_account("a");
  ASSERT_NE(a, nullptr);
  EXPECT_DOUBLE_EQ(a->norm_shares, 0.75);
  EXPECT_DOUBLE_EQ(a->norm_usage, 0.6);
  EXPECT_DOUBLE_EQ(a->raw_usage, 60.0);
  // Each is the only user of its account: the same numbers one level down.
  const FairShareNode* u1 = tree.find_user(1, "a");
  ASSERT_NE(u1, nullptr);
  EXPECT_DOUBLE_EQ(u1->norm_shares, 0.75);
  EXPECT_DOUBLE_EQ(u1->effective_usage, 0.6);
  // An empty account on the job reads the user's association.
  EXPECT_DOUBLE_EQ(tree.factor(1, ""), std::exp2(-0.8));
}

TEST(FairShareTree, SiblingUsersShareTheirAccountsUsage) {
  // Users 1 and 3 in "a" (1 share each), only user 1 used anything.
  SitePolicy site = three_to_one();
  site.users.push_back({3, "a", 1.0});
  UsageLedger usage(kDay);
  usage.charge(1, "a", 60.0, kNow);
  usage.charge(2, "b", 40.0, kNow);
  const FairShareTree tree = FairShareTree::compute(&site, &usage, kNow, {});
  // S = 0.75 * 1/2 = 0.375 each; UE_a = 0.6.
  // user 1: UE = 0.6 + (0.6 - 0.6) * 1/2 = 0.6: F = 2^(-0.6/0.375) = 2^-1.6.
  // user 3: UE = 0 + (0.6 - 0) * 1/2 = 0.3:     F = 2^(-0.3/0.375) = 2^-0.8.
  EXPECT_DOUBLE_EQ(tree.factor(1, "a"), std::exp2(-1.6));
  EXPECT_DOUBLE_EQ(tree.factor(3, "a"), std::exp2(-0.8));
  EXPECT_DOUBLE_EQ(tree.find_user(3, "a")->effective_usage, 0.3);
}

TEST(FairShareTree, SubAccountsByHand) {
  // root -> a (1) -> a1 (1), a2 (1); root -> b (1). Users 1 in a1, 2 in a2,
  // 3 in b; usage 50, 0, 50.
  SitePolicy site;
  site.accounts = {{"a1", "a", 1.0}, {"a", "", 1.0}, {"a2", "a", 1.0}, {"b", "root", 1.0}};
  site.users = {{1, "a1", 1.0}, {2, "a2", 1.0}, {3, "b", 1.0}};
  UsageLedger usage(0);
  usage.charge(1, "a1", 50.0, kNow);
  usage.charge(3, "b", 50.0, kNow);
  const FairShareTree tree = FairShareTree::compute(&site, &usage, kNow, {});
  // a: S 0.5, UE 0.5, F 2^-1. a1: S 0.25, UE 0.5 + 0 = 0.5, F 2^-2.
  // a2: S 0.25, UE 0 + (0.5 - 0) * 1/2 = 0.25, F 2^-1; user 2 alone in a2:
  // UE = 0 + (0.25 - 0) * 1 = 0.25, F 2^-1. b and user 3: F 2^-1.
  EXPECT_DOUBLE_EQ(tree.find_account("a")->factor, 0.5);
  EXPECT_DOUBLE_EQ(tree.find_account("a1")->factor, 0.25);
  EXPECT_DOUBLE_EQ(tree.find_account("a2")->effective_usage, 0.25);
  EXPECT_DOUBLE_EQ(tree.factor(1, "a1"), 0.25);
  EXPECT_DOUBLE_EQ(tree.factor(2, "a2"), 0.5);
  EXPECT_DOUBLE_EQ(tree.factor(3, "b"), 0.5);
}

TEST(FairShareTree, NoUsageGivesEveryoneOne) {
  const SitePolicy site = three_to_one();
  const FairShareTree tree = FairShareTree::compute(&site, nullptr, kNow, {});
  EXPECT_DOUBLE_EQ(tree.factor(1, "a"), 1.0);
  EXPECT_DOUBLE_EQ(tree.factor(2, "b"), 1.0);
  EXPECT_DOUBLE_EQ(FairShareTree().factor(42, "anything"), 1.0);
}

TEST(FairShareTree, OldUsageDecaysAwayAgainstNewUsage) {
  // User 1 used 60 two half-lives ago, user 2 used 15 now: after decay both
  // have 15, so with equal shares their factors are equal.
  SitePolicy site;
  site.accounts = {{"a", "", 1.0}, {"b", "", 1.0}};
  site.users = {{1, "a", 1.0}, {2, "b", 1.0}};
  UsageLedger usage(kDay);
  usage.charge(1, "a", 60.0, kNow - 2 * kDay * kUsPerSecond);
  usage.charge(2, "b", 15.0, kNow);
  const FairShareTree now = FairShareTree::compute(&site, &usage, kNow, {});
  EXPECT_DOUBLE_EQ(now.factor(1, "a"), now.factor(2, "b"));
  EXPECT_DOUBLE_EQ(now.factor(1, "a"), std::exp2(-1.0));  // U 0.5, S 0.5
  // Two half-lives earlier user 1 had all of the usage.
  const FairShareTree then =
      FairShareTree::compute(&site, &usage, kNow - 2 * kDay * kUsPerSecond, {});
  EXPECT_LT(then.factor(1, "a"), then.factor(2, "b"));
}

TEST(FairShareTree, UnassociatedUsersGetImplicitSharesOfOne) {
  const SitePolicy site = three_to_one();
  UsageLedger usage(kDay);
  usage.charge(1, "a", 60.0, kNow);
  usage.charge(2, "b", 40.0, kNow);
  // User 9 submits to "a" without an association; user 8 names an account
  // that does not exist and has no association: root, shares 1.
  const FairShareTree tree = FairShareTree::compute(&site, &usage, kNow, {{9, "a"}, {8, "nosuch"}});
  EXPECT_EQ(tree.charged_account(9, "a"), "a");
  EXPECT_EQ(tree.charged_account(8, "nosuch"), "root");
  EXPECT_EQ(tree.charged_account(1, "nosuch"), "a");  // the user's default account
  const FairShareNode* u9 = tree.find_user(9, "a");
  ASSERT_NE(u9, nullptr);
  EXPECT_TRUE(u9->implicit);
  // Root's children a (3), b (1), user 8 (1): S_a = 0.6, S_8 = 0.2.
  EXPECT_DOUBLE_EQ(tree.find_account("a")->norm_shares, 0.6);
  EXPECT_DOUBLE_EQ(tree.find_user(8, "root")->norm_shares, 0.2);
  EXPECT_DOUBLE_EQ(tree.factor(8, "nosuch"), 1.0);  // no usage under root: UE 0
  // In "a": users 1 and 9 at 1 share each: S 0.3; user 9 UE = 0.6 * 1/2.
  EXPECT_DOUBLE_EQ(u9->norm_shares, 0.3);
  EXPECT_DOUBLE_EQ(tree.factor(9, "a"), std::exp2(-0.3 / 0.3));
  // Not seen at compute(): reads the account's factor, 2^(-0.6/0.6).
  EXPECT_DOUBLE_EQ(tree.factor(10, "a"), std::exp2(-1.0));
}

TEST(FairShareTree, SnapshotJobsAndLedgerAddImplicitAssociations) {
  const SitePolicy site = three_to_one();
  UsageLedger usage(kDay);
  usage.charge(7, "b", 10.0, kNow);  // an unassociated user's usage
  Snapshot snapshot;
  snapshot.now = kNow;
  snapshot.site = &site;
  snapshot.usage = &usage;
  PendingJob job;
  job.uid = 6;
  job.account = "a";
  snapshot.queue.push_back(job);
  const FairShareTree tree = FairShareTree::compute(snapshot);
  ASSERT_NE(tree.find_user(6, "a"), nullptr);
  ASSERT_NE(tree.find_user(7, "b"), nullptr);
  EXPECT_DOUBLE_EQ(tree.find_user(7, "b")->raw_usage, 10.0);
  EXPECT_DOUBLE_EQ(tree.find_account("b")->norm_usage, 1.0);
}

TEST(FairShareTree, ZeroSharesEarnNothing) {
  SitePolicy site;
  site.accounts = {{"a", "", 1.0}, {"idle", "", 0.0}};
  site.users = {{1, "a", 1.0}, {2, "idle", 1.0}};
  const FairShareTree tree = FairShareTree::compute(&site, nullptr, kNow, {});
  EXPECT_DOUBLE_EQ(tree.factor(1, "a"), 1.0);
  EXPECT_DOUBLE_EQ(tree.factor(2, "idle"), 0.0);
}

TEST(FairShareTree, BadParentsHangUnderRoot) {
  SitePolicy site;
  // x and y name each other; z names an account that does not exist.
  site.accounts = {{"x", "y", 1.0}, {"y", "x", 1.0}, {"z", "nosuch", 2.0}};
  site.users = {{1, "x", 1.0}, {2, "z", 1.0}, {3, "ghost", 1.0}};
  const FairShareTree tree = FairShareTree::compute(&site, nullptr, kNow, {});
  EXPECT_EQ(tree.find_account("x")->parent, 0);
  EXPECT_EQ(tree.nodes()[static_cast<std::size_t>(tree.find_account("y")->parent)].account, "x");
  EXPECT_EQ(tree.find_account("z")->parent, 0);
  ASSERT_NE(tree.find_user(3, "root"), nullptr);
  // Root's children: x (1), z (2), user 3 (1).
  EXPECT_DOUBLE_EQ(tree.find_account("z")->norm_shares, 0.5);
  EXPECT_DOUBLE_EQ(tree.find_user(1, "x")->norm_shares, 0.25 * 1.0 / 2.0);
}

}  // namespace
}  // namespace hpcq::sched
