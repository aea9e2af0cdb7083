// The site's programs an agent runs as root on its node, as Slurm's slurmd
// runs Prolog, Epilog and HealthCheckProgram: `[agent] prolog` before a
// job's first task here, `epilog` after its last, `health_check` every
// `health_check_interval_s`. Each runs in a session of its own with the
// environment it is given, stdin /dev/null, stdout and stderr kept (the
// first KiB) for the reason a failure gives; one past its timeout is killed
// with its whole session.
//
// Loop thread only: a run is a process watched on the agent's event loop
// (its pidfd and its output pipe), not a thread; `done` runs on the loop.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/overlay/event_loop.h"

namespace hpcq::agent {

struct ScriptOutcome {
  int exit_code = 0;       // 128 + N when killed by signal N
  bool timed_out = false;  // killed at its timeout
  std::string output;      // its stdout and stderr, the first kKeptOutput bytes
  std::string error;       // set: it could not be started

  bool ok() const { return error.empty() && !timed_out && exit_code == 0; }
  // "prolog /etc/hpcq/prolog exited with code 3: no scratch space" and the like.
  std::string describe(const std::string& what, const std::string& program) const;
};

class NodeScripts {
 public:
  static constexpr std::size_t kKeptOutput = 1024;
  using Done = std::function<void(const ScriptOutcome&)>;

  explicit NodeScripts(overlay::EventLoop& loop) : loop_(loop) {}
  // Kills what still runs (an agent that stops does not wait for them).
  ~NodeScripts();
  NodeScripts(const NodeScripts&) = delete;
  NodeScripts& operator=(const NodeScripts&) = delete;

  // Starts `program` (no arguments) with `env` and root's standard PATH;
  // `done` runs once it has ended or been killed at `timeout`, or at once if
  // it cannot start.
  void run(const std::string& program, const std::map<std::string, std::string>& env,
           std::chrono::seconds timeout, Done done);
  std::size_t running() const { return runs_.size(); }

 private:
  struct Run {
    pid_t pid = -1;
    int pidfd = -1;
    int output = -1;  // read end of its stdout/stderr pipe; -1 once closed
    overlay::EventLoop::TimerId timer = 0;
    ScriptOutcome outcome;
    Done done;
  };
  void read_output(Run& run);
  void finish(int pidfd);

  overlay::EventLoop& loop_;
  std::map<int, std::unique_ptr<Run>> runs_;  // by pidfd
};

}  // namespace hpcq::agent
