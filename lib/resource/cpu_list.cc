#include "lib/resource/cpu_list.h"

#include <algorithm>
#include <charconv>
#include <cstddef>

namespace hpcq::resource {
namespace {

std::string_view trim(std::string_view s) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// A whole-string decimal in [0, kMaxCpuId]; false for anything else.
bool parse_id(std::string_view s, int& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && ptr == end && out >= 0 && out <= kMaxCpuId;
}

}  // namespace

Result<std::vector<int>> parse_cpu_list(std::string_view text) {
  const std::string_view list = trim(text);
  std::vector<int> cpus;
  if (list.empty()) return cpus;
  const auto fail = [&](std::string_view piece, const char* what) {
    return invalid_argument("cpu list '" + std::string(list) + "': " + what + " '" +
                            std::string(piece) + "'");
  };
  std::size_t pos = 0;
  while (pos <= list.size()) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    const std::string_view piece = trim(list.substr(pos, comma - pos));
    if (piece.empty()) return fail(piece, "empty element");
    const std::size_t dash = piece.find('-');
    if (dash == std::string_view::npos) {
      int id = 0;
      if (!parse_id(piece, id)) return fail(piece, "bad cpu id");
      cpus.push_back(id);
    } else {
      int lo = 0;
      int hi = 0;
      if (!parse_id(piece.substr(0, dash), lo) || !parse_id(piece.substr(dash + 1), hi)) {
        return fail(piece, "bad range");
      }
      if (lo > hi) return fail(piece, "descending range");
      for (int id = lo; id <= hi; ++id) cpus.push_back(id);
    }
    pos = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::vector<int> ids;
  ids.reserve(cpus.size());
  for (int id : cpus) {
    if (id >= 0) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::string out;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ids[i]);
    if (j > i) out += '-' + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace hpcq::resource
