// How the job shell starts its tasks and an image job's workers, and takes
// their ends (shell/main.cc's ShellRun calls these). Each task is forked,
// then held at a gate until every task of the node is forked, and then
// execs as the job's user on its CPUs, in its worker's cgroups, with its
// streams and environment (as slurmstepd does: 16 MPI ranks forked and
// exec'd one after another started 0.3 s apart here).
//
// Compiled into each shell build: hpcq-container-shell's tasks take no
// identity (runc has set it).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <map>
#include <string>

#include "shell/contract.h"
#include "shell/shell_io.h"

namespace hpcq::agent {

inline constexpr int kSetupFailed = 125;
inline constexpr int kCannotStart = 127;  // as a shell reports a command it cannot run
inline constexpr int kReadyFd = 3;        // the executor's "tasks started" pipe

// The environment every task shares; the per-task variables come on top.
std::map<std::string, std::string> base_environment(const JobLaunch& l, const JobFiles& files);

// The pipe that holds forked tasks before their exec until every task of the
// node is forked: each waits for end of file on `hold`, which comes once the
// shell has closed `release` (each child closes its own copy first).
struct StartGate {
  int hold = -1;
  int release = -1;
};

// In the forked child: task `local` of the launch, exec'd once the gate
// opens; a failure is written to err_fd and the child exits 127.
[[noreturn]] void run_task(const JobLaunch& l, const JobFiles& files, size_t local,
                           const std::map<std::string, std::string>& base_env, TaskStdio stdio,
                           StartGate gate, int err_fd);

// A forked child before its exec: its pid, and the pipe on which it writes
// why it cannot exec (end of file once it has: the pipe is close-on-exec).
struct Forked {
  pid_t pid = -1;
  int err_fd = -1;
};
// Forks; the child runs `child(err_fd)`, which execs or writes why it cannot
// to err_fd and exits. {-1, -1} with `error` set if the fork or pipe fails.
Forked fork_child(const std::function<void(int)>& child, std::string& error);
// The child's pid once it has exec'd or died (why, in `error`); -1 if it
// was never forked.
pid_t await_exec(Forked child, std::string& error);

// Forks and execs a worker's command (runc), as root, with the shell's
// stdio; returns its pid, or -1 with `error` set.
// With `pass_channel` (a forwarding job: hpcq run --image), the command is
// `runc run --preserve-fds 2`, which hands its fds 3 and 4 to the container's
// shell: 4 is this shell's channel to the executor, which the shell inside
// then writes its tasks' output frames to (sends on a packet socket do not
// interleave) and reads task 0's input from. 3 is only a placeholder.
pid_t start_worker(const WorkerSpec& worker, bool pass_channel, std::string& error);

// The results of a worker's tasks once its command has ended with `code`:
// what the shell inside the container wrote, or, where it wrote nothing
// (the container did not start), `code` and a reason for each task.
void take_worker_results(const JobLaunch& l, const JobFiles& files, size_t worker, int code,
                         ShellResults& results);

}  // namespace hpcq::agent
