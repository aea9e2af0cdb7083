// How the job shell starts its tasks (forked, held at a gate, then exec'd
// as the job's user on their CPUs) and an image job's workers (runc), and
// takes a worker's results (tasks.h).
#include "shell/tasks.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "agent/executor/posix.h"
#include "lib/job/job_env.h"

extern char** environ;

namespace hpcq::agent {

std::map<std::string, std::string> base_environment(const JobLaunch& l, const JobFiles& files) {
  std::map<std::string, std::string> env = l.env;
  // What a login would give the user, where the job did not bring its own.
  env.emplace("PATH", "/usr/local/bin:/usr/bin:/bin");
  if (!l.user.empty()) {
    env.emplace("USER", l.user);
    env.emplace("LOGNAME", l.user);
  }
  if (!l.home.empty()) env.emplace("HOME", l.home);
  // An elastic job's first node names its own hostfile, one the agent
  // rewrites on resizes (agent/elastic_job.h).
  job::add_shell_environment(env, files.hostfile, files.hostfile_mpich);
  // Over the caller's: a step's caller (hpcq-rsh's MPI launcher) ran on
  // another node, with that node's.
  if (!l.tmpdir.empty()) env["TMPDIR"] = l.tmpdir;
  return env;
}

namespace {

// In the forked child: a line for the shell (through `err_fd`) and for the
// task's stderr (fd 2: the user's file once opened, shell.log before), then 127.
[[noreturn]] void fail_task(int err_fd, const std::string& message) {
  ssize_t ignored = write(err_fd, message.data(), message.size());
  std::string line = "hpcq-job-shell: " + message + "\n";
  ignored = write(2, line.data(), line.size());
  (void)ignored;
  _exit(kCannotStart);
}

mode_t job_umask(const std::map<std::string, std::string>& env) {
  constexpr mode_t kDefault = 022;
  auto it = env.find("HPCQ_UMASK");
  if (it == env.end() || it->second.empty() || it->second.size() > 4) return kDefault;
  mode_t mask = 0;
  for (char c : it->second) {
    if (c < '0' || c > '7') return kDefault;
    mask = static_cast<mode_t>(mask * 8 + static_cast<mode_t>(c - '0'));
  }
  return mask & 0777;
}

// In the forked child, as root: "0" is the writer itself.
void join_cgroup(const std::string& dir, const std::string& what, int err_fd) {
  const std::string procs = dir + "/cgroup.procs";
  int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, "0", 1) != 1) {
    fail_task(err_fd, "joining " + what + " " + procs + ": " + errno_text(errno));
  }
  close(fd);
}

int open_output(const std::string& path) {
  return open(path.empty() ? "/dev/null" : path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
}

// In the forked child: into the worker's cgroups, onto the task's CPUs and
// terminal, and the job's user.
void enter_task_place(const JobLaunch& l, const TaskSpec& task, bool pty, int tty, int err_fd) {
  // Into the worker's own cgroup (a split job), then into the one where the
  // node's other GPUs cannot be opened.
  for (const std::string& dir : l.workers[static_cast<size_t>(task.worker)].cgroup_dirs) {
    join_cgroup(dir, "the worker's cgroup", err_fd);
  }
  if (!task.device_cgroup.empty())
    join_cgroup(task.device_cgroup, "the task's device cgroup", err_fd);

  // --pty: the terminal is this task's controlling terminal (job control,
  // ^C), in a session of its own.
  if (pty && (setsid() < 0 || ioctl(tty, TIOCSCTTY, 0) != 0)) {
    fail_task(err_fd, "taking the terminal: " + errno_text(errno));
  }

  const std::vector<int>& cpus = task.host_cpus.empty() ? l.host_cpus : task.host_cpus;
  if (!cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::string list;
    for (int c : cpus) {
      CPU_SET(static_cast<size_t>(c), &set);
      list += (list.empty() ? "" : ",") + std::to_string(c);
    }
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
      fail_task(err_fd, "sched_setaffinity to CPUs " + list + ": " + errno_text(errno));
    }
  }

  // Groups, then gid, then uid: after setuid nothing else may be changed.
  // In a container runc has already made us the job's user.
#ifndef HPCQ_CONTAINER_SHELL
  if (geteuid() == 0) {
    std::vector<gid_t> groups(l.groups.begin(), l.groups.end());
    if (groups.empty()) groups.push_back(l.gid);
    if (setgroups(groups.size(), groups.data()) != 0) {
      fail_task(err_fd, "setting the groups of user '" + l.user + "': " + errno_text(errno));
    }
    if (setgid(l.gid) != 0)
      fail_task(err_fd, "setgid " + std::to_string(l.gid) + ": " + errno_text(errno));
    if (setuid(l.uid) != 0)
      fail_task(err_fd, "setuid " + std::to_string(l.uid) + ": " + errno_text(errno));
  }
#endif
}

