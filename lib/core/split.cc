#include "lib/core/split.h"

#include <algorithm>

namespace hpcq {

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> items;
  for (std::size_t at = 0;;) {
    const std::size_t end = std::min(text.find(separator, at), text.size());
    items.push_back(text.substr(at, end - at));
    if (end == text.size()) return items;
    at = end + 1;
  }
}

std::vector<std::string> split_nonempty(std::string_view text, char separator) {
  std::vector<std::string> items;
  for (std::string_view item : split(text, separator)) {
    if (!item.empty()) items.emplace_back(item);
  }
  return items;
}

}  // namespace hpcq
