// Node lists in hostlist form, as Slurm writes them: "node[1-3,5],gpu07,
// rack[1-2]-n[01-02]". A bracket holds numbers and ranges; a range's low
// bound gives the width ("[01-10]": node01..node10); several brackets in
// one name multiply out, the last one fastest. Names keep their order.
//
// Pure. Errors: kInvalidArgument, one line, for a malformed list or one
// that expands to more than kMaxHostlistNames names.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lib/core/status.h"

namespace hpcq {

inline constexpr std::size_t kMaxHostlistNames = 65536;

// "node[1-3],gpu1" -> {"node1", "node2", "node3", "gpu1"}.
Result<std::vector<std::string>> expand_hostlist(std::string_view text);

// The shortest form that expands back to `names` in their order: runs of
// one prefix with consecutive numbers of one width become a bracket,
// {"node1", "node2", "node3", "node5", "gpu1"} -> "node[1-3,5],gpu1".
std::string compress_hostlist(const std::vector<std::string>& names);

}  // namespace hpcq
