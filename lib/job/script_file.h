// Reading the file that `hpcq submit` and `hpcq batch` are given, to tell a
// script ("#!") from a command and to send the script to hpcqd. Bounded: a
// device (`hpcq batch /dev/zero`) or a huge file must be refused before it
// is read, not after it has filled the memory.
//
// The size bound is Slurm's default max_script_size (SchedulerParameters in
// slurm.conf: 4 MiB, 4194304 bytes): a batch script is text that hpcqd keeps
// in its store with the job, not a place for data.
//
// Reads on the caller's thread; no state.
#pragma once

#include <cstddef>
#include <string>

#include "lib/core/status.h"

namespace hpcq::job {

inline constexpr std::size_t kMaxScriptBytes = std::size_t{4} << 20;

// The text of the file at `path`, as SubmitContext::read_file wants it:
//  - kNotFound: no such file, one that cannot be opened or read, or a
//    directory: the word is then a command (`hpcq submit hostname`);
//  - kFailedPrecondition: not a regular file (a device, a FIFO, a socket),
//    or a script ("#!") larger than `max_bytes`; the message says which;
//  - a file that does not start with "#!" is no script: only its first
//    bytes are read and returned (a command may be a large binary).
Result<std::string> read_script_file(const std::string& path,
                                     std::size_t max_bytes = kMaxScriptBytes);

}  // namespace hpcq::job
