// hpcq-job-shell JOB_DIR: PID 1 of a job's PID namespace on one node.
//
// Built twice from this file: hpcq-job-shell, and hpcq-container-shell,
// linked statically, the init of each OCI container of an image job (it then
// runs as the job's user, which runc has set: it changes no identity, and
// JOB_DIR is the worker's directory, holding only that worker's tasks).
// Outside, for an image job, the shell runs each worker's `command` (runc)
// instead of forking tasks, and takes the tasks' results from the worker's
// results.json.
//
// Started by the process executor (process_executor.h) as root, already in
// the job's cgroups, with stdin /dev/null, stdout/stderr JOB_DIR/shell.log and
// fd 3 the "tasks started" pipe, in a mount namespace with the job's own
// /proc (the executor's exec_shell). Reads JOB_DIR/launch.json, becomes a session
// leader (CRIU needs one at the root of the tree), forks one process per task
// (CPU affinity, the user's identity, stdio files, cwd, environment), lets
// them all exec at once once every one is forked (as slurmstepd does: 16 MPI
// ranks forked and exec'd one after another started 0.3 s apart here, the
// first spinning in MPI_Init while the shell forked the last), writes a byte
// to fd 3, then reaps every process of the namespace (it is
// their init) until all tasks have ended. It writes JOB_DIR/results.json and
// exits with the job's code: 0 if all tasks exited 0, else the highest task
// code, a task killed by signal N counting 128 + N. When it exits, the kernel
// kills whatever the tasks left behind.
//
// A job launched with forward_output (hpcq run) gives each task a pipe for
// stdout and one for stderr instead of files; the shell reads them while it
// waits and sends what comes, framed, on fd 4 (kOutputFd) to the executor.
// A launch with a PMI world (--mpi pmi1) gives each task a PMI socket
// (PMI_FD) that the shell serves (pmi.h); with --mpi pmix the shell hosts an
// OpenPMIx server for them instead (pmix_world.h): this file built as
// hpcq-job-shell-pmix, which the executor starts for such a launch. A world
// across nodes fences over fd 4 too. Once a task of the world fails, aborts or leaves without
// finalizing, the shell kills the namespace's other processes and says which
// task it was (shell_io.h has the descriptors; this file the processes).
// A batch job's other nodes run no task: their shell holds the node's part
// until it gets SIGTERM (or is killed).
//
// SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM and SIGCONT are
// forwarded to every other process of the namespace (the executor's time
// limit sends SIGTERM here; hpcq signal sends any of them).
// Exit 125 with a line on stderr: the launch file could not be used.
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pty.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/executor/leader_lease.h"
#include "agent/executor/posix.h"
#include "shell/contract.h"
#include "shell/pmi.h"
#include "shell/shell_io.h"
#ifndef HPCQ_CONTAINER_SHELL
#ifdef HPCQ_JOB_SHELL_PMIX
#include "shell/pmix_world.h"
#endif
#endif
#include "lib/job/job_env.h"

extern char** environ;

namespace hpcq::agent {
namespace {

constexpr int kSetupFailed = 125;
constexpr int kCannotStart = 127;  // as a shell reports a command it cannot run
constexpr int kReadyFd = 3;
const int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGCONT};

void ignore_signal(int) {}

// The environment every task shares; the per-task variables come on top.
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

// The pipe that holds forked tasks before their exec until every task of the
// node is forked: each waits for end of file on `hold`, which comes once the
// shell has closed `release` (each child closes its own copy first).
struct StartGate {
  int hold = -1;
  int release = -1;
};

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

  // Into the worker's own cgroup (a split job), then into the one where the
  // node's other GPUs cannot be opened.
  for (const std::string& dir : l.workers[static_cast<size_t>(task.worker)].cgroup_dirs) {
    join_cgroup(dir, "the worker's cgroup", err_fd);
  }
  if (!task.device_cgroup.empty())
    join_cgroup(task.device_cgroup, "the task's device cgroup", err_fd);

