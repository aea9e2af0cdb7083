// hpcq-agent: one per node. Joins the overlay as its configured rank and runs
// the jobs the leader sends. SIGTERM/SIGINT: leave, the node's jobs running
// on for the next agent to take back (a restart or an upgrade keeps them).
// kAgentDrainSignal (SIGUSR1, what `hpcq-agent --drain-and-exit` sends the
// running agent): kill the node's jobs, remove their cgroups, leave.
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "agent/agent.h"
#include "agent/executor/posix.h"
#include "lib/core/build_info.h"
#include "lib/core/config.h"
#include "lib/core/host_name.h"

#ifndef HPCQ_LIBEXECDIR
#define HPCQ_LIBEXECDIR "/usr/local/libexec"
#endif

namespace {

// The job shell is in the build tree's shell/, in libexec once installed.
std::string default_job_shell() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    buf[n] = '\0';
    auto dir = std::filesystem::path(buf).parent_path();
    if (std::filesystem::exists(dir.parent_path() / "shell" / "hpcq-job-shell")) {
      return dir.parent_path() / "shell" / "hpcq-job-shell";
    }
  }
  return std::string(HPCQ_LIBEXECDIR) + "/hpcq-job-shell";
}

// --drain-and-exit: tells the agent running on `state_dir` to end the node's
// jobs and leave, and waits until it has.
int drain_and_exit(const std::string& state_dir) {
  const std::string path = state_dir + "/" + hpcq::kAgentPidFile;
  FILE* f = std::fopen(path.c_str(), "r");
  long pid = 0;
  const bool read = f != nullptr && std::fscanf(f, "%ld", &pid) == 1 && pid > 1;
  if (f != nullptr) std::fclose(f);
  if (!read) {
    std::fprintf(stderr, "hpcq-agent: no running agent on %s (no %s)\n", state_dir.c_str(),
                 path.c_str());
    return 1;
  }
  // A pidfd: readable once the agent has exited, also while it is a zombie
  // its parent has not reaped yet.
  hpcq::agent::Fd agent(hpcq::agent::open_pidfd(static_cast<pid_t>(pid)));
  if (agent.get() < 0 || kill(static_cast<pid_t>(pid), hpcq::kAgentDrainSignal) != 0) {
    std::fprintf(stderr, "hpcq-agent: the agent on %s (pid %ld) is not running\n",
                 state_dir.c_str(), pid);
    return 1;
  }
  // Its jobs' kill grace and cgroup removal take seconds at most.
  pollfd exited{agent.get(), POLLIN, 0};
  if (poll(&exited, 1, 120'000) == 1) return 0;
  std::fprintf(stderr, "hpcq-agent: the agent on %s (pid %ld) has not left within 120 s\n",
               state_dir.c_str(), pid);
  return 1;
}

// Runs the agent until a signal (or its own stop); returns the exit code.
int run_agent(const hpcq::ClusterConfig& config, const hpcq::agent::AgentOptions& options) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, hpcq::kAgentDrainSignal);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto agent = hpcq::agent::Agent::create(config, options);
  if (!agent.is_ok()) {
    std::fprintf(stderr, "hpcq-agent: %s\n", agent.status().message().c_str());
    return 1;
  }
  int sfd = signalfd(-1, &signals, SFD_CLOEXEC);
  std::atomic<bool> stopped_itself = false;
  std::thread signal_thread([&] {
    signalfd_siginfo info{};
    const bool signalled = read(sfd, &info, sizeof info) == sizeof info && !stopped_itself;
    const bool drain = signalled && static_cast<int>(info.ssi_signo) == hpcq::kAgentDrainSignal;
    if (signalled) {
      spdlog::info("agent: signal {}: {}", info.ssi_signo,
                   drain ? "ending this node's jobs and leaving"
                         : "leaving; the node's jobs run on for the next agent");
    }
    (*agent)->stop(drain);
  });
  const std::string pid_file = options.state_dir + "/" + hpcq::kAgentPidFile;
  if (FILE* f = std::fopen(pid_file.c_str(), "w")) {
    std::fprintf(f, "%d\n", static_cast<int>(getpid()));
    std::fclose(f);
  }
  sd_notify(0, "READY=1");  // for Type=notify units; a no-op elsewhere
  (*agent)->run();
  sd_notify(0, "STOPPING=1");
  const int exit_code = (*agent)->exit_code();
  if (exit_code != 0) {
    // The agent stopped itself (its leader is older): wake the signal thread.
    stopped_itself = true;
    kill(getpid(), SIGTERM);
  }
  signal_thread.join();
  close(sfd);
  agent->reset();  // detaches from the jobs, or ends them (drained)
  std::remove(pid_file.c_str());
  spdlog::info("agent: stopped");
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hpcq-agent: the hpcq node agent"};
  std::string config_path = "/etc/hpcq/hpcq.toml";
  hpcq::agent::AgentOptions options;
  unsigned rank = 0;
  std::string log_level = "info";
  app.add_option("-c,--config", config_path, "cluster configuration (hpcq.toml)");
  app.add_option("-r,--rank", rank,
                 "this agent's rank in the config (1..N); default: the rank named as this host");
  app.add_option("--state-dir", options.state_dir,
                 "its journals and pid file (default: agent.state_dir/rank-R)");
  app.add_option("--run-dir", options.run_dir,
                 "job directories (default: agent.run_dir/rank-R, or the state dir)");
  app.add_option("--secret-key", options.secret_key, "CURVE key file (default: agent.secret_key)");
  app.add_option("--topology", options.topology,
                 "host, synthetic:STRING (e.g. 'pack:2 numa:2 core:4 pu:1') or xml:PATH");
  app.add_option("--job-shell", options.job_shell, "path of hpcq-job-shell");
  app.add_option("--socket", options.socket,
                 "where this node's hpcq command reaches the leader through the agent "
                 "(default: agent.socket)");
  app.add_option("--executor", options.executor,
                 "process (real tasks), or test (runs nothing; a job lasts HPCQ_TEST_DURATION s)")
      ->check(CLI::IsMember({"process", "test"}));
  bool drain = false;
  app.add_flag("--drain-and-exit", drain,
               "end the jobs of the agent running on this state dir, and have it leave "
               "(a plain stop or restart keeps them)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  app.set_version_flag("--version", hpcq::version_line("hpcq-agent"));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "hpcq-agent: %s\n", e.what());
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));

  auto config = hpcq::load_config(config_path);
  if (!config.is_ok()) {
    std::fprintf(stderr, "hpcq-agent: %s\n", config.status().message().c_str());
    return 2;
  }
  if (rank == 0) {
    // As on a real cluster under systemd: the rank whose name is this host's.
    const std::string host = hpcq::this_host_name();
    const std::string short_name = host.substr(0, host.find('.'));
    for (unsigned r = 1; r < config->ranks.size(); ++r) {
      if (config->ranks[r].name == short_name) rank = r;
    }
    if (rank == 0) {
      std::fprintf(stderr, "hpcq-agent: no --rank, and no [[rank]] in %s is named '%s'\n",
                   config->source.c_str(), short_name.c_str());
      return 2;
    }
  }
  options.rank = rank;
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e [rank " + std::to_string(rank) + "] %^%l%$ %v");
  if (options.state_dir.empty())
    options.state_dir = config->agent_state_dir + "/rank-" + std::to_string(rank);
  if (options.run_dir.empty()) {
    options.run_dir = config->agent_run_dir.empty()
                          ? options.state_dir
                          : config->agent_run_dir + "/rank-" + std::to_string(rank);
  }
  if (options.secret_key.empty()) options.secret_key = config->agent_secret_key;
  if (options.socket.empty()) options.socket = config->agent_socket;
  if (drain) return drain_and_exit(options.state_dir);
  if (options.job_shell.empty()) {
    options.job_shell = config->job_shell.empty() ? default_job_shell() : config->job_shell;
  }

  return run_agent(*config, options);
}
