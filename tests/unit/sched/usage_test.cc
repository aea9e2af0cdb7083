#include "lib/sched/usage.h"

#include <gtest/gtest.h>

#include <cmath>

namespace hpcq::sched {
namespace {

constexpr std::int64_t kDay = 24 * 3600;
constexpr TimeUs kT0 = 1'700'000'000 * kUsPerSecond;

TimeUs at_s(std::int64_t seconds) { return kT0 + seconds * kUsPerSecond; }

TEST(UsageLedger, HalvesAfterEachHalfLife) {
  UsageLedger ledger(kDay);
  ledger.charge(7, "a", 1000.0, kT0);
  EXPECT_DOUBLE_EQ(ledger.usage(7, "a", kT0), 1000.0);
  EXPECT_DOUBLE_EQ(ledger.usage(7, "a", at_s(kDay)), 500.0);
  EXPECT_DOUBLE_EQ(ledger.usage(7, "a", at_s(2 * kDay)), 250.0);
  EXPECT_NEAR(ledger.usage(7, "a", at_s(kDay / 2)), 1000.0 / std::sqrt(2.0), 1e-9);
  // Reading before the last change does not grow the value.
  EXPECT_DOUBLE_EQ(ledger.usage(7, "a", kT0 - kUsPerSecond), 1000.0);
}

TEST(UsageLedger, DefaultHalfLifeIsSevenDays) {
  UsageLedger ledger;
  EXPECT_EQ(ledger.half_life_s(), 7 * kDay);
  ledger.charge(1, "", 64.0, kT0);
  EXPECT_DOUBLE_EQ(ledger.usage(1, "", at_s(7 * kDay)), 32.0);
}

TEST(UsageLedger, ZeroHalfLifeNeverDecays) {
  UsageLedger ledger(0);
  ledger.charge(1, "a", 10.0, kT0);
  ledger.charge(1, "a", 5.0, at_s(365 * kDay));
  EXPECT_DOUBLE_EQ(ledger.usage(1, "a", at_s(3650 * kDay)), 15.0);
}

TEST(UsageLedger, IncrementalChargesMatchTheClosedForm) {
  // A running job charged every 10 minutes for a day, half-life 6 hours:
  // U(t) = sum_i 600 * 2^-((t - t_i) / H).
  const std::int64_t half_life = 6 * 3600;
  UsageLedger ledger(half_life);
  double expected = 0;
  const std::int64_t end = kDay;
  for (std::int64_t t = 600; t <= end; t += 600) {
    ledger.charge(3, "p", 600.0, at_s(t));
    expected += 600.0 * std::exp2(-static_cast<double>(end - t) / half_life);
  }
  EXPECT_NEAR(ledger.usage(3, "p", at_s(end)), expected, expected * 1e-12);
}

TEST(UsageLedger, LateChargesCountAsIfInOrder) {
  UsageLedger in_order(kDay);
  in_order.charge(1, "a", 100.0, at_s(0));
  in_order.charge(1, "a", 40.0, at_s(kDay));
  in_order.charge(1, "a", 10.0, at_s(2 * kDay));
  UsageLedger shuffled(kDay);
  shuffled.charge(1, "a", 10.0, at_s(2 * kDay));
  shuffled.charge(1, "a", 100.0, at_s(0));
  shuffled.charge(1, "a", 40.0, at_s(kDay));
  // 100/4 + 40/2 + 10 at day 2.
  EXPECT_DOUBLE_EQ(in_order.usage(1, "a", at_s(2 * kDay)), 55.0);
  EXPECT_NEAR(shuffled.usage(1, "a", at_s(2 * kDay)), 55.0, 1e-9);
}

TEST(UsageLedger, StaysFiniteOverYearsOfHourlyCharges) {
  // The steady state of 3600 core-seconds an hour with a one-day half-life
  // is 3600 / (1 - 2^(-1/24)); a formula with growing 2^(t/H) terms would
  // overflow long before ten years.
  UsageLedger ledger(kDay);
  const std::int64_t hours = 10 * 365 * 24;
  for (std::int64_t h = 1; h <= hours; ++h) ledger.charge(9, "x", 3600.0, at_s(h * 3600));
  const double steady = 3600.0 / (1.0 - std::exp2(-1.0 / 24.0));
  const double u = ledger.usage(9, "x", at_s(hours * 3600));
  EXPECT_TRUE(std::isfinite(u));
  EXPECT_NEAR(u, steady, steady * 1e-9);
}

TEST(UsageLedger, KeepsMemoryAndGpuBesideCores) {
  UsageLedger ledger(kDay);
  ledger.charge(2, "a", UsageCharge{100.0, 4096.0, 8.0}, kT0);
  const UsageCharge later = ledger.usage_detail(2, "a", at_s(kDay));
  EXPECT_DOUBLE_EQ(later.core_seconds, 50.0);
  EXPECT_DOUBLE_EQ(later.memory_byte_seconds, 2048.0);
  EXPECT_DOUBLE_EQ(later.gpu_seconds, 4.0);
}

TEST(UsageLedger, SumsPerAccountAndInTotal) {
  UsageLedger ledger(kDay);
  ledger.charge(1, "a", 10.0, kT0);
  ledger.charge(2, "a", 30.0, kT0);
  ledger.charge(1, "b", 60.0, kT0);
  EXPECT_DOUBLE_EQ(ledger.usage(1, "a", kT0), 10.0);
  EXPECT_DOUBLE_EQ(ledger.usage(1, "c", kT0), 0.0);
  EXPECT_DOUBLE_EQ(ledger.account_usage("a", kT0), 40.0);
  EXPECT_DOUBLE_EQ(ledger.account_usage("b", at_s(kDay)), 30.0);
  EXPECT_DOUBLE_EQ(ledger.total_usage(at_s(kDay)), 50.0);
}

TEST(UsageLedger, IgnoresNegativeCharges) {
  UsageLedger ledger(kDay);
  ledger.charge(1, "a", 10.0, kT0);
  ledger.charge(1, "a", -5.0, kT0);
  EXPECT_DOUBLE_EQ(ledger.usage(1, "a", kT0), 10.0);
}

TEST(UsageLedger, EntriesRestoreToTheSameUsage) {
  UsageLedger ledger(kDay);
  ledger.charge(1, "a", UsageCharge{10.0, 1.0, 2.0}, kT0);
  ledger.charge(2, "b", 30.0, at_s(3600));
  const std::vector<UsageEntry> saved = ledger.entries();
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved[0], (UsageEntry{1, "a", 10.0, 1.0, 2.0, kT0}));
  EXPECT_EQ(saved[1], (UsageEntry{2, "b", 30.0, 0.0, 0.0, at_s(3600)}));

  UsageLedger restored(kDay);
  restored.charge(5, "z", 99.0, kT0);  // replaced by restore()
  restored.restore(saved);
  EXPECT_EQ(restored.entries(), saved);
  EXPECT_DOUBLE_EQ(restored.usage(1, "a", at_s(kDay)), 5.0);
  EXPECT_DOUBLE_EQ(restored.usage(5, "z", kT0), 0.0);
}

}  // namespace
}  // namespace hpcq::sched