  // --pty: the terminal is this task's controlling terminal (job control,
  // ^C), in a session of its own.
  if (stdio.pty && (setsid() < 0 || ioctl(stdio.in, TIOCSCTTY, 0) != 0)) {
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

  // The submitter's umask (hpcq submit sets HPCQ_UMASK), for the output
  // files too; else the usual 022.
  umask(job_umask(base_env));

  // Opened as the user: a job cannot write where its user may not.
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

// A forked child before its exec: its pid, and the pipe on which it writes
// why it cannot exec (end of file once it has: the pipe is close-on-exec).
struct Forked {
  pid_t pid = -1;
  int err_fd = -1;
};

// Forks; the child runs `child(err_fd)`, which execs or writes why it cannot
// to err_fd and exits (fail_task). {-1, -1} with `error` set if the fork or
// pipe fails.
template <typename Child>
Forked fork_child(const Child& child, std::string& error) {
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

// The child's pid once it has exec'd or died (why, in `error`); -1 if it
// was never forked.
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

template <typename Child>
pid_t spawn(const Child& child, std::string& error) {
  return await_exec(fork_child(child, error), error);
}

// Forks and execs a worker's command (runc), as root, with the shell's
// stdio; returns its pid, or -1 with `error` set.
// With `pass_channel` (a forwarding job: hpcq run --image), the command is
// `runc run --preserve-fds 2`, which hands its fds 3 and 4 to the container's
// shell: 4 is this shell's channel to the executor, which the shell inside
// then writes its tasks' output frames to (sends on a packet socket do not
// interleave) and reads task 0's input from. 3 is only a placeholder.
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

// The results of a worker's tasks once its command has ended with `code`:
// what the shell inside the container wrote, or, where it wrote nothing
// (the container did not start), `code` and a reason for each task.
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

// kHeldChannelFd holds the agent's end of the channel, or /dev/null: never
// a file the shell opened later, which a restarted agent would take for it.
void let_go_of_held_channel() {
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd >= 0 && null_fd != kHeldChannelFd) {
    dup3(null_fd, kHeldChannelFd, O_CLOEXEC);
    close(null_fd);
  }
}

// Before a checkpoint (prepare_dump_signal): the agent's end of the channel
// and an unused PMIx server go, so that CRIU can take the shell; a server
// the tasks use stays, and the checkpoint is refused.
void prepare_dump(MpiWorld* pmi, const JobFiles& files) {
  let_go_of_held_channel();
  const bool dropped = pmi == nullptr || pmi->drop_unused_pmix();
  // Unanswered if it fails: the executor gives up waiting.
  (void)replace_file(files.pmix_answer, dropped ? kPmixDropped : kPmixInUse);
}

bool write_results(const JobFiles& files, const ShellResults& results) {
  return replace_file(files.results, encode_results(results)).is_ok();
}

int run(const std::string& dir) {
  // Start from a clean slate whatever the agent had: default dispositions
  // (an inherited SIG_IGN would survive exec into the tasks).
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
  }
  // A namespace's init does not get signals it has no handler for; handlers
  // (never run: the signals stay blocked and are taken with sigwaitinfo) make
  // them deliverable. SIGCHLD must not be ignored, or children would vanish.
  sigset_t wait_set;
  sigemptyset(&wait_set);
  sigaddset(&wait_set, SIGCHLD);
  sigaddset(&wait_set, prepare_dump_signal());
  for (int sig : kForwarded) sigaddset(&wait_set, sig);
  struct sigaction sa {};
  sa.sa_handler = ignore_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGCHLD, &sa, nullptr);
  sigaction(prepare_dump_signal(), &sa, nullptr);
  for (int sig : kForwarded) sigaction(sig, &sa, nullptr);
  sigprocmask(SIG_SETMASK, &wait_set, nullptr);

