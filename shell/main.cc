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
#include "shell/tasks.h"
#ifndef HPCQ_CONTAINER_SHELL
#ifdef HPCQ_JOB_SHELL_PMIX
#include "shell/pmix_world.h"
#endif
#endif
#include "lib/job/job_env.h"

namespace hpcq::agent {
namespace {

const int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGCONT};

void ignore_signal(int) {}

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

// Default dispositions (an inherited SIG_IGN would survive exec into the
// tasks), and the signals the shell takes with sigwaitinfo: SIGCHLD, the
// dump signal and those it forwards, blocked. Returns that set.
sigset_t take_signals() {
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
  return wait_set;
}

// launch.json, read and closed at once: a checkpointed shell must hold no
// file that a restore replaces (launch.json then describes the new
// allocation).
Result<JobLaunch> read_launch(const JobFiles& files) {
  std::stringstream text;
  {
    std::ifstream in(files.launch);
    text << in.rdbuf();
  }
  return decode_launch(text.str());
}

// One shell's run: its tasks (or an image job's workers), their output, the
// MPI world they form, and what it writes into results.json at the end.
class ShellRun {
 public:
  ShellRun(JobFiles files, JobLaunch launch, sigset_t wait_set)
      : files_(std::move(files)),
        l_(std::move(launch)),
        base_env_(base_environment(l_, files_)),
        containers_(!l_.image.empty()),
        wait_set_(wait_set) {}

  // An MPI world (--mpi pmi1 or pmix): PMI or PMIx for every task; one task
  // that fails ends the node's others, so that none waits forever on a rank
  // that is gone.
  void start_mpi_world();
  // Forks every task, held at a gate until all are forked; false when the
  // gate cannot be made.
  bool start_tasks();
  void start_workers();
  // Until every task and worker has ended (a batch job's node without the
  // script: until SIGTERM), forwarding signals and taking each end.
  void wait_for_tasks();
  // results.json; the job's code.
  int finish();

 private:
  // Ends every other process of the namespace: a rank of the world has
  // failed, left without finalizing, or aborted.
  void end_world(size_t why);
  // The children that ended (SIGCHLDs merge: every one, orphans included).
  void reap_children();
  // Task `local` ended: whether its world goes on.
  void task_ended(size_t local);

