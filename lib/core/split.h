// Splitting a list on a separator ("a,b,c"): what option values, directives
// and environment variables share.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hpcq {

// Each item of `text` between `separator`s, empty ones kept ("a,,b": "a",
// "", "b"; "": one empty item), so that a caller can refuse them. The views
// point into `text`.
std::vector<std::string_view> split(std::string_view text, char separator);
// The same, empty items dropped, as strings ("a,,b,": "a", "b").
std::vector<std::string> split_nonempty(std::string_view text, char separator);

}  // namespace hpcq
