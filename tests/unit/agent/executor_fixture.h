// What the executor tests share: the clock and file helpers, a process to
// put in cgroups, the CPUs this process may use, and waiting for a checkpoint or restore the way
// the agent's loop does (begin_*, then poll wait_fds() for finished_*()).
#pragma once

#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agent/executor/executor.h"

namespace hpcq::agent::fixture {

inline TimeUs now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A cgroup file's value, without its trailing newlines.
inline std::string read_trimmed(const std::string& path) {
  std::string s = read_file(path);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// A child that waits until it is killed.
inline pid_t start_sleeper() {
  pid_t pid = fork();
  if (pid == 0) {
    pause();
    _exit(0);
  }
  return pid;
}

inline std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// Polls the executor's fds until `take` finds the outcome for `id` (CRIU's
// own timeout ends a dump or restore long before the deadline).
template <typename Outcome, typename Take>
Outcome wait_for_outcome(Executor& e, JobId id, Take take) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> fds;
    for (int fd : e.wait_fds()) fds.push_back({fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 100);
    for (Outcome& o : take()) {
      if (o.id == id) return o;
    }
  }
  Outcome none;
  none.id = id;
  none.status = unavailable("no outcome for job " + std::to_string(id) + " in 10 minutes");
  return none;
}

// begin_checkpoint, then its outcome: errors found before CRIU starts come
// from begin_checkpoint, as the agent sees them.
inline Result<CheckpointResult> checkpoint_and_wait(Executor& e, JobId id,
                                                    const std::string& image_dir,
                                                    CheckpointThen then) {
  HPCQ_RETURN_IF_ERROR(e.begin_checkpoint(id, image_dir, then));
  CheckpointOutcome o =
      wait_for_outcome<CheckpointOutcome>(e, id, [&] { return e.finished_checkpoints(); });
  if (!o.status.is_ok()) return o.status;
  return o.result;
}

inline Status restore_and_wait(Executor& e, const JobLaunch& launch, const std::string& image_dir,
                               TimeUs now) {
  HPCQ_RETURN_IF_ERROR(e.begin_restore(launch, image_dir, now));
  return wait_for_outcome<RestoreOutcome>(e, launch.id, [&] { return e.finished_restores(); })
      .status;
}

}  // namespace hpcq::agent::fixture