  const JobFiles files_;
  const JobLaunch l_;
  const std::map<std::string, std::string> base_env_;
  const bool containers_;
  const sigset_t wait_set_;
  ShellResults results_;
  std::map<pid_t, size_t> running_;  // task pid -> index in results_.tasks
  std::map<pid_t, size_t> workers_;  // worker command pid -> index in l_.workers
  TaskIo output_;
  std::unique_ptr<MpiWorld> pmi_;
  std::string pmi_error_;  // why the world's server could not start
  bool world_ended_ = false;
  std::optional<size_t> culprit_;  // the task whose end or abort ended the world
};

void ShellRun::start_mpi_world() {
  if (containers_ || l_.pmi.kvsname.empty() || l_.tasks.empty()) return;
  if (l_.channel_on_demand()) {
    // Keeps kOutputFd's number for the channel the shell may open later.
    const int placeholder = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (placeholder >= 0 && placeholder != kOutputFd) {
      dup3(placeholder, kOutputFd, O_CLOEXEC);
      close(placeholder);
    }
  }
  auto channel = std::make_shared<WorldChannel>(l_, files_);
  if (l_.pmi.offers_pmix()) {
#if defined(HPCQ_JOB_SHELL_PMIX)
    pmi_ = start_pmix_world(l_, files_, channel, pmi_error_);
    if (pmi_ && l_.pmi.offers_pmi1()) {
      pmi_ = std::make_unique<BothWorlds>(channel, std::make_unique<PmiClients>(l_, channel),
                                          std::move(pmi_));
    }
#elif defined(HPCQ_CONTAINER_SHELL)
    pmi_error_ = "PMIx is not served inside a container";
#else
    pmi_error_ = "this job shell has no PMIx server (its -pmix build has)";
#endif
  } else {
    pmi_ = std::make_unique<PmiClients>(l_, channel);
  }
  output_.serve_pmi(pmi_.get());
}

bool ShellRun::start_tasks() {
  StartGate gate;
  int gate_fds[2];
  if (!containers_ && !l_.tasks.empty()) {
    if (pipe2(gate_fds, O_CLOEXEC) != 0) {
      fprintf(stderr, "hpcq-job-shell: pipe: %s\n", strerror(errno));
      return false;
    }
    gate = {gate_fds[0], gate_fds[1]};
  }
  std::vector<std::pair<size_t, Forked>> forked;  // held at the gate
  for (size_t i = 0; i < l_.tasks.size(); ++i) {
    TaskResult r;
    r.rank = l_.tasks[i].rank;
    r.local = static_cast<int>(i);
    TaskStdio stdio;
    if (!pmi_error_.empty()) {
      r.exit_code = kCannotStart;
      r.error = pmi_error_;
    } else if (!containers_ && l_.forward_output && !output_.add(r.rank, l_.pty, stdio, r.error)) {
      r.exit_code = kCannotStart;
    } else if (pmi_ && !pmi_->add(i, stdio, r.error)) {
      r.exit_code = kCannotStart;
    } else if (!containers_) {
      forked.emplace_back(
          i,
          fork_child([&](int err_fd) { run_task(l_, files_, i, base_env_, stdio, gate, err_fd); },
                     r.error));
      for (int fd : std::set<int>{stdio.in, stdio.out, stdio.err, stdio.pmi}) {
        if (fd >= 0) close(fd);
      }
    }
    results_.tasks.push_back(std::move(r));
  }
  if (gate.release >= 0) {
    close(gate.release);  // every task execs now
    close(gate.hold);
  }
  for (auto& [i, child] : forked) {
    pid_t pid = await_exec(child, results_.tasks[i].error);
    if (pid > 0) {
      running_[pid] = i;
    } else {
      results_.tasks[i].exit_code = kCannotStart;
    }
  }
  for (size_t i = 0; pmi_ && i < results_.tasks.size(); ++i) {
    if (results_.tasks[i].exit_code == kCannotStart) {
      end_world(i);
      break;
    }
  }
  return true;
}

void ShellRun::start_workers() {
  for (size_t w = 0; containers_ && w < l_.workers.size(); ++w) {
    std::string error;
    pid_t pid =
        l_.workers[w].command.empty() ? -1 : start_worker(l_.workers[w], l_.forward_output, error);
    if (pid > 0) {
      workers_[pid] = w;
      continue;
    }
    if (error.empty()) error = "worker " + std::to_string(l_.workers[w].id) + " has no command";
    for (TaskResult& r : results_.tasks) {
      if (l_.tasks[static_cast<size_t>(r.local)].worker != static_cast<int>(w)) continue;
      r.exit_code = kCannotStart;
      r.error = error;
    }
  }
}

void ShellRun::end_world(size_t why) {
  if (world_ended_) return;
  world_ended_ = true;
  culprit_ = why;
  kill(-1, SIGKILL);
}

void ShellRun::wait_for_tasks() {
  // A batch job's node without the script holds its part until SIGTERM.
  bool holding = l_.batch && l_.tasks.empty();
  const int signal_fd = output_.empty() && !pmi_ ? -1 : signalfd(-1, &wait_set_, SFD_CLOEXEC);
  while (!running_.empty() || !workers_.empty() || holding) {
    int sig;
    if (signal_fd >= 0) {
      sig = output_.next_signal(signal_fd);
    } else {
      siginfo_t info{};
      sig = sigwaitinfo(&wait_set_, &info);
    }
    if (sig < 0) {  // EINTR: the lease watch may have ended the node's part
      if (lease_fenced_at() != 0) holding = false;
      continue;
    }
    if (sig == prepare_dump_signal()) {
      prepare_dump(pmi_.get(), files_);
    } else if (sig == SIGCHLD) {
      reap_children();
    } else if (containers_) {
      if (sig == SIGTERM) holding = false;
      // Each runc passes it to its container's shell, which passes it on
      // to its tasks: kill(-1) here would reach them too, a second time.
      for (const auto& worker : workers_) kill(worker.first, sig);
    } else {
      if (sig == SIGTERM) holding = false;
      // From init, kill(-1) reaches every process of the namespace but itself.
      kill(-1, sig);
    }
  }
}

void ShellRun::reap_children() {
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    if (auto w = workers_.find(pid); w != workers_.end()) {
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      take_worker_results(l_, files_, w->second, code, results_);
      workers_.erase(w);
      continue;
    }
    auto it = running_.find(pid);
    if (it == running_.end()) continue;  // an orphan we inherited
    const size_t local = it->second;
    TaskResult& r = results_.tasks[local];
    if (WIFEXITED(status)) {
      r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      r.signal = WTERMSIG(status);
      r.exit_code = 128 + r.signal;
    }
    running_.erase(it);
    if (pmi_) task_ended(local);
  }
}