  fcntl(kReadyFd, F_SETFD, FD_CLOEXEC);
  fcntl(kOutputFd, F_SETFD, FD_CLOEXEC);  // when there is one
  if (fcntl(kHeldChannelFd, F_SETFD, FD_CLOEXEC) != 0) let_go_of_held_channel();
#ifdef HPCQ_CONTAINER_SHELL
  // runc starts the container's init as a process group leader already:
  // setsid is refused then, and nothing here needs a new session.
  const bool need_session = false;
#else
  const bool need_session = true;
#endif
  if (setsid() < 0 && (need_session || errno != EPERM)) {
    fprintf(stderr, "hpcq-job-shell: setsid: %s\n", strerror(errno));
    return kSetupFailed;
  }
  const JobFiles files(dir);
  std::stringstream text;
  {
    // Closed at once: a checkpointed shell must hold no file that a restore
    // replaces (launch.json then describes the new allocation).
    std::ifstream in(files.launch);
    text << in.rdbuf();
  }
  auto launch = decode_launch(text.str());
  if (!launch.is_ok()) {
    fprintf(stderr, "hpcq-job-shell: %s: %s\n", files.launch.c_str(),
            launch.status().message().c_str());
    return kSetupFailed;
  }
  const JobLaunch& l = *launch;
  const auto base_env = base_environment(l, files);

  ShellResults results;
  std::map<pid_t, size_t> running;  // task pid -> index in results.tasks
  std::map<pid_t, size_t> workers;  // worker command pid -> index in l.workers
  const bool containers = !l.image.empty();
  TaskIo output;
  // An MPI world (--mpi pmi1 or pmix): PMI or PMIx for every task; one task
  // that fails ends the node's others, so that none waits forever on a rank
  // that is gone.
  std::unique_ptr<MpiWorld> pmi;
  std::string pmi_error;  // why the world's server could not start
  if (!containers && !l.pmi.kvsname.empty() && !l.tasks.empty()) {
    if (l.channel_on_demand()) {
      // Keeps kOutputFd's number for the channel the shell may open later.
      const int placeholder = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (placeholder >= 0 && placeholder != kOutputFd) {
        dup3(placeholder, kOutputFd, O_CLOEXEC);
        close(placeholder);
      }
    }
    auto channel = std::make_shared<WorldChannel>(l, files);
    if (l.pmi.offers_pmix()) {
#if defined(HPCQ_JOB_SHELL_PMIX)
      pmi = start_pmix_world(l, files, channel, pmi_error);
      if (pmi && l.pmi.offers_pmi1()) {
        pmi = std::make_unique<BothWorlds>(channel, std::make_unique<PmiClients>(l, channel),
                                           std::move(pmi));
      }
#elif defined(HPCQ_CONTAINER_SHELL)
      pmi_error = "PMIx is not served inside a container";
#else
      pmi_error = "this job shell has no PMIx server (its -pmix build has)";
#endif
    } else {
      pmi = std::make_unique<PmiClients>(l, channel);
    }
    output.serve_pmi(pmi.get());
  }
  bool world_ended = false;
  std::optional<size_t> culprit;  // the task whose end or abort ended the world
  StartGate gate;
  int gate_fds[2];
  if (!containers && !l.tasks.empty()) {
    if (pipe2(gate_fds, O_CLOEXEC) != 0) {
      fprintf(stderr, "hpcq-job-shell: pipe: %s\n", strerror(errno));
      return kSetupFailed;
    }
    gate = {gate_fds[0], gate_fds[1]};
  }
  std::vector<std::pair<size_t, Forked>> forked;  // held at the gate
  for (size_t i = 0; i < l.tasks.size(); ++i) {
    TaskResult r;
    r.rank = l.tasks[i].rank;
    r.local = static_cast<int>(i);
    TaskStdio stdio;
    if (!pmi_error.empty()) {
      r.exit_code = kCannotStart;
      r.error = pmi_error;
    } else if (!containers && l.forward_output && !output.add(r.rank, l.pty, stdio, r.error)) {
      r.exit_code = kCannotStart;
    } else if (pmi && !pmi->add(i, stdio, r.error)) {
      r.exit_code = kCannotStart;
    } else if (!containers) {
      forked.emplace_back(
          i, fork_child([&](int err_fd) { run_task(l, files, i, base_env, stdio, gate, err_fd); },
                        r.error));
      for (int fd : std::set<int>{stdio.in, stdio.out, stdio.err, stdio.pmi}) {
        if (fd >= 0) close(fd);
      }
    }
    results.tasks.push_back(std::move(r));
  }
  if (gate.release >= 0) {
    close(gate.release);  // every task execs now
    close(gate.hold);
  }
  for (auto& [i, child] : forked) {
    pid_t pid = await_exec(child, results.tasks[i].error);
    if (pid > 0) {
      running[pid] = i;
    } else {
      results.tasks[i].exit_code = kCannotStart;
    }
  }
  for (size_t i = 0; pmi && !culprit && i < results.tasks.size(); ++i) {
    if (results.tasks[i].exit_code == kCannotStart) culprit = i;
  }
  // Ends every other process of the namespace: a rank of the world has
  // failed, left without finalizing, or aborted.
  auto end_world = [&](size_t why) {
    if (world_ended) return;
    world_ended = true;
    culprit = why;
    kill(-1, SIGKILL);
  };
  if (culprit) {
    world_ended = false;
    end_world(*culprit);
  }
  for (size_t w = 0; containers && w < l.workers.size(); ++w) {
    std::string error;
    pid_t pid =
        l.workers[w].command.empty() ? -1 : start_worker(l.workers[w], l.forward_output, error);
    if (pid > 0) {
      workers[pid] = w;
      continue;
    }
    if (error.empty()) error = "worker " + std::to_string(l.workers[w].id) + " has no command";
    for (TaskResult& r : results.tasks) {
      if (l.tasks[static_cast<size_t>(r.local)].worker != static_cast<int>(w)) continue;
      r.exit_code = kCannotStart;
      r.error = error;
    }
  }
  const char ready = 'r';
  ssize_t ignored = write(kReadyFd, &ready, 1);
  (void)ignored;
  close(kReadyFd);
#ifndef HPCQ_CONTAINER_SHELL
  // The tasks end when the node's lease runs out, before the leader may run
  // them elsewhere (leader_lease.h). The outer shell's kill reaches into
  // the containers.
  if (!l.leader_lease.empty()) {
    if (Status watched = start_lease_watch(l.leader_lease); !watched.is_ok()) {
      fprintf(stderr, "hpcq-job-shell: no watch of the node's lease: %s\n",
              watched.message().c_str());
    }
  }
#endif

