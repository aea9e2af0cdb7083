#include "lib/core/hostlist.h"

#include <charconv>
#include <cstdint>
#include <optional>

#include "lib/core/units.h"

namespace hpcq {
namespace {

struct Range {
  std::uint64_t low = 0, high = 0;
  std::size_t width = 0;  // digits of the low bound as written (zero padding)
};

Status bad(std::string_view text, const std::string& why) {
  return invalid_argument("bad node list " + quote(text) + ": " + why);
}

std::optional<std::uint64_t> number(std::string_view digits) {
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  std::uint64_t n = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return n;
}

std::string padded(std::uint64_t n, std::size_t width) {
  std::string s = std::to_string(n);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// "1-3,5" -> ranges.
Result<std::vector<Range>> ranges_of(std::string_view inside, std::string_view text) {
  std::vector<Range> out;
  std::size_t at = 0;
  while (at <= inside.size()) {
    std::size_t comma = inside.find(',', at);
    if (comma == std::string_view::npos) comma = inside.size();
    const std::string_view item = inside.substr(at, comma - at);
    const std::size_t dash = item.find('-');
    const std::string_view lo = item.substr(0, dash);
    const std::string_view hi = dash == std::string_view::npos ? lo : item.substr(dash + 1);
    auto low = number(lo), high = number(hi);
    if (!low || !high) return bad(text, "want numbers or ranges in brackets, got " + quote(item));
    if (*high < *low) return bad(text, "range " + quote(item) + " runs backwards");
    out.push_back({*low, *high, lo.size()});
    at = comma + 1;
  }
  return out;
}

// One name of the list (no top-level comma), brackets multiplied out.
Status expand_one(std::string_view item, std::string_view text, std::vector<std::string>& out) {
  std::vector<std::string> names{""};
  std::size_t at = 0;
  while (at < item.size()) {
    const std::size_t open = item.find('[', at);
    const std::string_view plain =
        item.substr(at, open == std::string_view::npos ? std::string_view::npos : open - at);
    if (plain.find(']') != std::string_view::npos) return bad(text, "']' without '['");
    for (std::string& name : names) name += plain;
    if (open == std::string_view::npos) break;
    const std::size_t close = item.find(']', open);
    if (close == std::string_view::npos) return bad(text, "'[' without ']'");
    auto ranges = ranges_of(item.substr(open + 1, close - open - 1), text);
    if (!ranges.is_ok()) return ranges.status();
    std::size_t count = 0;
    for (const Range& r : *ranges)
      count += static_cast<std::size_t>(
          std::min<std::uint64_t>(r.high - r.low + 1, kMaxHostlistNames + 1));
    if (names.size() * count + out.size() > kMaxHostlistNames) {
      return bad(text, "more than " + std::to_string(kMaxHostlistNames) + " names");
    }
    std::vector<std::string> next;
    next.reserve(names.size() * count);
    for (const std::string& name : names) {
      for (const Range& r : *ranges) {
        for (std::uint64_t n = r.low; n <= r.high; ++n) next.push_back(name + padded(n, r.width));
      }
    }
    names = std::move(next);
    at = close + 1;
  }
  for (std::string& name : names) {
    if (name.empty()) return bad(text, "an empty name");
    if (name.find_first_of(" \t\n") != std::string::npos) return bad(text, "a name with a space");
    out.push_back(std::move(name));
  }
  return Status::ok();
}

// A name's trailing digits: the prefix before them, their number, and the
// width they must be written at: 0 unless zero-padded ("n07": 2), so that
// unpadded numbers of any length share a bracket ("n[9-11]").
struct Split {
  std::string_view prefix;
  std::optional<std::uint64_t> number;
  std::size_t width = 0;
  bool same_kind(const Split& o) const {
    return number && o.number && prefix == o.prefix && width == o.width;
  }
};

Split split(std::string_view name) {
  std::size_t digits = name.size();
  while (digits > 0 && name[digits - 1] >= '0' && name[digits - 1] <= '9') --digits;
  Split s{name, std::nullopt, 0};
  if (auto n = number(name.substr(digits))) {
    s.prefix = name.substr(0, digits);
    s.number = n;
    const std::size_t written = name.size() - digits;
    if (written > std::to_string(*n).size()) s.width = written;
  }
  return s;
}

}  // namespace

Result<std::vector<std::string>> expand_hostlist(std::string_view text) {
  std::vector<std::string> out;
  if (text.empty()) return bad(text, "it is empty");
  std::size_t at = 0, depth = 0, start = 0;
  for (; at <= text.size(); ++at) {
    const char c = at < text.size() ? text[at] : ',';
    if (c == '[') ++depth;
    if (c == ']' && depth > 0) --depth;
    if (c == ',' && depth == 0) {
      HPCQ_RETURN_IF_ERROR(expand_one(text.substr(start, at - start), text, out));
      start = at + 1;
    }
  }
  if (depth != 0) return bad(text, "'[' without ']'");
  return out;
}

std::string compress_hostlist(const std::vector<std::string>& names) {
  std::string out;
  std::size_t i = 0;
  while (i < names.size()) {
    if (!out.empty()) out += ',';
    const Split first = split(names[i]);
    // The names after it of the same prefix and kind of number: one bracket.
    std::size_t j = i + 1;
    while (j < names.size() && first.same_kind(split(names[j]))) ++j;
    if (j - i == 1) {
      out += names[i++];
      continue;
    }
    std::string inside;
    for (std::size_t k = i; k < j;) {
      const std::uint64_t low = *split(names[k]).number;
      std::size_t m = k + 1;
      while (m < j && *split(names[m]).number == low + (m - k)) ++m;
      if (!inside.empty()) inside += ',';
      inside += padded(low, first.width);
      if (m - k > 1) inside += "-" + padded(low + (m - k - 1), first.width);
      k = m;
    }
    out += std::string(first.prefix) + "[" + inside + "]";
    i = j;
  }
  return out;
}

}  // namespace hpcq
