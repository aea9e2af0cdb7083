#include "lib/core/units.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <optional>

namespace hpcq {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// A non-empty run of decimal digits, no sign; nullopt on junk or overflow.
std::optional<std::int64_t> parse_digits(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::int64_t value = 0;
  for (char c : text) {
    if (!is_digit(c)) return std::nullopt;
    if (__builtin_mul_overflow(value, 10, &value) ||
        __builtin_add_overflow(value, c - '0', &value)) {
      return std::nullopt;
    }
  }
  return value;
}

// Sum of value * unit; nullopt on overflow.
std::optional<std::int64_t> add_scaled(std::int64_t total, std::int64_t value, std::int64_t unit) {
  std::int64_t scaled = 0;
  if (__builtin_mul_overflow(value, unit, &scaled) ||
      __builtin_add_overflow(total, scaled, &total)) {
    return std::nullopt;
  }
  return total;
}

constexpr std::int64_t kMinute = 60;
constexpr std::int64_t kHour = 60 * kMinute;
constexpr std::int64_t kDay = 24 * kHour;

// More fractional digits than this say nothing about a time limit in whole
// seconds, and keeping them would overflow the arithmetic below.
constexpr size_t kMaxFractionDigits = 9;

// "1.5h": Flux's Standard Duration (RFC 23) with units s, m, h, d.
std::optional<std::int64_t> parse_flux_duration(std::string_view number, std::int64_t unit) {
  const size_t dot = number.find('.');
  const std::string_view whole = number.substr(0, dot);
  std::string_view fraction;
  if (dot != std::string_view::npos) {
    fraction = number.substr(dot + 1);
    if (fraction.empty() || fraction.size() > kMaxFractionDigits) return std::nullopt;
  }
  std::int64_t seconds = 0;
  if (!whole.empty() || fraction.empty()) {
    auto w = parse_digits(whole);
    if (!w) return std::nullopt;
    auto total = add_scaled(0, *w, unit);
    if (!total) return std::nullopt;
    seconds = *total;
  }
  if (!fraction.empty()) {
    auto f = parse_digits(fraction);
    if (!f) return std::nullopt;
    std::int64_t scale = 1;
    for (size_t i = 0; i < fraction.size(); ++i) scale *= 10;
    // f < 1e9 and unit <= 86400: no overflow. Round up: a limit is never
    // shorter than the user asked for.
    const std::int64_t part = *f * unit;
    const std::int64_t add = part / scale + (part % scale != 0 ? 1 : 0);
    if (__builtin_add_overflow(seconds, add, &seconds)) return std::nullopt;
  }
  return seconds;
}

// Slurm's [D-]fields: without a day part the fields are MM, MM:SS or
// HH:MM:SS; with one they are HH, HH:MM or HH:MM:SS.
std::optional<std::int64_t> parse_slurm_duration(std::string_view text) {
  std::int64_t total = 0;
  bool has_days = false;
  const size_t dash = text.find('-');
  if (dash != std::string_view::npos) {
    auto days = parse_digits(text.substr(0, dash));
    if (!days) return std::nullopt;
    auto t = add_scaled(0, *days, kDay);
    if (!t) return std::nullopt;
    total = *t;
    has_days = true;
    text = text.substr(dash + 1);
  }
  std::array<std::int64_t, 3> fields{};
  size_t count = 0;
  while (true) {
    if (count == fields.size()) return std::nullopt;
    const size_t colon = text.find(':');
    auto field = parse_digits(text.substr(0, colon));
    if (!field) return std::nullopt;
    fields[count++] = *field;
    if (colon == std::string_view::npos) break;
    text = text.substr(colon + 1);
  }
  static constexpr std::array<std::int64_t, 3> kHms = {kHour, kMinute, 1};
  static constexpr std::array<std::int64_t, 3> kMs = {kMinute, 1, 0};
  // Units of the fields, left to right, per form.
  std::array<std::int64_t, 3> units{};
  if (has_days || count == 3) {
    units = kHms;
  } else {
    units = kMs;
  }
  for (size_t i = 0; i < count; ++i) {
    auto t = add_scaled(total, fields[i], units[i]);
    if (!t) return std::nullopt;
    total = *t;
  }
  return total;
}

}  // namespace

bool is_plain_name(std::string_view name) {
  constexpr std::size_t kMaxName = 64;
  return !name.empty() && name.size() <= kMaxName &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.';
         });
}

