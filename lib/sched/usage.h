// Decayed past usage per (uid, account), the input of fair-share (Slurm's
// RawUsage with PriorityDecayHalfLife).
//
// Usage is charged in core-seconds (memory byte-seconds and GPU-seconds are
// kept beside it for reports and DRF-style views). Past usage decays with a
// half-life H: at time t the usage of charges u_i made at t_i is
//   U(t) = sum_i u_i * 2^-((t - t_i) / H)
// and H = 0 means no decay. The daemon and the simulator charge a job when it
// ends, or every cycle with the core-seconds since their last charge for a
// running job; both give the same U(t) because decay is linear.
//
// Numerical stability: each entry stores its value as of its last change
// (`as_of`) and decays lazily by the elapsed time only when read or charged,
// so no term ever grows (no 2^(+t/H) factors) and no per-tick work is done.
// A charge dated before an entry's `as_of` (late, out-of-order report) is
// decayed to `as_of` first, so order of charges does not matter either.
//
// Pure: every time is an argument (microseconds since the epoch, as
// everywhere in hpcq); nothing reads a clock. Plain value, not thread-safe.
// Cost: charge and usage are O(log entries); account_usage and total are
// O(entries).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/core/ids.h"

namespace hpcq::sched {

// What a job used over some interval.
struct UsageCharge {
  double core_seconds = 0;
  double memory_byte_seconds = 0;
  double gpu_seconds = 0;
};

// One (uid, account)'s decayed usage as of `as_of`: what the daemon persists
// and hands back to restore().
struct UsageEntry {
  std::uint32_t uid = 0;
  std::string account;  // as charged (a job's account; may be empty)
  double core_seconds = 0;
  double memory_byte_seconds = 0;
  double gpu_seconds = 0;
  TimeUs as_of = 0;

  bool operator==(const UsageEntry&) const = default;
};

class UsageLedger {
 public:
  static constexpr std::int64_t kDefaultHalfLifeS = 7 * 24 * 3600;  // Slurm's default

  // half_life_s <= 0: usage never decays.
  explicit UsageLedger(std::int64_t half_life_s = kDefaultHalfLifeS);

  std::int64_t half_life_s() const { return half_life_s_; }

  // Adds usage at time `at`. Negative amounts are ignored (usage only grows
  // between decays; a negative charge would be a caller's bug).
  void charge(std::uint32_t uid, const std::string& account, double core_seconds, TimeUs at);
  void charge(std::uint32_t uid, const std::string& account, const UsageCharge& amount, TimeUs at);

  // Decayed core-seconds of one (uid, account) at `now`; 0 if never charged.
  double usage(std::uint32_t uid, const std::string& account, TimeUs now) const;
  // All three amounts, decayed to `now`.
  UsageCharge usage_detail(std::uint32_t uid, const std::string& account, TimeUs now) const;
  // Decayed core-seconds charged to `account` by any user (not its
  // sub-accounts: the tree is fairshare.h's business).
  double account_usage(const std::string& account, TimeUs now) const;
  // Decayed core-seconds of everyone.
  double total_usage(TimeUs now) const;

  // The factor by which usage shrinks over `elapsed_us` (1 without decay).
  double decay_factor(TimeUs elapsed_us) const;

  // For persistence: every entry as stored (not decayed to a common time),
  // in (uid, account) order.
  std::vector<UsageEntry> entries() const;
  // Replaces the contents with `entries` (a later entry for the same
  // (uid, account) is added to an earlier one, decayed as for charge()).
  void restore(const std::vector<UsageEntry>& entries);

 private:
  struct Value {
    UsageCharge amount;
    TimeUs as_of = 0;
  };

  // `value` decayed to `now` (never grown: a `now` before as_of reads as_of's value).
  UsageCharge decayed(const Value& value, TimeUs now) const;

  std::int64_t half_life_s_;
  std::map<std::pair<std::uint32_t, std::string>, Value> values_;
};

}  // namespace hpcq::sched
