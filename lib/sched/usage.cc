#include "lib/sched/usage.h"

#include <algorithm>
#include <cmath>

namespace hpcq::sched {
namespace {

UsageCharge scaled(const UsageCharge& c, double factor) {
  return {c.core_seconds * factor, c.memory_byte_seconds * factor, c.gpu_seconds * factor};
}

void add(UsageCharge& into, const UsageCharge& c) {
  into.core_seconds += c.core_seconds;
  into.memory_byte_seconds += c.memory_byte_seconds;
  into.gpu_seconds += c.gpu_seconds;
}

}  // namespace

UsageLedger::UsageLedger(std::int64_t half_life_s) : half_life_s_(half_life_s) {}

double UsageLedger::decay_factor(TimeUs elapsed_us) const {
  if (half_life_s_ <= 0 || elapsed_us <= 0) return 1.0;
  const double half_lives =
      static_cast<double>(elapsed_us) / (static_cast<double>(half_life_s_) * kUsPerSecond);
  return std::exp2(-half_lives);
}

UsageCharge UsageLedger::decayed(const Value& value, TimeUs now) const {
  return scaled(value.amount, decay_factor(now - value.as_of));
}

void UsageLedger::charge(std::uint32_t uid, const std::string& account, double core_seconds,
                         TimeUs at) {
  charge(uid, account, UsageCharge{core_seconds, 0, 0}, at);
}

void UsageLedger::charge(std::uint32_t uid, const std::string& account, const UsageCharge& amount,
                         TimeUs at) {
  const UsageCharge positive{std::max(0.0, amount.core_seconds),
                             std::max(0.0, amount.memory_byte_seconds),
                             std::max(0.0, amount.gpu_seconds)};
  auto [it, inserted] = values_.try_emplace({uid, account});
  Value& v = it->second;
  if (inserted) {
    v.amount = positive;
    v.as_of = at;
    return;
  }
  if (at >= v.as_of) {
    v.amount = decayed(v, at);
    v.as_of = at;
    add(v.amount, positive);
  } else {
    // A late report: what it charged at `at` has decayed by now (as_of).
    add(v.amount, scaled(positive, decay_factor(v.as_of - at)));
  }
}

UsageCharge UsageLedger::usage_detail(std::uint32_t uid, const std::string& account,
                                      TimeUs now) const {
  const auto it = values_.find({uid, account});
  if (it == values_.end()) return {};
  return decayed(it->second, now);
}

double UsageLedger::usage(std::uint32_t uid, const std::string& account, TimeUs now) const {
  return usage_detail(uid, account, now).core_seconds;
}

double UsageLedger::account_usage(const std::string& account, TimeUs now) const {
  double sum = 0;
  for (const auto& [key, value] : values_) {
    if (key.second == account) sum += decayed(value, now).core_seconds;
  }
  return sum;
}

double UsageLedger::total_usage(TimeUs now) const {
  double sum = 0;
  for (const auto& [key, value] : values_) sum += decayed(value, now).core_seconds;
  return sum;
}

std::vector<UsageEntry> UsageLedger::entries() const {
  std::vector<UsageEntry> out;
  out.reserve(values_.size());
  for (const auto& [key, value] : values_) {
    out.push_back({key.first, key.second, value.amount.core_seconds,
                   value.amount.memory_byte_seconds, value.amount.gpu_seconds, value.as_of});
  }
  return out;
}

void UsageLedger::restore(const std::vector<UsageEntry>& entries) {
  values_.clear();
  for (const UsageEntry& e : entries) {
    charge(e.uid, e.account, UsageCharge{e.core_seconds, e.memory_byte_seconds, e.gpu_seconds},
           e.as_of);
  }
}

}  // namespace hpcq::sched