std::string quote(std::string_view text) {
  constexpr size_t kMaxShown = 64;
  std::string out = "'";
  const std::string_view shown = text.substr(0, kMaxShown);
  for (char c : shown) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      std::array<char, 5> buf{};
      std::snprintf(buf.data(), buf.size(), "\\x%02x", u);
      out += buf.data();
    } else {
      out += c;
    }
  }
  if (text.size() > kMaxShown) out += "...";
  out += "'";
  return out;
}

Result<std::int64_t> parse_duration_s(std::string_view text) {
  if (iequals(text, "unlimited") || iequals(text, "infinite")) return std::int64_t{0};
  std::optional<std::int64_t> seconds;
  if (!text.empty()) {
    switch (lower(text.back())) {
      case 's': seconds = parse_flux_duration(text.substr(0, text.size() - 1), 1); break;
      case 'm': seconds = parse_flux_duration(text.substr(0, text.size() - 1), kMinute); break;
      case 'h': seconds = parse_flux_duration(text.substr(0, text.size() - 1), kHour); break;
      case 'd': seconds = parse_flux_duration(text.substr(0, text.size() - 1), kDay); break;
      default: seconds = parse_slurm_duration(text); break;
    }
  }
  if (!seconds) return invalid_argument("bad duration " + quote(text));
  if (*seconds == 0) {
    return invalid_argument("bad duration " + quote(text) +
                            ": must be more than 0 (UNLIMITED for no limit)");
  }
  return *seconds;
}

std::string format_duration(std::int64_t seconds) {
  if (seconds == 0) return "UNLIMITED";
  if (seconds < 0) return "INVALID";
  const std::int64_t days = seconds / kDay;
  const std::int64_t rest = seconds % kDay;
  std::array<char, 64> buf{};
  if (days > 0) {
    std::snprintf(buf.data(), buf.size(), "%lld-%02lld:%02lld:%02lld", static_cast<long long>(days),
                  static_cast<long long>(rest / kHour),
                  static_cast<long long>(rest % kHour / kMinute),
                  static_cast<long long>(rest % kMinute));
  } else {
    std::snprintf(
        buf.data(), buf.size(), "%02lld:%02lld:%02lld", static_cast<long long>(rest / kHour),
        static_cast<long long>(rest % kHour / kMinute), static_cast<long long>(rest % kMinute));
  }
  return buf.data();
}

namespace {

struct MemoryUnit {
  char letter;
  int shift;
};
// Largest first, for format_memory.
constexpr std::array<MemoryUnit, 5> kMemoryUnits = {
    {{'P', 50}, {'T', 40}, {'G', 30}, {'M', 20}, {'K', 10}}};

}  // namespace

Result<std::uint64_t> parse_memory_bytes(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && is_digit(text[digits])) ++digits;
  if (digits == 0) return invalid_argument("bad size " + quote(text));
  std::uint64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    if (__builtin_mul_overflow(value, 10u, &value) ||
        __builtin_add_overflow(value, static_cast<unsigned>(text[i] - '0'), &value)) {
      return invalid_argument("size " + quote(text) + " is too large");
    }
  }
  const std::string_view suffix = text.substr(digits);
  int shift = -1;
  if (suffix.empty()) {
    shift = 20;  // Slurm: a plain number is MiB
  } else if (iequals(suffix, "b")) {
    shift = 0;
  } else {
    const std::string_view tail = suffix.substr(1);
    if (tail.empty() || iequals(tail, "b") || iequals(tail, "ib")) {
      for (const auto& unit : kMemoryUnits) {
        if (lower(suffix[0]) == lower(unit.letter)) shift = unit.shift;
      }
    }
  }
  if (shift < 0) return invalid_argument("bad size " + quote(text));
  if (value > (UINT64_MAX >> shift)) {
    return invalid_argument("size " + quote(text) + " is too large");
  }
  return value << shift;
}

std::string format_memory(std::uint64_t bytes) {
  if (bytes == 0) return "0";
  for (const auto& unit : kMemoryUnits) {
    const std::uint64_t size = std::uint64_t{1} << unit.shift;
    if (bytes % size == 0) return std::to_string(bytes / size) + unit.letter;
  }
  return std::to_string(bytes) + "B";
}

