// Linux CPU lists: "0-3,8,10-11" <-> {0, 1, 2, 3, 8, 10, 11}.
//
// The format of cpuset.cpus, cpuset.mems, /sys/devices/system/cpu/online and
// taskset -c. Pure functions on values; safe from any thread.
//
// Errors: parse_cpu_list returns kInvalidArgument naming the bad piece and the
// whole list, e.g. "cpu list '0-x': bad range '0-x'".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lib/core/status.h"

namespace hpcq::resource {

// The highest CPU id accepted; bounds the memory a hostile "0-4000000000" takes.
inline constexpr int kMaxCpuId = 65535;

// Parses a list into ascending, unique ids. An empty list (or only
// whitespace: files in /sys end with a newline) is the empty set. Ranges must
// be ascending ("3-1" is an error); ids must be in [0, kMaxCpuId].
Result<std::vector<int>> parse_cpu_list(std::string_view text);

// Formats ids (any order, duplicates allowed; negative ids are a bug and are
// skipped) as the shortest list: ascending, runs of two or more as "a-b".
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace hpcq::resource