  // A batch job's node without the script holds its part until SIGTERM.
  bool holding = l.batch && l.tasks.empty();
  const int signal_fd = output.empty() && !pmi ? -1 : signalfd(-1, &wait_set, SFD_CLOEXEC);
  while (!running.empty() || !workers.empty() || holding) {
    int sig;
    if (signal_fd >= 0) {
      sig = output.next_signal(signal_fd);
    } else {
      siginfo_t info{};
      sig = sigwaitinfo(&wait_set, &info);
    }
    if (sig < 0) {  // EINTR: the lease watch may have ended the node's part
      if (lease_fenced_at() != 0) holding = false;
      continue;
    }
    if (sig == prepare_dump_signal()) {
      prepare_dump(pmi.get(), files);
      continue;
    }
    if (sig != SIGCHLD) {
      if (sig == SIGTERM) holding = false;
      if (containers) {
        // Each runc passes it to its container's shell, which passes it on
        // to its tasks: kill(-1) here would reach them too, a second time.
        for (const auto& worker : workers) kill(worker.first, sig);
        continue;
      }
      // From init, kill(-1) reaches every process of the namespace but itself.
      kill(-1, sig);
      continue;
    }
    // SIGCHLDs merge: collect every child that has ended, orphans included.
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      if (auto w = workers.find(pid); w != workers.end()) {
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        take_worker_results(l, files, w->second, code, results);
        workers.erase(w);
        continue;
      }
      auto it = running.find(pid);
      if (it == running.end()) continue;  // an orphan we inherited
      const size_t local = it->second;
      TaskResult& r = results.tasks[local];
      if (WIFEXITED(status)) {
        r.exit_code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        r.signal = WTERMSIG(status);
        r.exit_code = 128 + r.signal;
      }
      running.erase(it);
      if (!pmi) continue;
      if (world_ended) {
        r.ended_by_shell = local != culprit;
        continue;
      }
      const bool left_unfinished = pmi->task_ended(local);
      // An abort, or a refused spawn whose grace passed, names its task.
      if (const auto ender = pmi->ended_by()) {
        for (size_t t = 0; t < results.tasks.size(); ++t) {
          if (results.tasks[t].rank != ender->rank) continue;
          results.tasks[t].error = ender->why;
          end_world(t);
        }
        r.ended_by_shell = local != culprit;
      } else if (auto by = pmi->broken_by(); by && *by != local) {
        // An earlier task, gone before PMI began, broke the world: it decides.
        TaskResult& gone = results.tasks[*by];
        if (gone.exit_code == 0) {
          gone.error =
              "ended before MPI_Init (PMI init) while the other tasks began: its MPI world cannot "
              "go on";
        }
        pmi->report_failure(std::max(1, gone.exit_code), describe_task(gone));
        end_world(*by);
        r.ended_by_shell = true;
      } else if (pmi->in_use() && (r.exit_code != 0 || left_unfinished)) {
        if (r.exit_code == 0) {
          r.error =
              "ended before MPI_Finalize (PMI finalize) while its MPI world ran: the world "
              "cannot go on";
        }
        // Most likely why: the MPI library gives up on a refused put, fence
        // or spawn.
        if (const std::string why = pmi->cause_of_failure(); !why.empty()) {
          const std::string ended = describe_task(r);  // "task 3: exited with code 1"
          r.error = ended.substr(ended.find(": ") + 2) + " after " + why;
        }
        pmi->report_failure(std::max(1, r.exit_code), describe_task(r));
        end_world(local);
      }
    }
  }
  output.drain();
  if (lease_fenced_at() != 0) {
    for (TaskResult& r : results.tasks) {
      if (r.signal == SIGKILL && r.error.empty()) r.error = kLeaseLostError;
    }
  }
  results.exit_code = job_exit_code(results.tasks);
  if (const auto ender = pmi ? pmi->ended_by() : std::nullopt) {
    results.exit_code = ender->code;
  } else if (world_ended && results.exit_code == 0) {
    results.exit_code = 1;  // a rank left the world early: a failure, whatever its code
  }
  rusage usage{};
  if (getrusage(RUSAGE_CHILDREN, &usage) == 0) {
    auto us = [](const timeval& t) { return std::int64_t{t.tv_sec} * 1000000 + t.tv_usec; };
    results.cpu_time_us = us(usage.ru_utime) + us(usage.ru_stime);
  }
  if (!write_results(files, results)) {
    fprintf(stderr, "hpcq-job-shell: cannot write %s: %s\n", files.results.c_str(),
            strerror(errno));
  }
  return results.exit_code;
}

}  // namespace
}  // namespace hpcq::agent

int main(int argc, char** argv) {
#ifdef HPCQ_CONTAINER_SHELL
  const bool usage_ok = argc == 2;  // runc gives the container its own /proc
#else
  // The executor has put the shell in the job's own /proc already.
  const bool usage_ok = argc == 3 && std::string(argv[2]) == hpcq::agent::kOwnProcFlag;
#endif
  if (!usage_ok) {
    fprintf(stderr, "usage: hpcq-job-shell JOB_DIR %s (started by hpcq-agent)\n",
            hpcq::agent::kOwnProcFlag);
    return hpcq::agent::kSetupFailed;
  }
#ifndef HPCQ_CONTAINER_SHELL
  // Nothing before the executor has put us in the job's cgroups.
  char go = 0;
  ssize_t n;
  do {
    n = read(hpcq::agent::kGoFd, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) return hpcq::agent::kSetupFailed;  // the executor gave up on us
  close(hpcq::agent::kGoFd);
#endif
  return hpcq::agent::run(argv[1]);
}