Result<std::int64_t> parse_local_time(const std::string& text, const char* option) {
  std::tm tm{};
  const char* end = nullptr;
  for (const char* format : {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d"}) {
    tm = {};
    end = strptime(text.c_str(), format, &tm);
    if (end && *end == '\0') break;
    end = nullptr;
  }
  if (!end) {
    return invalid_argument(std::string(option) + ": bad time " + quote(text) +
                            " (want now, now+DURATION or YYYY-MM-DD[THH:MM[:SS]])");
  }
  tm.tm_isdst = -1;
  const std::time_t t = std::mktime(&tm);
  if (t == static_cast<std::time_t>(-1)) {
    return invalid_argument(std::string(option) + ": no such local time " + quote(text));
  }
  return static_cast<std::int64_t>(t) * 1000000;
}

namespace {

// Slurm's unit words after now+COUNT (src/common/parse_time.c), longest
// first so that "minutes" is not read as "minute" and junk.
struct UnitWord {
  std::string_view name;
  std::int64_t seconds;
};
constexpr std::array<UnitWord, 10> kUnitWords = {{{"seconds", 1},
                                                  {"second", 1},
                                                  {"minutes", kMinute},
                                                  {"minute", kMinute},
                                                  {"hours", kHour},
                                                  {"hour", kHour},
                                                  {"days", kDay},
                                                  {"day", kDay},
                                                  {"weeks", 7 * kDay},
                                                  {"week", 7 * kDay}}};

// Seconds of an offset after "now+": COUNT[UNIT] as Slurm, else a duration
// as -t; nullopt on junk. A count too large for int64 is INT64_MAX: it is
// past any bound, not junk.
std::optional<std::int64_t> offset_seconds(std::string_view offset) {
  constexpr std::int64_t kPastAnyBound = INT64_MAX;
  const size_t digits = offset.find_first_not_of("0123456789");
  if (digits == std::string_view::npos) {  // Slurm: seconds
    return parse_digits(offset).value_or(offset.empty() ? 0 : kPastAnyBound);
  }
  if (digits > 0) {
    const std::string_view word = offset.substr(digits);
    for (const UnitWord& unit : kUnitWords) {
      if (!iequals(word, unit.name)) continue;
      auto count = parse_digits(offset.substr(0, digits));
      if (!count) return kPastAnyBound;
      return add_scaled(0, *count, unit.seconds).value_or(kPastAnyBound);
    }
  }
  auto duration = parse_duration_s(offset);
  if (!duration.is_ok()) return std::nullopt;
  return *duration;
}

// YYYY-MM-DDTHH:MM:SS in the system's time zone, as parse_local_time reads it.
std::string local_time_text(std::int64_t us) {
  const std::time_t t = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  std::array<char, 32> buf{};
  if (localtime_r(&t, &tm) == nullptr ||
      std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
    return std::to_string(us / 1000000) + " s since the epoch";
  }
  return buf.data();
}

}  // namespace

Result<When> parse_when(const std::string& text, const char* option) {
  if (text == "now") return When{0, true};
  std::optional<std::string_view> offset;
  if (text.starts_with("now+")) offset = std::string_view(text).substr(4);
  if (text.starts_with("+")) offset = std::string_view(text).substr(1);
  if (offset) {
    const auto seconds = offset_seconds(*offset);
    if (!seconds || *seconds <= 0) {
      return invalid_argument(std::string(option) + ": bad offset " + quote(*offset) +
                              " (want now+COUNT[seconds|minutes|hours|days|weeks], e.g. now+90, "
                              "now+2hours, or now+DURATION as -t takes it, e.g. now+1:00:00)");
    }
    if (*seconds > kMaxWhenAheadS) {
      return invalid_argument(std::string(option) + ": " + quote(text) + " is more than " +
                              std::to_string(kMaxWhenAheadS / kDay) + " days ahead");
    }
    return When{*seconds * 1000000, true};
  }
  auto at = parse_local_time(text, option);
  if (!at.is_ok()) return at.status();
  return When{*at, false};
}

Result<std::int64_t> resolve_when(const When& when, std::int64_t now_us, const char* option) {
  const std::int64_t at = when.at(now_us);
  if (at - now_us > kMaxWhenAheadS * 1000000) {
    return invalid_argument(std::string(option) + ": " + local_time_text(at) + " is more than " +
                            std::to_string(kMaxWhenAheadS / kDay) + " days ahead");
  }
  return at;
}

}  // namespace hpcq