void ShellRun::task_ended(size_t local) {
  TaskResult& r = results_.tasks[local];
  if (world_ended_) {
    r.ended_by_shell = local != culprit_;
    return;
  }
  const bool left_unfinished = pmi_->task_ended(local);
  // An abort, or a refused spawn whose grace passed, names its task.
  if (const auto ender = pmi_->ended_by()) {
    for (size_t t = 0; t < results_.tasks.size(); ++t) {
      if (results_.tasks[t].rank != ender->rank) continue;
      results_.tasks[t].error = ender->why;
      end_world(t);
    }
    r.ended_by_shell = local != culprit_;
  } else if (auto by = pmi_->broken_by(); by && *by != local) {
    // An earlier task, gone before PMI began, broke the world: it decides.
    TaskResult& gone = results_.tasks[*by];
    if (gone.exit_code == 0) {
      gone.error =
          "ended before MPI_Init (PMI init) while the other tasks began: its MPI world cannot "
          "go on";
    }
    pmi_->report_failure(std::max(1, gone.exit_code), describe_task(gone));
    end_world(*by);
    r.ended_by_shell = true;
  } else if (pmi_->in_use() && (r.exit_code != 0 || left_unfinished)) {
    if (r.exit_code == 0) {
      r.error =
          "ended before MPI_Finalize (PMI finalize) while its MPI world ran: the world "
          "cannot go on";
    }
    // Most likely why: the MPI library gives up on a refused put, fence
    // or spawn.
    if (const std::string why = pmi_->cause_of_failure(); !why.empty()) {
      const std::string ended = describe_task(r);  // "task 3: exited with code 1"
      r.error = ended.substr(ended.find(": ") + 2) + " after " + why;
    }
    pmi_->report_failure(std::max(1, r.exit_code), describe_task(r));
    end_world(local);
  }
}

int ShellRun::finish() {
  output_.drain();
  if (lease_fenced_at() != 0) {
    for (TaskResult& r : results_.tasks) {
      if (r.signal == SIGKILL && r.error.empty()) r.error = kLeaseLostError;
    }
  }
  results_.exit_code = job_exit_code(results_.tasks);
  if (const auto ender = pmi_ ? pmi_->ended_by() : std::nullopt) {
    results_.exit_code = ender->code;
  } else if (world_ended_ && results_.exit_code == 0) {
    results_.exit_code = 1;  // a rank left the world early: a failure, whatever its code
  }
  rusage usage{};
  if (getrusage(RUSAGE_CHILDREN, &usage) == 0) {
    auto us = [](const timeval& t) { return std::int64_t{t.tv_sec} * 1000000 + t.tv_usec; };
    results_.cpu_time_us = us(usage.ru_utime) + us(usage.ru_stime);
  }
  if (!write_results(files_, results_)) {
    fprintf(stderr, "hpcq-job-shell: cannot write %s: %s\n", files_.results.c_str(),
            strerror(errno));
  }
  return results_.exit_code;
}

int run(const std::string& dir) {
  const sigset_t wait_set = take_signals();
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
  JobFiles files(dir);
  auto launch = read_launch(files);
  if (!launch.is_ok()) {
    fprintf(stderr, "hpcq-job-shell: %s: %s\n", files.launch.c_str(),
            launch.status().message().c_str());
    return kSetupFailed;
  }
  const std::string lease = launch->leader_lease;
  ShellRun shell(std::move(files), std::move(launch).value(), wait_set);
  shell.start_mpi_world();
  if (!shell.start_tasks()) return kSetupFailed;
  shell.start_workers();
  const char ready = 'r';
  ssize_t ignored = write(kReadyFd, &ready, 1);
  (void)ignored;
  close(kReadyFd);
#ifndef HPCQ_CONTAINER_SHELL
  // The tasks end when the node's lease runs out, before the leader may run
  // them elsewhere (leader_lease.h). The outer shell's kill reaches into
  // the containers.
  if (!lease.empty()) {
    if (Status watched = start_lease_watch(lease); !watched.is_ok()) {
      fprintf(stderr, "hpcq-job-shell: no watch of the node's lease: %s\n",
              watched.message().c_str());
    }
  }
#endif
  shell.wait_for_tasks();
  return shell.finish();
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
