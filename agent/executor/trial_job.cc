#include "agent/executor/trial_job.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/executor/checkpoint.h"
#include "agent/executor/freeze_and_pin.h"
#include "agent/executor/job_namespaces.h"
#include "agent/executor/posix.h"

namespace hpcq::agent {
namespace {

// What the trial's child needs, built before the clone: it is a copy of a
// process that may have other threads, so it may not allocate.
struct TrialChild {
  int exec_fd;  // close-on-exec: EOF once the sleep runs, or why it does not
  uid_t uid;
  char* const* argv;
  char* const* envp;
};

[[noreturn]] void trial_child_failed(int exec_fd, const char* why) {
  ssize_t ignored = write(exec_fd, why, strlen(why));
  (void)ignored;
  _exit(127);
}

// PID 1 of the trial's PID namespace, made as exec_shell makes a job's shell:
// the job's mount namespace (enter_job_mount_namespace, without the private
// /tmp that no checkpointing node gives its jobs), stdio opened inside it, a
// session of its own; then the sleep is exec'd as `uid`, as a job's tasks
// run (its own group, no supplementary ones). Async-signal-safe.
int trial_child(void* arg) {
  const TrialChild& c = *static_cast<const TrialChild*>(arg);
  default_signals();
  if (const char* failed = enter_job_mount_namespace(nullptr, nullptr)) {
    trial_child_failed(c.exec_fd, failed);
  }
  const int null = open("/dev/null", O_RDWR);
  if (setsid() < 0 || null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0) {
    trial_child_failed(c.exec_fd, "opening /dev/null in the job's mount namespace failed");
  }
  if (c.uid != 0 && (setgroups(0, nullptr) != 0 || setgid(c.uid) != 0 || setuid(c.uid) != 0)) {
    trial_child_failed(c.exec_fd, "becoming the job's user failed");
  }
  // Everything else goes, but the pipe that tells the parent we exec'd.
  const auto keep = static_cast<unsigned>(c.exec_fd);
  if (keep > 3) syscall(SYS_close_range, 3U, keep - 1, 0U);
  syscall(SYS_close_range, keep + 1, ~0U, 0U);
  execve(c.argv[0], c.argv, c.envp);
  trial_child_failed(c.exec_fd, "exec of sleep failed");
}

}  // namespace

Status trial_setup_failed(const std::string& why) {
  // kInternal: not an answer about CRIU, so not kept (criu_trial_dump).
  return internal_error("setting up the trial dump: " + why);
}

TrialJob::TrialJob(const CgroupHierarchy& cgroups)
    : cgroups_(cgroups), instance_("criu-trial-" + std::to_string(getpid())) {}

Result<std::unique_ptr<TrialJob>> TrialJob::start(const CgroupHierarchy& cgroups, uid_t uid) {
  std::unique_ptr<TrialJob> job(new TrialJob(cgroups));
  auto cgroup = job->cgroups_.create_job(job->instance_, 1, {});
  if (!cgroup.is_ok()) return trial_setup_failed(cgroup.status().message());
  job->cgroup_ = std::move(cgroup).value();
  job->freezer_ = freezer_dir(job->cgroup_);
  Status started = job->start_sleep(uid);
  if (!started.is_ok()) return started;
  if (Status joined = job->cgroup_.add_process(job->pid_); !joined.is_ok()) {
    return trial_setup_failed(joined.message());
  }
  return job;
}

Status TrialJob::start_sleep(uid_t uid) {
  std::string sleep = find_program("sleep");
  if (sleep.empty()) return trial_setup_failed("no 'sleep' in PATH");
  std::string arg1 = "600";
  char* argv[] = {sleep.data(), arg1.data(), nullptr};
  char* envp[] = {nullptr};
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) return internal_error("pipe: " + errno_text(errno));
  Fd exec_read(exec_pipe[0]), exec_write(exec_pipe[1]);
  TrialChild child{exec_write.get(), uid, argv, envp};
  // The child's stack: a copy of ours is its own (no CLONE_VM).
  constexpr std::size_t kChildStack = 64 * 1024;
  void* stack = mmap(nullptr, kChildStack, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return internal_error("mmap a stack: " + errno_text(errno));
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_ =
      clone(trial_child, static_cast<char*>(stack) + kChildStack, CLONE_NEWPID | SIGCHLD, &child);
  const int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  munmap(stack, kChildStack);
  if (pid_ < 0) return trial_setup_failed("clone(CLONE_NEWPID): " + errno_text(clone_errno));
  exec_write.reset();
  std::string why;
  char buf[256];
  ssize_t n;
  while ((n = read(exec_read.get(), buf, sizeof buf)) != 0) {  // EOF: exec'd (or died)
    if (n > 0) why.append(buf, static_cast<std::size_t>(n));
    if (n < 0 && errno != EINTR) break;
  }
  if (why.empty() && waitpid(pid_, nullptr, WNOHANG) == pid_) {
    pid_ = -1;  // reaped: no longer ours to kill
    return trial_setup_failed("its " + sleep + " did not start");
  }
  if (!why.empty()) return trial_setup_failed(why);
  return Status::ok();
}

TrialJob::~TrialJob() {
  // A criu killed for its time leaves the cgroup frozen, and a task frozen
  // by v1's freezer does not die until thawed.
  if (pid_ > 0 && !freezer_.empty()) (void)set_frozen(freezer_, false);
  if (pid_ > 0) {
    // The namespace's init: the kernel kills the rest, and reaps them before it.
    kill(pid_, SIGKILL);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  // Emptied above; remove() kills what it still finds, for the next try.
  for (int attempt = 0; attempt < 100 && !cgroup_.remove().is_ok(); ++attempt) {
    poll(nullptr, 0, 10);
  }
  cgroups_.remove_instance_dirs(instance_);
}

}  // namespace hpcq::agent