// In the forked child, as the job's user: its standard streams (the shell's
// pipes, or its files, opened as the user: a job cannot write where its
// user may not) and its directory.
void open_task_stdio(const JobLaunch& l, const TaskStdio& stdio, int err_fd) {
  if (stdio.out >= 0) {
    if (dup2(stdio.out, 1) < 0 || dup2(stdio.err, 2) < 0 ||
        (stdio.in >= 0 && dup2(stdio.in, 0) < 0)) {
      fail_task(err_fd, "dup2 of the standard streams: " + errno_text(errno));
    }
  }
  int out = stdio.out >= 0 ? 1 : open_output(l.stdout_path);
  if (out < 0) fail_task(err_fd, "open stdout " + l.stdout_path + ": " + errno_text(errno));
  int err = stdio.err >= 0 ? 2 : l.stderr_path == l.stdout_path ? out : open_output(l.stderr_path);
  if (err < 0) fail_task(err_fd, "open stderr " + l.stderr_path + ": " + errno_text(errno));
  dup2(out, 1);
  dup2(err, 2);
  if (out > 2) close(out);
  if (err > 2 && err != out) close(err);

  const std::string cwd = l.cwd.empty() ? "/" : l.cwd;
  if (chdir(cwd.c_str()) != 0) fail_task(err_fd, "chdir " + cwd + ": " + errno_text(errno));
}

}  // namespace

// The shell is single-threaded, so the child may allocate and use stdio.
[[noreturn]] void run_task(const JobLaunch& l, const JobFiles& files, size_t local,
                           const std::map<std::string, std::string>& base_env, TaskStdio stdio,
                           StartGate gate, int err_fd) {
  close(gate.release);
  const TaskSpec& task = l.tasks[local];
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);  // a PMIx shell ignores it
  enter_task_place(l, task, stdio.pty, stdio.in, err_fd);
  // The submitter's umask (hpcq submit sets HPCQ_UMASK), for the output
  // files too; else the usual 022.
  umask(job_umask(base_env));
  open_task_stdio(l, stdio, err_fd);

  std::map<std::string, std::string> env = base_env;
  job::add_task_environment(env, task.rank, static_cast<int>(local), task.logical_cpus);
  for (const auto& [k, v] : task.env) env[k] = v;
  // The one descriptor the task keeps: created close-on-exec like the rest.
  if (stdio.pmi >= 0 && fcntl(stdio.pmi, F_SETFD, 0) != 0) {
    fail_task(err_fd, "PMI socket: " + errno_text(errno));
  }
  for (const auto& [k, v] : stdio.mpi_env) env[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::vector<std::string> args = l.argv;
  if (!l.script.empty()) {
    if (args.empty()) args.emplace_back();
    args[0] = files.script;
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // execvp searches the PATH of `environ`: make it the task's.
  environ = envp.data();
  char ignored;
  while (read(gate.hold, &ignored, 1) < 0 && errno == EINTR) {
  }
  execvp(argv[0], argv.data());
  fail_task(err_fd, "exec " + args[0] + ": " + errno_text(errno));
}

Forked fork_child(const std::function<void(int)>& child, std::string& error) {
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    error = "pipe: " + errno_text(errno);
    return {};
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(err_pipe[0]);
    child(err_pipe[1]);
    _exit(127);  // child() does not return
  }
  int fork_errno = errno;
  close(err_pipe[1]);
  if (pid < 0) {
    close(err_pipe[0]);
    error = "fork: " + errno_text(fork_errno);
    return {};
  }
  return {pid, err_pipe[0]};
}

pid_t await_exec(Forked child, std::string& error) {
  if (child.pid < 0) return -1;
  char buf[512];
  ssize_t n;
  while ((n = read(child.err_fd, buf, sizeof buf)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    error.append(buf, static_cast<size_t>(n));
  }
  close(child.err_fd);
  return child.pid;
}

namespace {

pid_t spawn(const std::function<void(int)>& child, std::string& error) {
  return await_exec(fork_child(child, error), error);
}

}  // namespace

pid_t start_worker(const WorkerSpec& worker, bool pass_channel, std::string& error) {
  std::vector<std::string> args = worker.command;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return spawn(
      [&](int err_fd) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        if (pass_channel) {
          const int placeholder = open("/dev/null", O_RDONLY);
          if (placeholder < 0 || err_fd == kReadyFd || dup2(placeholder, kReadyFd) < 0 ||
              fcntl(kOutputFd, F_SETFD, 0) < 0) {
            fail_task(err_fd, "pass the output channel to runc: " + errno_text(errno));
          }
        }
        // runc finds its children by their PIDs in /proc: the shell's own
        // /proc (the executor's exec_shell) is the job's PID namespace's.
        execvp(argv[0], argv.data());
        fail_task(err_fd, "exec " + args[0] + ": " + errno_text(errno));
      },
      error);
}

namespace {

// The last line of the shell's log, where runc writes why a container failed.
std::string last_log_line(const JobFiles& files) {
  std::ifstream in(files.shell_log);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  constexpr size_t kMax = 300;
  return last.size() > kMax ? last.substr(last.size() - kMax) : last;
}

}  // namespace

void take_worker_results(const JobLaunch& l, const JobFiles& files, size_t worker, int code,
                         ShellResults& results) {
  std::stringstream text;
  {
    std::ifstream in(l.workers[worker].results);
    text << in.rdbuf();
  }
  auto inner = decode_results(text.str());
  for (TaskResult& r : results.tasks) {
    if (l.tasks[static_cast<size_t>(r.local)].worker != static_cast<int>(worker)) continue;
    bool found = false;
    if (inner.is_ok()) {
      for (const TaskResult& t : inner->tasks) {
        if (t.rank != r.rank) continue;
        const int local = r.local;
        r = t;
        r.local = local;
        found = true;
      }
    }
    if (!found) {
      r.exit_code = code == 0 ? kCannotStart : code;
      const std::string why = last_log_line(files);
      r.error = "container of worker " + std::to_string(l.workers[worker].id) +
                " ended with code " + std::to_string(code) + " before its tasks reported" +
                (why.empty() ? "" : ": " + why);
    }
  }
}

}  // namespace hpcq::agent
