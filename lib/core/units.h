// Durations and memory sizes as users write them (Slurm's -t and --mem, plus
// Flux-style "30s"/"1.5h"), and back to text.
//
// Pure functions on values; safe from any thread. Every error is
// Status(kInvalidArgument) with a one-line message that quotes the bad text
// ("bad duration '1:2:3:4'"); callers prefix the option or file:line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lib/core/status.h"

namespace hpcq {

// Seconds from a time limit. Accepted forms:
//   Slurm: "MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS"
//          (fields are not range-checked: "90" and "0:90" are fine, as in Slurm);
//   Flux:  a number with a unit s/m/h/d, fractions allowed ("1.5h"); a
//          fraction of a second rounds up, so a limit is never shorter than asked;
//   "UNLIMITED" / "infinite" (any case): 0, meaning no limit.
// Any other zero ("0", "0:00", "0s") is an error: a limit must be > 0.
// Rejects signs, whitespace, trailing junk, empty text and int64 overflow.
Result<std::int64_t> parse_duration_s(std::string_view text);

// "1-02:03:04" with a day part, else "HH:MM:SS" ("00:05:00"); 0 is
// "UNLIMITED" (what parse_duration_s reads back); a negative value "INVALID".
std::string format_duration(std::int64_t seconds);

// Bytes from a memory size, like Slurm's --mem: a plain number is MiB; a
// suffix K/M/G/T/P (any case, optionally followed by "B" or "iB") is a binary
// unit (1K = 1024); a bare "B" suffix is bytes. 0 is accepted and means "all
// of the node's memory" (no memory request, the ResourceRequest default).
// Rejects signs, fractions, whitespace, junk, empty text and uint64 overflow.
Result<std::uint64_t> parse_memory_bytes(std::string_view text);

// The largest binary unit that divides the size exactly: "4G", "512M",
// "1536K"; sizes that are not a multiple of 1024 are "1000B". Round-trips
// through parse_memory_bytes.
std::string format_memory(std::uint64_t bytes);

// Microseconds since the epoch of a local time YYYY-MM-DD[THH:MM[:SS]]
// (the system's time zone). Errors name `option`.
Result<std::int64_t> parse_local_time(const std::string& text, const char* option);

// A moment as Slurm's --begin and --start take it: "now"; "now+COUNT" or
// "+COUNT" with an optional unit word as Slurm's (seconds, the default,
// minutes, hours, days, weeks; singular too, any case: "now+90",
// "now+2hours"); "now+DURATION" as -t takes it (parse_duration_s: "30m",
// "1:30:00", "2-0"); or a local time (parse_local_time). An offset must be
// more than 0 and at most kMaxWhenAheadS; one that overflows is refused, not
// wrapped. A relative one is resolved against the now the caller reads, which
// may be later than the parse (a script's directives are read before the job
// is made): resolve_when bounds an absolute one the same way.
constexpr std::int64_t kMaxWhenAheadS = 365 * 24 * 60 * 60;
struct When {
  std::int64_t us = 0;  // since the epoch, or after now when relative
  bool relative = false;
  std::int64_t at(std::int64_t now_us) const { return relative ? now_us + us : us; }
};
Result<When> parse_when(const std::string& text, const char* option);

// when.at(now_us), or an error naming `option` when that is more than
// kMaxWhenAheadS after now_us (a typo such as 2206 for 2026 would otherwise
// hold a job for 180 years).
Result<std::int64_t> resolve_when(const When& when, std::int64_t now_us, const char* option);

// A node feature's or a license's name: 1..64 letters, digits, '_', '-', '.'.
bool is_plain_name(std::string_view name);

// 'text' for an error message: control and non-ASCII bytes escaped as \xNN
// (so the message stays one printable line) and long text cut with "...".
std::string quote(std::string_view text);

}  // namespace hpcq
