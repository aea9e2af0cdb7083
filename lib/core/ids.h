// Identifiers shared by every layer.
#pragma once

#include <cstdint>

namespace hpcq {

// Job ids are assigned by the leader, start at 1, never reused (the store
// keeps the high-water mark).
using JobId = std::uint64_t;

// Rank 0 is the leader; agents are ranks 1..N. The TBON parent of rank r >= 1
// is (r - 1) / fanout (as in Flux's k-ary tree).
using Rank = std::uint32_t;

// Times inside hpcq are microseconds since the Unix epoch. lib/sched and
// lib/resource never read a clock: the time comes in with the snapshot.
using TimeUs = std::int64_t;

constexpr TimeUs kUsPerSecond = 1'000'000;

}  // namespace hpcq
