// What a restarted agent needs to take back a job shell its predecessor
// started: <job dir>/shell.json, written by the executor once the shell runs
// (and again when the job's time limit changes).
//
// A job shell outlives its agent (it is its own PID namespace's init, in the
// job's cgroups, in a session of its own). A new agent's executor reads the
// record of each job directory it finds, opens a pidfd on the recorded PID
// and keeps the shell only if the process behind it started when the record
// says (a PID reused since is not the job's). The rest of the job's state
// comes from its launch.json, as at the launch.
//
// Pure but for read_shell_start and open_recorded_shell (/proc and pidfd_open).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "lib/core/ids.h"
#include "lib/core/status.h"

namespace hpcq::agent {

struct ShellRecord {
  pid_t pid = -1;
  // The process's start time in clock ticks since boot (/proc/PID/stat,
  // field 22): a PID and its start time name one process for a boot.
  std::uint64_t start_ticks = 0;
  TimeUs launched = 0;            // the agent's wall clock at the launch: the time limit counts
  std::int64_t time_limit_s = 0;  // the limit now (set_time_limit may have changed it)
};

std::string encode_shell_record(const ShellRecord& record);
Result<ShellRecord> decode_shell_record(std::string_view json);

// Field 22 of /proc/<pid>/stat; 0 if the process is gone or unreadable.
std::uint64_t read_shell_start(pid_t pid);

// A pidfd on the recorded shell, or -1 when that process is gone (its PID
// free, or another process's now).
int open_recorded_shell(const ShellRecord& record);

}  // namespace hpcq::agent
