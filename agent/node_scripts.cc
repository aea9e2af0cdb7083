#include "agent/node_scripts.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/executor/posix.h"

namespace hpcq::agent {

std::string ScriptOutcome::describe(const std::string& what, const std::string& program) const {
  std::string text = what + " " + program;
  if (!error.empty()) return text + " could not start: " + error;
  if (timed_out) {
    text += " ran past its timeout and was killed";
  } else if (exit_code > 128) {
    text += " was killed by signal " + std::to_string(exit_code - 128);
  } else {
    text += " exited with code " + std::to_string(exit_code);
  }
  // The first line of what it said: the reason a node is drained with.
  std::string said = output.substr(0, output.find('\n'));
  for (char& c : said) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  while (!said.empty() && said.back() == ' ') said.pop_back();
  return said.empty() ? text : text + ": " + said;
}

NodeScripts::~NodeScripts() {
  for (auto& [pidfd, run] : runs_) {
    kill(-run->pid, SIGKILL);
    waitpid(run->pid, nullptr, 0);
    close(pidfd);
    if (run->output >= 0) close(run->output);
  }
}

void NodeScripts::run(const std::string& program, const std::map<std::string, std::string>& env,
                      std::chrono::seconds timeout, Done done) {
  ScriptOutcome failed;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    failed.error = "pipe: " + errno_text(errno);
    return done(failed);
  }
  Fd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  fcntl(read_end.get(), F_SETFL, O_NONBLOCK);

  std::vector<std::string> env_strings = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
  for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string path = program;
  char* argv[] = {path.data(), nullptr};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 2);
  posix_spawn_file_actions_addchdir_np(&actions, "/");
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  // A session of its own: its timeout kills everything it started.
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int err = posix_spawn(&pid, path.c_str(), &actions, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    failed.error = errno_text(err);
    return done(failed);
  }
  write_end.reset();
  const int pidfd = open_pidfd(pid);
  if (pidfd < 0) {
    failed.error = "pidfd_open: " + errno_text(errno);
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return done(failed);
  }
  auto run = std::make_unique<Run>();
  run->pid = pid;
  run->pidfd = pidfd;
  run->output = read_end.release();
  run->done = std::move(done);
  Run& r = *run;
  runs_.emplace(pidfd, std::move(run));
  loop_.watch_fd(r.output, [this, &r] { read_output(r); });
  loop_.watch_fd(pidfd, [this, pidfd] { finish(pidfd); });
  r.timer = loop_.run_after(std::chrono::duration_cast<std::chrono::milliseconds>(timeout),
                            [this, pidfd] {
                              auto it = runs_.find(pidfd);
                              if (it == runs_.end()) return;
                              it->second->timer = 0;
                              it->second->outcome.timed_out = true;
                              kill(-it->second->pid, SIGKILL);
                            });
}

void NodeScripts::read_output(Run& run) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(run.output, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) {
      std::string& kept = run.outcome.output;
      kept.append(buf, std::min(static_cast<std::size_t>(n), kKeptOutput - kept.size()));
      continue;
    }
    if (n == 0 || errno != EAGAIN) {  // every writer has closed it
      loop_.unwatch_fd(run.output);
      close(run.output);
      run.output = -1;
    }
    return;
  }
}

void NodeScripts::finish(int pidfd) {
  auto it = runs_.find(pidfd);
  if (it == runs_.end()) return;
  Run& run = *it->second;
  siginfo_t info{};
  // Not reaped yet (WNOWAIT): while it is a zombie its session id cannot be
  // anyone else's, so what it left behind is killed by it safely.
  if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info,
             WEXITED | WNOHANG | WNOWAIT) != 0 ||
      info.si_pid == 0) {
    return;  // not ended yet
  }
  run.outcome.exit_code = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
  // What it wrote before it ended (a child it left may hold the pipe open:
  // not waited for, and killed with its session).
  if (run.output >= 0) {
    read_output(run);
    if (run.output >= 0) {
      loop_.unwatch_fd(run.output);
      close(run.output);
    }
  }
  kill(-run.pid, SIGKILL);
  waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED);
  if (run.timer != 0) loop_.cancel_timer(run.timer);
  loop_.unwatch_fd(pidfd);
  close(pidfd);
  std::unique_ptr<Run> owned = std::move(it->second);
  runs_.erase(it);
  owned->done(owned->outcome);
}

}  // namespace hpcq::agent
