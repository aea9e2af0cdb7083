#include "lib/job/constraint.h"

#include <algorithm>

#include "lib/core/units.h"

namespace hpcq::job {

bool Constraint::matches(const std::vector<std::string>& features) const {
  if (any_of_all.empty()) return true;
  const auto has = [&](const std::string& f) {
    return std::find(features.begin(), features.end(), f) != features.end();
  };
  return std::any_of(any_of_all.begin(), any_of_all.end(),
                     [&](const auto& term) { return std::all_of(term.begin(), term.end(), has); });
}

Result<Constraint> parse_constraint(std::string_view text) {
  constexpr std::size_t kMaxText = 1024;
  Constraint c;
  if (text.empty()) return c;
  const auto bad = [&](const std::string& why) {
    return invalid_argument("-C/--constraint " + quote(std::string(text.substr(0, kMaxText))) +
                            ": " + why);
  };
  if (text.size() > kMaxText) return bad("longer than " + std::to_string(kMaxText) + " bytes");
  if (text.find_first_of("[]()*") != std::string_view::npos) {
    return bad("brackets, parentheses and counts are not supported (want FEATURE&FEATURE|FEATURE)");
  }
  std::vector<std::string> term;
  std::size_t at = 0;
  for (;;) {
    const std::size_t end = text.find_first_of("&|", at);
    const std::string_view name = text.substr(at, end == std::string_view::npos ? end : end - at);
    if (!is_plain_name(name)) {
      return bad(name.empty() ? "an empty feature name"
                              : "bad feature name " + quote(std::string(name)) +
                                    " (letters, digits, '_', '-', '.')");
    }
    term.emplace_back(name);
    if (end == std::string_view::npos || text[end] == '|') {
      c.any_of_all.push_back(std::move(term));
      term.clear();
    }
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return c;
}

}  // namespace hpcq::job
