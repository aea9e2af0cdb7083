#include "agent/executor/process_executor.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "agent/executor/freeze_and_pin.h"
#include "agent/executor/oci_bundle.h"
#include "agent/executor/posix.h"

namespace hpcq::agent {
namespace {

// How long launch() waits for the shell to say its tasks are started. Only a
// wedged machine takes this long; the job is then left to end on its own.
constexpr int kReadyTimeoutMs = 10'000;

// The shell's exit code when it could not even read its launch file; it then
// leaves no results.json and its log explains.
constexpr int kShellSetupFailed = 125;

// struct clone_args, version 0 (linux/sched.h; not included because its
// CLONE_* macros collide with glibc's <sched.h>).
struct CloneArgs {
  std::uint64_t flags = 0;
  std::uint64_t pidfd = 0;
  std::uint64_t child_tid = 0;
  std::uint64_t parent_tid = 0;
  std::uint64_t exit_signal = 0;
  std::uint64_t stack = 0;
  std::uint64_t stack_size = 0;
  std::uint64_t tls = 0;
};

// Where `runc restore` of a worker works: CRIU's restore.log, runc's PID file.
std::string restore_work_dir(const JobFiles& files, int worker) {
  return files.oci_dir + "/restore-" + std::to_string(worker);
}

// clone3 hands back the pidfd atomically; clone + pidfd_open is the fallback
// where seccomp filters refuse clone3 with ENOSYS (container runtimes do).
// The open is safe there: the child cannot exit (and its PID be reused) before
// we release it through the pipe, and only we can reap it.
pid_t clone_new_pid_ns(int* pidfd) {
  int fd = -1;
  CloneArgs args;
  args.flags = CLONE_NEWPID | CLONE_PIDFD;
  args.pidfd = reinterpret_cast<std::uintptr_t>(&fd);
  args.exit_signal = SIGCHLD;
  long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0 && errno == ENOSYS) {
    pid = syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
    if (pid > 0) fd = open_pidfd(static_cast<pid_t>(pid));
  }
  *pidfd = fd;
  return static_cast<pid_t>(pid);
}

// Runs in the child of clone(), a copy of a multi-threaded process: only
// async-signal-safe calls until execve.
[[noreturn]] void exec_shell(int go_fd, int devnull_fd, int log_fd, int ready_fd, int output_fd,
                             char* const* argv, char* const* envp) {
  char go = 0;
  ssize_t n;
  do {
    n = read(go_fd, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) _exit(kShellSetupFailed);  // the parent gave up on us
  // Lift every fd above 0..3 first so that the dup2s cannot clobber each other.
  int in = fcntl(devnull_fd, F_DUPFD, 10);
  int out = fcntl(log_fd, F_DUPFD, 10);
  int ready = fcntl(ready_fd, F_DUPFD, 10);
  int output = output_fd < 0 ? -1 : fcntl(output_fd, F_DUPFD, 10);
  if (in < 0 || out < 0 || ready < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0 ||
      dup2(ready, 3) < 0 || (output_fd >= 0 && (output < 0 || dup2(output, kOutputFd) < 0))) {
    _exit(kShellSetupFailed);
  }
  // The agent's sockets and pidfds are not the job's business.
  const unsigned first_closed = output_fd < 0 ? 4U : static_cast<unsigned>(kOutputFd) + 1;
  if (syscall(SYS_close_range, first_closed, ~0U, 0U) != 0) {
    for (int fd = static_cast<int>(first_closed); fd < 65536; ++fd) close(fd);
  }
  execve(argv[0], argv, envp);
  static const char kMsg[] = "hpcq-job-shell: execve failed\n";
  ssize_t ignored = write(2, kMsg, sizeof kMsg - 1);
  (void)ignored;
  _exit(kShellSetupFailed);
}

}  // namespace

ProcessExecutor::ProcessExecutor(ExecutorConfig config, CgroupHierarchy hierarchy, int notify[2])
    : config_(std::move(config)),
      hierarchy_(std::move(hierarchy)),
      notify_read_(notify[0]),
      notify_write_(notify[1]) {}

ProcessExecutor::~ProcessExecutor() { shutdown(); }

Result<std::unique_ptr<ProcessExecutor>> ProcessExecutor::create(ExecutorConfig config) {
  if (config.instance.empty() || config.instance.find('/') != std::string::npos) {
    return invalid_argument("executor instance name '" + config.instance +
                            "' must be non-empty and contain no '/'");
  }
  if (config.state_dir.empty()) return invalid_argument("executor: no state directory");
  if (access(config.job_shell_path.c_str(), X_OK) != 0) {
    return failed_precondition("job shell '" + config.job_shell_path +
                               "' is not executable: " + errno_text(errno));
  }
  auto hierarchy = CgroupHierarchy::detect(config.cgroup_root);
  if (!hierarchy.is_ok()) return hierarchy.status();
  int left = hierarchy->remove_stale(config.instance);
  if (left > 0) {
    spdlog::warn("executor {}: {} cgroup(s) of a previous instance still hold processes",
                 config.instance, left);
  }
  std::error_code ec;
  const std::string jobs = config.state_dir + "/jobs";
  std::filesystem::create_directories(jobs, ec);
  if (ec) return internal_error("create " + jobs + ": " + ec.message());
  // Job users read their script and hostfile below here.
  std::filesystem::permissions(jobs, std::filesystem::perms(0755), ec);
  if (ec) return internal_error("chmod " + jobs + ": " + ec.message());
  int notify[2];
  if (pipe2(notify, O_CLOEXEC | O_NONBLOCK) != 0)
    return internal_error("pipe: " + errno_text(errno));
  return std::unique_ptr<ProcessExecutor>(
      new ProcessExecutor(std::move(config), std::move(hierarchy).value(), notify));
}

CgroupLimits ProcessExecutor::job_limits(const JobLaunch& l) const {
  const auto cores = static_cast<std::int64_t>(std::max<std::size_t>(1, l.host_cpus.size()));
  return {l.host_cpus, l.host_mems, l.memory_limit_bytes, config_.pids_per_core * cores};
}

Status ProcessExecutor::prepare_job_dir(const JobLaunch& l, const std::string& dir) const {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);  // a crashed agent's leftovers
  if (mkdir(dir.c_str(), 0755) != 0)
    return internal_error("mkdir " + dir + ": " + errno_text(errno));
  if (chmod(dir.c_str(), 0755) != 0)
    return internal_error("chmod " + dir + ": " + errno_text(errno));
  const JobFiles files(dir);
  HPCQ_RETURN_IF_ERROR(write_new_file(files.hostfile, l.hostfile, 0644, 0, 0));
  if (!l.script.empty()) {
    HPCQ_RETURN_IF_ERROR(write_new_file(files.script, l.script, 0700, l.uid, l.gid));
  }
  return Status::ok();
}

Status ProcessExecutor::prepare_workers(JobLaunch& l, Job& j) const {
  const bool v2 = hierarchy_.version() == CgroupVersion::kV2;
  const bool own_cgroups = l.image.empty() && l.workers.size() > 1;
  // v2 allows processes only in leaves: a job that has children (workers,
  // containers, a batch job's steps) keeps its shell in a leaf of its own.
  if (v2 && (own_cgroups || !l.image.empty() || l.batch)) {
    auto shell = j.cgroup.create_child("shell", {});
    if (!shell.is_ok()) return shell.status();
    j.shell_cgroup = std::move(shell).value();
  }
  for (std::size_t w = 0; w < l.workers.size(); ++w) {
    WorkerSpec& worker = l.workers[w];
    if (!l.image.empty()) {
      HPCQ_RETURN_IF_ERROR(prepare_container(l, w, j));
    } else if (own_cgroups) {
      auto child =
          j.cgroup.create_child("worker-" + std::to_string(worker.id),
                                {worker.host_cpus, worker.host_mems, worker.memory_limit_bytes});
      if (!child.is_ok()) return child.status();
      worker.cgroup_dirs = child->dirs();
    }
  }
  return Status::ok();
}

std::string ProcessExecutor::container_id(JobId job, int worker) const {
  return "hpcq-" + config_.instance + "-" + std::to_string(job) + "-" + std::to_string(worker);
}

Status ProcessExecutor::prepare_container(JobLaunch& l, std::size_t w, const Job& j,
                                          const std::string& restore_images) const {
  WorkerSpec& worker = l.workers[w];
  // The image: a bundle (config.json names its root) or a root file system.
  std::string rootfs = l.image;
  const std::string bundle_config = read_whole(l.image + "/config.json");
  if (!bundle_config.empty()) {
    nlohmann::json c = nlohmann::json::parse(bundle_config, nullptr, false);
    if (c.is_discarded() || !c.contains("root") || !c["root"].contains("path") ||
        !c["root"]["path"].is_string()) {
      return invalid_argument("image " + l.image + ": config.json has no root.path");
    }
    const std::string path = c["root"]["path"].get<std::string>();
    rootfs = !path.empty() && path[0] == '/' ? path : l.image + "/" + path;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(rootfs, ec)) {
    return invalid_argument("image " + l.image + ": " + rootfs + " is not a directory");
  }

  const JobFiles files(j.dir);
  if (mkdir(files.oci_dir.c_str(), 0711) != 0 && errno != EEXIST) {
    return internal_error("mkdir " + files.oci_dir + ": " + errno_text(errno));
  }
  const std::string dir = files.oci_dir + "/worker-" + std::to_string(worker.id);
  const JobFiles inside(dir);
  if (!restore_images.empty()) {
    // The bundle came back with the job directory; the shell inside read
    // its files at its start, only the container's config is new.
    unlink((dir + "/config.json").c_str());
  } else if (mkdir(dir.c_str(), 0700) != 0 || chown(dir.c_str(), l.uid, l.gid) != 0) {
    return internal_error("create " + dir + ": " + errno_text(errno));
  }
  // What the shell inside reads: this worker's tasks only, run as they are.
  JobLaunch inner = l;
  inner.image.clear();
  inner.tasks.clear();
  for (const TaskSpec& t : l.tasks) {
    if (t.worker != static_cast<int>(w)) continue;
    inner.tasks.push_back(t);
    inner.tasks.back().worker = 0;
  }
  inner.workers = {worker};
  if (passwd* pw = getpwuid(l.uid)) inner.env.emplace("HOME", pw->pw_dir);
  if (restore_images.empty()) {
    HPCQ_RETURN_IF_ERROR(write_new_file(inside.launch, encode_launch(inner), 0600, l.uid, l.gid));
    HPCQ_RETURN_IF_ERROR(write_new_file(inside.hostfile, l.hostfile, 0644, l.uid, l.gid));
    if (!l.script.empty()) {
      HPCQ_RETURN_IF_ERROR(write_new_file(inside.script, l.script, 0700, l.uid, l.gid));
    }
  }

  OciContainer c;
  c.rootfs = rootfs;
  c.args = {kContainerShell, dir};
  c.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
  c.uid = l.uid;
  c.gid = l.gid;
  if (!l.user.empty()) {
    int n = 64;
    std::vector<gid_t> groups(static_cast<std::size_t>(n));
    if (getgrouplist(l.user.c_str(), l.gid, groups.data(), &n) < 0) {
      groups.resize(static_cast<std::size_t>(n));
      getgrouplist(l.user.c_str(), l.gid, groups.data(), &n);
    }
    groups.resize(static_cast<std::size_t>(std::max(n, 0)));
    for (gid_t g : groups) {
      if (g != l.gid) c.additional_gids.push_back(g);
    }
  }
  c.cgroups_path =
      CgroupHierarchy::job_path(config_.instance, l.id) + "/worker-" + std::to_string(worker.id);
  c.cpus = worker.host_cpus;
  c.mems = worker.host_mems;
  c.memory_limit_bytes = worker.memory_limit_bytes;
  c.pids_limit = config_.container_pids_limit;
  c.shell_binary = config_.container_shell_path;
  c.writable_dirs = {dir};
  if (!l.cwd.empty()) c.writable_dirs.push_back(l.cwd);
  for (const std::string* out : {&l.stdout_path, &l.stderr_path}) {
    if (!out->empty()) c.writable_dirs.push_back(std::filesystem::path(*out).parent_path());
  }
  if (std::filesystem::exists("/etc/hosts", ec)) c.read_only_files.push_back("/etc/hosts");
  HPCQ_RETURN_IF_ERROR(write_new_file(dir + "/config.json", oci_config_json(c), 0600, 0, 0));

  worker.results = inside.results;
  const std::string id = container_id(l.id, worker.id);
  if (restore_images.empty()) {
    worker.command = {
        config_.runc_path, "--root", files.oci_dir + "/state", "run", "--bundle", dir, id};
    return Status::ok();
  }
  const std::string work = restore_work_dir(files, worker.id);
  if (mkdir(work.c_str(), 0700) != 0) {
    return internal_error("create " + work + ": " + errno_text(errno));
  }
  worker.command = {
      config_.runc_path, "--criu",       criu_.binary,   "--root",      files.oci_dir + "/state",
      "restore",         "--image-path", restore_images, "--work-path", work,
      "--pid-file",      work + "/pid",  "--bundle",     dir,           id};
  return Status::ok();
}

Status ProcessExecutor::validate(const JobLaunch& l) const {
  const std::string job = "job " + std::to_string(l.id);
  if (l.step == 0 && jobs_.count(l.id)) {
    return Status(Code::kAlreadyExists, job + " is already running here");
  }
  if (l.tasks.empty() && !l.batch) return invalid_argument(job + ": no tasks for this node");
  if (l.forward_output && !l.image.empty()) {
    return invalid_argument(job + ": output of an --image job cannot be forwarded");
  }
  if (l.argv.empty() && l.script.empty()) return invalid_argument(job + ": no command or script");
  if (!l.image.empty() && l.image[0] != '/') {
    return invalid_argument(job + ": image '" + l.image + "' is not an absolute path");
  }
  for (const std::string* path : {&l.stdout_path, &l.stderr_path, &l.cwd}) {
    if (!path->empty() && (*path)[0] != '/') {
      return invalid_argument(job + ": path '" + *path + "' is not absolute");
    }
  }
  if (l.time_limit_s < 0) return invalid_argument(job + ": negative time limit");
  return Status::ok();
}

Status ProcessExecutor::launch(const JobLaunch& given, TimeUs now) {
  if (given.step != 0) return launch_step(given);
  JobLaunch l = given;
  ensure_workers(l);
  const std::string job = "job " + std::to_string(l.id);
  HPCQ_RETURN_IF_ERROR(validate(l));

  Job j;
  j.id = l.id;
  j.dir = config_.state_dir + "/jobs/" + std::to_string(l.id);
  j.image = !l.image.empty();
  j.time_limit_s = l.time_limit_s;
  j.uid = l.uid;
  j.forward_output = l.forward_output;
  j.launched = now;
  j.warn_signal = l.warn_signal;
  j.warn_seconds = l.warn_seconds;
  set_limit(j, l.time_limit_s);
  std::error_code ec;
  Status s = prepare_job_dir(l, j.dir);
  if (!s.is_ok()) {
    std::filesystem::remove_all(j.dir, ec);
    return Status(s.code(), job + ": " + s.message());
  }
  auto cgroup = hierarchy_.create_job(config_.instance, l.id, job_limits(l));
  if (!cgroup.is_ok()) {
    std::filesystem::remove_all(j.dir, ec);
    return Status(cgroup.status().code(), job + ": " + cgroup.status().message());
  }
  j.cgroup = std::move(cgroup).value();
  j.shell_cgroup = j.cgroup;
  s = prepare_workers(l, j);
  if (j.image) {
    for (const WorkerSpec& worker : l.workers) j.worker_ids.push_back(worker.id);
  }
  if (s.is_ok()) s = write_new_file(JobFiles(j.dir).launch, encode_launch(l), 0600, 0, 0);
  if (s.is_ok()) s = start_shell(j);
  if (!s.is_ok()) {
    if (!j.cgroup.remove().is_ok()) {
      spdlog::warn("{}: cgroups not removed after a failed start", job);
    }
    std::filesystem::remove_all(j.dir, ec);
    return Status(s.code(), job + ": " + s.message());
  }
  jobs_.emplace(l.id, std::move(j));
  return Status::ok();
}

Status ProcessExecutor::start_shell(Job& job) {
  const JobFiles files(job.dir);
  Fd log(open(files.shell_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (log.get() < 0) return internal_error("create " + files.shell_log + ": " + errno_text(errno));
  Fd devnull(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (devnull.get() < 0) return internal_error("open /dev/null: " + errno_text(errno));
  int go_pipe[2], ready_pipe[2];
  if (pipe2(go_pipe, O_CLOEXEC) != 0) return internal_error("pipe: " + errno_text(errno));
  Fd go_read(go_pipe[0]), go_write(go_pipe[1]);
  if (pipe2(ready_pipe, O_CLOEXEC) != 0) return internal_error("pipe: " + errno_text(errno));
  Fd ready_read(ready_pipe[0]), ready_write(ready_pipe[1]);
  // Forwarded output: the shell's end of a packet socket; ours, non-blocking,
  // is one of wait_fds() (take_output).
  Fd output_ours, output_theirs;
  if (job.forward_output) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
      return internal_error("socketpair: " + errno_text(errno));
    }
    output_ours.adopt(pair[0]);
    output_theirs.adopt(pair[1]);
    fcntl(output_ours.get(), F_SETFL, O_NONBLOCK);
  }

  // Everything the child needs is built before clone: it may not allocate.
  std::string shell = config_.job_shell_path, dir = job.dir;
  std::string path_env = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  // For the CRIU of a `runc restore` the shell runs (its tasks get their own).
  std::string criu_env = kCriuEnvironment;
  char* argv[] = {shell.data(), dir.data(), nullptr};
  char* envp[] = {path_env.data(), criu_env.data(), nullptr};

  // No agent signal handler may run in the child (it would act on the
  // agent's copied state); the shell resets the mask it inherits.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int pidfd = -1;
  pid_t pid = clone_new_pid_ns(&pidfd);
  if (pid == 0) {
    exec_shell(go_read.get(), devnull.get(), log.get(), ready_write.get(), output_theirs.get(),
               argv, envp);
  }
  int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return internal_error("clone(CLONE_NEWPID): " + errno_text(clone_errno));
  go_read.reset();
  ready_write.reset();
  output_theirs.reset();

  auto abandon = [&](Status s) {
    // Closing the pipe unblocks the child, which then exits at once.
    go_write.reset();
    siginfo_t info{};
    if (pidfd >= 0) {
      waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED);
      close(pidfd);
    } else {
      waitpid(pid, nullptr, 0);
    }
    return s;
  };
  if (pidfd < 0) return abandon(internal_error("pidfd_open: " + errno_text(errno)));
  Status s = job.shell_cgroup.add_process(pid);
  if (!s.is_ok()) return abandon(s);
  job.pid = pid;
  job.pidfd = pidfd;
  job.output_fd = output_ours.release();
  char go = 'g';
  if (write(go_write.get(), &go, 1) != 1) {
    signal_pidfd(pidfd, SIGKILL);
  }
  go_write.reset();

  // The shell writes one byte once every task is forked, then closes; EOF
  // alone means it ended early, which reap() will report.
  pollfd p{ready_read.get(), POLLIN, 0};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kReadyTimeoutMs);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      spdlog::warn("job {}: the job shell did not report its tasks started within {} ms", job.id,
                   kReadyTimeoutMs);
      break;
    }
    int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[16];
    ssize_t n = read(ready_read.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    break;  // the byte, or EOF
  }
  return Status::ok();
}

bool ProcessExecutor::poll_exit(Job& job) {
  if (job.exited) return true;
  siginfo_t info{};
  if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(job.pidfd), &info,
             WEXITED | WNOHANG) != 0) {
    if (errno == EINTR) return false;
    // ECHILD: someone reaped our child (SIGCHLD ignored, waitpid(-1)): the
    // job is over but its code is lost.
    spdlog::warn("job {}: waitid: {}", job.id, errno_text(errno));
    job.shell_code = 255;
  } else if (info.si_pid == 0) {
    return false;
  } else if (info.si_code == CLD_EXITED) {
    job.shell_code = info.si_status;
  } else {
    job.shell_signal = info.si_status;
    job.shell_code = 128 + info.si_status;
  }
  // The pidfd stays open until reap(): the agent re-reads wait_fds() after
  // each reap(), so closing it anywhere else could leave it polling a dead fd.
  job.exited = true;
  return true;
}

JobExit ProcessExecutor::exit_of(const Job& job) const {
  JobExit e;
  e.id = job.id;
  e.step = job.step;
  e.exit_code = job.shell_code;
  const JobFiles files(job.dir);
  // The usage measured here: the shell's, and the cgroup's peak.
  const auto results = decode_results(read_whole(files.results));
  if (results.is_ok()) e.cpu_time_us = results->cpu_time_us;
  e.max_memory_bytes = job.memory_peak;
  if (job.cancelled) {
    e.kind = ExitKind::kCancelled;
    e.reason = "cancelled";
    return e;
  }
  if (job.timed_out) {
    e.kind = ExitKind::kTimeout;
    e.reason = "time limit of " + std::to_string(job.time_limit_s) + " s reached" +
               (job.kill_sent ? " (killed after the grace period)" : "");
    return e;
  }
  if (job.shell_code == 0) {
    e.kind = ExitKind::kCompleted;
    return e;
  }
  e.kind = ExitKind::kFailed;
  // Named, not just "killed by signal 9" (Slurm: OUT_OF_MEMORY).
  const std::string oom = job.oom_kills > 0 ? "out of memory: the kernel killed " +
                                                  std::to_string(job.oom_kills) +
                                                  " process(es) at the job's memory limit; "
                                            : "";
  if (results.is_ok()) {
    e.reason = describe_results(*results);
    if (!e.reason.empty()) {
      e.reason = oom + e.reason;
      return e;
    }
  }
  if (job.shell_signal != 0) {
    e.reason = "job shell killed by signal " + std::to_string(job.shell_signal);
    return e;
  }
  std::string line = last_line(files.shell_log);
  e.reason = line.empty() ? "job shell exited with code " + std::to_string(job.shell_code) : line;
  return e;
}

Status ProcessExecutor::cancel(JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return not_found("job " + std::to_string(id) + " is not running here");
  Job& job = it->second;
  if (job.checkpointing) {
    return failed_precondition("job " + std::to_string(id) +
                               " is being checkpointed: cancel it once that is done");
  }
  for (Job* step : steps_of(id)) {
    if (!poll_exit(*step) && signal_pidfd(step->pidfd, SIGKILL) == 0) step->cancelled = true;
  }
  if (poll_exit(job)) return failed_precondition("job " + std::to_string(id) + " already ended");
  if (signal_pidfd(job.pidfd, SIGKILL) != 0) {
    return internal_error("job " + std::to_string(id) + ": kill: " + errno_text(errno));
  }
  job.cancelled = true;
  return Status::ok();
}

void ProcessExecutor::set_limit(Job& job, std::int64_t seconds) {
  job.deadline = seconds > 0 ? job.launched + seconds * kUsPerSecond : 0;
  job.warn_at = job.deadline != 0 && job.warn_signal != 0
                    ? std::max(job.launched, job.deadline - job.warn_seconds * kUsPerSecond)
                    : 0;
}

Status ProcessExecutor::set_time_limit(JobId id, std::int64_t seconds) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return not_found("job " + std::to_string(id) + " is not running here");
  Job& job = it->second;
  job.time_limit_s = seconds;
  // A job already past its old limit is ending: the new one does not save it.
  if (!job.timed_out) set_limit(job, seconds);
  return Status::ok();
}

Status ProcessExecutor::cancel_step(JobId id, std::uint32_t step) {
  const std::string name = "job " + std::to_string(id) + " step " + std::to_string(step);
  auto it = steps_.find({id, step});
  if (it == steps_.end()) return not_found(name + " is not running here");
  if (poll_exit(it->second)) return failed_precondition(name + " already ended");
  if (signal_pidfd(it->second.pidfd, SIGKILL) != 0) {
    return internal_error(name + ": kill: " + errno_text(errno));
  }
  it->second.cancelled = true;
  return Status::ok();
}

Status ProcessExecutor::signal(JobId id, int signo) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return not_found("job " + std::to_string(id) + " is not running here");
  Job& job = it->second;
  for (Job* step : steps_of(id)) {
    if (!poll_exit(*step)) signal_pidfd(step->pidfd, signo);
  }
  if (poll_exit(job)) return failed_precondition("job " + std::to_string(id) + " already ended");
  if (signal_pidfd(job.pidfd, signo) != 0) {
    return internal_error("job " + std::to_string(id) + ": signal " + std::to_string(signo) + ": " +
                          errno_text(errno));
  }
  return Status::ok();
}

Status ProcessExecutor::signal_step(JobId id, std::uint32_t step, int signo) {
  const std::string name = "job " + std::to_string(id) + " step " + std::to_string(step);
  auto it = steps_.find({id, step});
  if (it == steps_.end()) return not_found(name + " is not running here");
  if (poll_exit(it->second)) return failed_precondition(name + " already ended");
  if (signal_pidfd(it->second.pidfd, signo) != 0) {
    return internal_error(name + ": signal " + std::to_string(signo) + ": " + errno_text(errno));
  }
  return Status::ok();
}

Status ProcessExecutor::launch_step(JobLaunch l) {
  ensure_workers(l);
  const std::string name = "job " + std::to_string(l.id) + " step " + std::to_string(l.step);
  auto parent = jobs_.find(l.id);
  if (parent == jobs_.end() || parent->second.exited) {
    return not_found(name + ": the job is not running here");
  }
  if (parent->second.checkpointing) {
    return failed_precondition(name + ": the job is being checkpointed");
  }
  if (steps_.count({l.id, l.step})) {
    return Status(Code::kAlreadyExists, name + " is already running here");
  }
  HPCQ_RETURN_IF_ERROR(validate(l));
  Job s;
  s.id = l.id;
  s.step = l.step;
  s.uid = l.uid;
  s.forward_output = l.forward_output;
  const std::string steps_dir = parent->second.dir + "/steps";
  s.dir = steps_dir + "/" + std::to_string(l.step);
  if (mkdir(steps_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return internal_error(name + ": mkdir " + steps_dir + ": " + errno_text(errno));
  }
  std::error_code ec;
  Status st = prepare_job_dir(l, s.dir);
  if (st.is_ok()) {
    // Its cpuset within the job's; the job's memory limit covers it.
    auto cgroup = parent->second.cgroup.create_child("step-" + std::to_string(l.step),
                                                     {l.host_cpus, l.host_mems, 0, 0});
    if (cgroup.is_ok()) {
      s.cgroup = std::move(cgroup).value();
      s.shell_cgroup = s.cgroup;
    }
    st = cgroup.status();
  }
  if (st.is_ok()) st = write_new_file(JobFiles(s.dir).launch, encode_launch(l), 0600, 0, 0);
  if (st.is_ok()) st = start_shell(s);
  if (!st.is_ok()) {
    if (!s.cgroup.dirs().empty() && !s.cgroup.remove().is_ok()) {
      spdlog::warn("{}: cgroups not removed after a failed start", name);
    }
    std::filesystem::remove_all(s.dir, ec);
    return Status(st.code(), name + ": " + st.message());
  }
  steps_.emplace(std::make_pair(l.id, l.step), std::move(s));
  return Status::ok();
}

void ProcessExecutor::check_timeouts(TimeUs now) {
  for (auto& [id, job] : jobs_) send_input(job);
  for (auto& [key, step] : steps_) send_input(step);
  for (auto& [id, job] : jobs_) {
    if (job.exited || job.pidfd < 0 || job.deadline == 0 || job.cancelled || job.checkpointing) {
      continue;
    }
    if (job.warn_at != 0 && now >= job.warn_at && !job.timed_out) {
      // --signal: to the tasks (the shell forwards it) and the job's steps.
      signal_pidfd(job.pidfd, job.warn_signal);
      for (Job* step : steps_of(id)) signal_pidfd(step->pidfd, job.warn_signal);
      job.warn_at = 0;
    }
    if (!job.timed_out && now >= job.deadline) {
      // The shell forwards SIGTERM to every process of the job.
      signal_pidfd(job.pidfd, SIGTERM);
      job.timed_out = true;
      job.term_sent = now;
    } else if (job.timed_out && !job.kill_sent && now >= job.term_sent + config_.kill_grace) {
      signal_pidfd(job.pidfd, SIGKILL);
      job.kill_sent = true;
    }
  }
}

Status ProcessExecutor::clean_up(Job& job) {
  if (job.pidfd >= 0) {
    close(job.pidfd);  // readable for good now; cleanup retries ride on later calls
    job.pidfd = -1;
  }
  read_output(job);         // all of it: the shell wrote it before it exited
  if (job.oom_kills < 0) {  // before the cgroup goes
    job.oom_kills = job.cgroup.oom_kills();
    job.memory_peak = job.cgroup.memory_peak_bytes();
  }
  Status s = job.cgroup.remove();
  if (!s.is_ok()) {
    if (s.code() != Code::kFailedPrecondition) spdlog::warn("job {}: {}", job.id, s.message());
    return s;  // again on the next call
  }
  if (job.image) hierarchy_.remove_other_controllers(config_.instance, job.id);
  return Status::ok();
}

std::vector<JobExit> ProcessExecutor::reap() {
  std::vector<JobExit> exits;
  // Steps first: a job whose shell has ended waits for its steps to go.
  for (auto it = steps_.begin(); it != steps_.end();) {
    Job& step = it->second;
    if (!poll_exit(step) || !clean_up(step).is_ok()) {
      ++it;
      continue;
    }
    exits.push_back(exit_of(step));
    std::error_code ec;
    std::filesystem::remove_all(step.dir, ec);
    it = steps_.erase(it);
  }
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Job& job = it->second;
    if (job.checkpointing || !poll_exit(job)) {  // a dump's kill is not an end
      ++it;
      continue;
    }
    // The job's end ends its steps (a batch script that left one running).
    std::vector<Job*> steps = steps_of(job.id);
    for (Job* step : steps) {
      if (!step->cancelled && signal_pidfd(step->pidfd, SIGKILL) == 0) step->cancelled = true;
    }
    if (!steps.empty() || !clean_up(job).is_ok()) {
      if (job.pidfd >= 0) {  // its steps' pidfds wake the next call
        close(job.pidfd);
        job.pidfd = -1;
      }
      ++it;
      continue;
    }
    exits.push_back(exit_of(job));
    std::error_code ec;
    std::filesystem::remove_all(job.dir, ec);
    it = jobs_.erase(it);
  }
  return exits;
}

std::vector<ProcessExecutor::Job*> ProcessExecutor::steps_of(JobId id) {
  std::vector<Job*> steps;
  for (auto it = steps_.lower_bound({id, 0}); it != steps_.end() && it->first.first == id; ++it) {
    steps.push_back(&it->second);
  }
  return steps;
}

std::vector<int> ProcessExecutor::wait_fds() const {
  std::vector<int> fds;
  if (!dumps_.empty() || !restores_.empty()) fds.push_back(notify_read_.get());
  for (const auto& [id, job] : jobs_) {
    if (job.pidfd >= 0) fds.push_back(job.pidfd);
    if (job.output_fd >= 0) fds.push_back(job.output_fd);
  }
  for (const auto& [key, step] : steps_) {
    if (step.pidfd >= 0) fds.push_back(step.pidfd);
    if (step.output_fd >= 0) fds.push_back(step.output_fd);
  }
  return fds;
}

void ProcessExecutor::read_output(Job& job) {
  if (job.output_fd < 0) return;
  static char frame[kOutputFrameData + 64];
  for (;;) {
    const ssize_t n = recv(job.output_fd, frame, sizeof frame, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) {
      auto decoded = decode_output_frame(std::string_view(frame, static_cast<size_t>(n)));
      if (!decoded.is_ok()) {
        spdlog::warn("job {}: {}", job.id, decoded.status().message());
        continue;
      }
      output_.push_back(
          {job.id, job.step, decoded->rank, decoded->is_stderr, std::move(decoded->data)});
      continue;
    }
    if (n == 0 || errno != EAGAIN) {  // the shell has ended (or the socket failed)
      close(job.output_fd);
      job.output_fd = -1;
    }
    return;
  }
}

Result<LiveUsage> ProcessExecutor::usage(JobId id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.exited) {
    return not_found("job " + std::to_string(id) + " is not running here");
  }
  LiveUsage u;
  const JobCgroup& cgroup = it->second.cgroup;
  const long ticks = sysconf(_SC_CLK_TCK);
  for (pid_t pid : cgroup.pids()) {  // its steps' too: their cgroups are children
    const std::string stat = read_whole("/proc/" + std::to_string(pid) + "/stat");
    const std::size_t close = stat.rfind(')');  // the name may hold anything
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    std::int64_t ticks_used = 0;
    // After the name: state is field 3; utime, stime, cutime, cstime are 14-17.
    for (int n = 3; n <= 17 && fields >> field; ++n) {
      if (n >= 14) ticks_used += std::strtoll(field.c_str(), nullptr, 10);
    }
    u.cpu_time_us += ticks > 0 ? ticks_used * 1'000'000 / ticks : 0;
  }
  u.memory_bytes = cgroup.memory_bytes();
  u.max_memory_bytes = cgroup.memory_peak_bytes();
  return u;
}

Status ProcessExecutor::write_input(JobId id, std::uint32_t step, const TaskInput& input) {
  Job* job = nullptr;
  if (step == 0) {
    auto it = jobs_.find(id);
    if (it != jobs_.end()) job = &it->second;
  } else if (auto it = steps_.find({id, step}); it != steps_.end()) {
    job = &it->second;
  }
  const std::string name =
      "job " + std::to_string(id) + (step ? " step " + std::to_string(step) : "");
  if (!job || job->exited) return not_found(name + " is not running here");
  if (job->output_fd < 0) return failed_precondition(name + " does not take input");
  job->input.push_back(encode_input_frame(input));
  send_input(*job);
  return Status::ok();
}

void ProcessExecutor::send_input(Job& job) {
  while (!job.input.empty() && job.output_fd >= 0) {
    const std::string& frame = job.input.front();
    if (send(job.output_fd, frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) job.input.clear();  // the shell is gone
      return;                                  // full: again on the next check (check_timeouts)
    }
    job.input.pop_front();
  }
}

std::vector<TaskOutput> ProcessExecutor::take_output() {
  for (auto& [id, job] : jobs_) read_output(job);
  for (auto& [key, step] : steps_) read_output(step);
  return std::exchange(output_, {});
}

std::vector<JobId> ProcessExecutor::running() const {
  std::vector<JobId> ids;
  for (const auto& [id, job] : jobs_) ids.push_back(id);
  return ids;
}

std::vector<std::string> ProcessExecutor::cgroup_dirs(JobId id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? std::vector<std::string>{} : it->second.cgroup.dirs();
}

void ProcessExecutor::discard(Job& job) {
  if (job.output_fd >= 0) {
    close(job.output_fd);
    job.output_fd = -1;
  }
  if (!job.exited && job.pidfd >= 0) {
    signal_pidfd(job.pidfd, SIGKILL);
    siginfo_t info{};
    // SIGKILL of the namespace's init: the wait ends once all of it is gone.
    while (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(job.pidfd), &info, WEXITED) !=
               0 &&
           errno == EINTR) {
    }
    job.exited = true;
  }
  if (job.pidfd >= 0) close(job.pidfd);
  job.pidfd = -1;
  // Emptied cgroups may refuse rmdir for a moment (v2): retry for up to 2 s.
  for (int attempt = 0; attempt < 200 && !job.cgroup.remove().is_ok(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!job.cgroup.dirs().empty()) {
    spdlog::warn("job {}: cgroup {} not removed", job.id, job.cgroup.dirs().front());
  }
  if (job.image) hierarchy_.remove_other_controllers(config_.instance, job.id);
  std::error_code ec;
  std::filesystem::remove_all(job.dir, ec);
}

void ProcessExecutor::shutdown() {
  // A dump in flight is waited for (CRIU is bounded by criu_timeout_s).
  while (!dumps_.empty()) (void)finish_dump(dumps_.begin()->first);
  while (!restores_.empty()) (void)finish_restore(restores_.begin()->first);
  for (auto& [key, step] : steps_) discard(step);
  steps_.clear();
  for (auto& [id, job] : jobs_) discard(job);
  jobs_.clear();
  hierarchy_.remove_instance_dirs(config_.instance);
}

namespace {

namespace fs = std::filesystem;

constexpr char kCheckpointMeta[] = "hpcq-checkpoint.json";
constexpr char kJobDirCopy[] = "job-dir";

}  // namespace

Status ProcessExecutor::checkpoint_capability() {
  if (!criu_probed_) {
    auto info = probe_criu(config_.criu_path);
    if (info.is_ok()) {
      if (Status works = criu_trial_dump(*info); !works.is_ok()) info = works;
    }
    if (info.is_ok()) {
      criu_ = std::move(info).value();
      criu_status_ = Status::ok();
      spdlog::info("executor {}: checkpoint-capable (CRIU {} at {})", config_.instance,
                   criu_.version, criu_.binary);
    } else {
      criu_status_ = failed_precondition("this node cannot checkpoint: " + info.status().message());
      spdlog::warn("executor {}: {}", config_.instance, criu_status_.message());
    }
    criu_probed_ = true;
  }
  return criu_status_;
}

std::vector<CheckpointOutcome> ProcessExecutor::finished_checkpoints() {
  char buf[64];
  while (read(notify_read_.get(), buf, sizeof buf) > 0) {
  }
  std::vector<JobId> done;
  for (const auto& [id, dump] : dumps_) {
    if (dump->done.load()) done.push_back(id);
  }
  std::vector<CheckpointOutcome> outcomes;
  for (JobId id : done) outcomes.push_back(finish_dump(id));
  return outcomes;
}

// An image job's shell is stopped (SIGSTOP, which a namespace's init gets
// from its parent namespace) while `runc checkpoint` runs: runc runs in the
// job's PID namespace, and a dump that kills the container would otherwise
// end the shell's last worker, the shell, and with it the namespace -- runc
// included, before it has finished.
void ProcessExecutor::hold_shell(Job& job, bool hold) {
  if (job.pidfd < 0) return;
  signal_pidfd(job.pidfd, hold ? SIGSTOP : SIGCONT);
  if (!hold) return;
  const std::string stat = "/proc/" + std::to_string(job.pid) + "/stat";
  for (int attempt = 0; attempt < 500; ++attempt) {
    const std::string text = read_whole(stat);
    const std::size_t paren = text.rfind(')');
    if (paren == std::string::npos || paren + 2 >= text.size()) return;  // gone
    const char state = text[paren + 2];
    if (state == 'T' || state == 'Z') return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  spdlog::warn("job {}: its shell did not stop within a second", job.id);
}

Status ProcessExecutor::checkpoint_of_other_users() {
  Status capable = checkpoint_capability();
  if (!capable.is_ok()) return capable;
  if (!other_users_status_) {
    // nobody's uid: a user with no rights of its own, as a job's user is.
    constexpr uid_t kUnprivileged = 65534;
    Status works = criu_trial_dump(criu_, std::chrono::seconds(15), kUnprivileged);
    other_users_status_ =
        works.is_ok()
            ? Status::ok()
            : failed_precondition("this node can checkpoint only root's jobs: " + works.message());
    if (!works.is_ok()) spdlog::warn("executor {}: {}", config_.instance, works.message());
  }
  return *other_users_status_;
}

Status ProcessExecutor::begin_checkpoint(JobId id, const std::string& image_dir,
                                         CheckpointThen then) {
  const std::string name = "job " + std::to_string(id);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return not_found(name + " is not running here");
  Job& job = it->second;
  if (job.checkpointing) return failed_precondition(name + " is being checkpointed already");
  if (poll_exit(job) || job.cancelled || job.timed_out) {
    return failed_precondition(name + " is ending: nothing to checkpoint");
  }
  if (!steps_of(id).empty()) {
    return failed_precondition(name + " has steps running: checkpoint it between steps");
  }
  if (job.forward_output) {
    // CRIU cannot take the shell's socket to this agent with it.
    return failed_precondition(name +
                               " sends its output to its caller (hpcq run): it cannot be "
                               "checkpointed");
  }
  Status capable = job.uid == 0 ? checkpoint_capability() : checkpoint_of_other_users();
  if (!capable.is_ok()) return Status(capable.code(), name + ": " + capable.message());
  if (image_dir.empty() || image_dir[0] != '/') {
    return invalid_argument(name + ": image dir '" + image_dir + "' is not an absolute path");
  }
  std::error_code ec;
  fs::create_directories(image_dir, ec);
  if (ec) return internal_error(name + ": create " + image_dir + ": " + ec.message());
  const std::string meta = image_dir + "/" + kCheckpointMeta;
  if (fs::exists(meta, ec) || fs::exists(image_dir + "/inventory.img", ec)) {
    return Status(Code::kAlreadyExists, name + ": " + image_dir + " already holds a checkpoint");
  }
  // Images hold the job's memory: for root's eyes only.
  chmod(image_dir.c_str(), 0700);
  // The job dir is copied before the dump: once CRIU has killed the tree
  // (kStop) nothing may fail any more. The shell writes to its log only when
  // a task cannot start and at its end, so the copy matches the dump.
  const std::string copy = image_dir + "/" + kJobDirCopy;
  fs::remove_all(copy, ec);
  Status s = copy_job_dir(job.dir, copy);
  if (!s.is_ok()) {
    fs::remove_all(copy, ec);
    return Status(s.code(), name + ": " + s.message());
  }
  nlohmann::json m = {{"job", id},
                      {"job_dir", job.dir},
                      {"then", then == CheckpointThen::kStop ? "stop" : "continue"},
                      {"criu_version", criu_.version},
                      {"executor", job.image ? "oci" : "process"},
                      {"workers", job.worker_ids}};
  const std::string meta_tmp = meta + ".tmp";
  if (!write_text(meta_tmp, m.dump(2) + "\n")) {
    fs::remove_all(copy, ec);
    return internal_error(name + ": write " + meta_tmp + ": " + errno_text(errno));
  }

  auto dump = std::make_unique<Dump>();
  dump->then = then;
  dump->meta = meta;
  dump->criu.root = job.pid;
  dump->criu.image_dir = image_dir;
  dump->criu.leave_running = then == CheckpointThen::kContinue;
  dump->criu.freeze_cgroup = job.image ? "" : freezer_dir(job.cgroup);
  dump->criu.timeout = std::chrono::seconds(config_.criu_timeout_s);
  if (job.image) {
    const std::string runc = find_program(config_.runc_path);
    if (runc.empty()) {
      fs::remove_all(copy, ec);
      fs::remove(meta_tmp, ec);
      return failed_precondition(name + ": no '" + config_.runc_path + "' in PATH");
    }
    for (int worker : job.worker_ids) {
      RuncDump c;
      c.runc = runc;
      c.state_root = JobFiles(job.dir).oci_dir + "/state";
      c.container = container_id(id, worker);
      c.namespace_of = job.pid;
      c.image_dir = image_dir + "/worker-" + std::to_string(worker);
      // Several containers are all dumped before any stops: a failure
      // half-way must leave the job running.
      c.leave_running = then == CheckpointThen::kContinue || job.worker_ids.size() > 1;
      c.timeout = dump->criu.timeout;
      fs::create_directories(c.image_dir, ec);
      if (ec) {
        fs::remove_all(copy, ec);
        fs::remove(meta_tmp, ec);
        return internal_error(name + ": create " + c.image_dir + ": " + ec.message());
      }
      dump->containers.push_back(std::move(c));
    }
  }
  dump->start = std::chrono::steady_clock::now();
  // The thread touches only its Dump (and the notify pipe): everything else
  // stays with the loop thread, which finishes the dump (finish_dump).
  Dump* d = dump.get();
  const int notify = notify_write_.get();
  dump->thread = std::thread([d, notify, criu = criu_] {
    if (d->containers.empty()) {
      d->status = criu_dump(criu, d->criu);
    } else {
      for (const RuncDump& container : d->containers) {
        d->status = runc_dump(criu, container);
        if (!d->status.is_ok()) break;
      }
    }
    d->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - d->start).count();
    d->done.store(true);
    const char byte = 'd';
    ssize_t ignored = write(notify, &byte, 1);
    (void)ignored;
  });
  if (job.image) hold_shell(job, true);
  job.checkpointing = true;
  dumps_.emplace(id, std::move(dump));
  return Status::ok();
}

CheckpointOutcome ProcessExecutor::finish_dump(JobId id) {
  auto node = dumps_.extract(id);
  std::unique_ptr<Dump> dump = std::move(node.mapped());
  dump->thread.join();
  const std::string name = "job " + std::to_string(id);
  CheckpointOutcome outcome;
  outcome.id = id;
  auto it = jobs_.find(id);
  if (it != jobs_.end()) {
    it->second.checkpointing = false;
    // Released unless it is to go (a good dump of kStop): discard() kills it.
    if (it->second.image && !(dump->status.is_ok() && dump->then == CheckpointThen::kStop)) {
      hold_shell(it->second, false);
    }
  }
  std::error_code ec;
  const std::string meta_tmp = dump->meta + ".tmp";
  if (!dump->status.is_ok()) {
    // CRIU resumes the tree when it fails, but not when it was killed.
    if (!dump->criu.freeze_cgroup.empty() && !set_frozen(dump->criu.freeze_cgroup, false).is_ok()) {
      spdlog::warn("{}: could not thaw {} after a failed dump", name, dump->criu.freeze_cgroup);
    }
    fs::remove(meta_tmp, ec);
    outcome.status = Status(dump->status.code(),
                            name + " not checkpointed (it runs on): " + dump->status.message());
    return outcome;
  }
  fs::rename(meta_tmp, dump->meta, ec);
  if (ec) spdlog::warn("{}: rename {}: {}", name, meta_tmp, ec.message());
  outcome.result.image_dir = dump->criu.image_dir;
  outcome.result.dump_seconds = dump->seconds;
  outcome.result.image_bytes = tree_bytes(dump->criu.image_dir);
  if (dump->then == CheckpointThen::kStop && it != jobs_.end()) {
    // CRIU has killed the tree; the job is the restorer's now.
    discard(it->second);
    jobs_.erase(it);
    outcome.result.stopped = true;
  }
  return outcome;
}

Status ProcessExecutor::prepare_restore(const JobLaunch& l, const std::string& image_dir,
                                        Job& job) {
  std::error_code ec;
  if (fs::exists(job.dir, ec)) {
    // Not a job of ours (restore() checked): what a lost run left behind
    // (a dead node's directory where nodes share the path, a crashed
    // agent's). The leader restores a job only once its last run is gone.
    const std::string stale = job.dir + ".stale";
    fs::remove_all(stale, ec);
    fs::rename(job.dir, stale, ec);
    if (ec)
      return internal_error("moving the stale job directory " + job.dir +
                            " aside: " + ec.message());
    spdlog::warn("job {}: a stale job directory was in the way of the restore: removed", job.id);
    fs::remove_all(stale, ec);
  }
  HPCQ_RETURN_IF_ERROR(copy_job_dir(image_dir + "/" + kJobDirCopy, job.dir));
  // The shell read launch.json at its start and no longer holds it: it now
  // records the new allocation. Tasks may re-read the hostfile.
  const JobFiles files(job.dir);
  unlink(files.launch.c_str());
  HPCQ_RETURN_IF_ERROR(write_new_file(files.launch, encode_launch(l), 0600, 0, 0));
  if (!l.hostfile.empty()) {
    unlink(files.hostfile.c_str());
    HPCQ_RETURN_IF_ERROR(write_new_file(files.hostfile, l.hostfile, 0644, 0, 0));
  }
  auto cgroup = hierarchy_.create_job(config_.instance, l.id, job_limits(l));
  if (!cgroup.is_ok()) return cgroup.status();
  job.cgroup = std::move(cgroup).value();
  return Status::ok();
}

std::vector<RestoreOutcome> ProcessExecutor::finished_restores() {
  char buf[64];
  while (read(notify_read_.get(), buf, sizeof buf) > 0) {
  }
  std::vector<JobId> done;
  for (const auto& [id, r] : restores_) {
    if (r->done.load()) done.push_back(id);
  }
  std::vector<RestoreOutcome> outcomes;
  for (JobId id : done) outcomes.push_back({id, finish_restore(id)});
  return outcomes;
}

Status ProcessExecutor::begin_restore(const JobLaunch& given, const std::string& image_dir,
                                      TimeUs now) {
  JobLaunch l = given;
  ensure_workers(l);
  const std::string name = "job " + std::to_string(l.id);
  HPCQ_RETURN_IF_ERROR(validate(l));
  if (restores_.count(l.id)) {
    return Status(Code::kAlreadyExists, name + " is being restored here already");
  }
  Status capable = checkpoint_capability();
  if (!capable.is_ok()) return Status(capable.code(), name + ": " + capable.message());
  const std::string meta_path = image_dir + "/" + kCheckpointMeta;
  const std::string meta_text = read_whole(meta_path);
  if (meta_text.empty()) {
    return not_found(name + " not restored: no checkpoint in " + image_dir + " (no " +
                     kCheckpointMeta + ")");
  }
  nlohmann::json meta = nlohmann::json::parse(meta_text, nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded() || !meta.is_object() || !meta.contains("job") ||
      !meta["job"].is_number_unsigned() || !meta.contains("job_dir") ||
      !meta["job_dir"].is_string()) {
    return invalid_argument(name + " not restored: " + meta_path + " is malformed");
  }
  if (meta["job"].get<JobId>() != l.id) {
    return invalid_argument(name + " not restored: " + image_dir + " holds job " +
                            std::to_string(meta["job"].get<JobId>()));
  }
  const bool containers = meta.value("executor", "process") == "oci";
  if (containers != !l.image.empty()) {
    return invalid_argument(name + " not restored: " + image_dir + " holds a " +
                            (containers ? "container" : "process") + " checkpoint, the job " +
                            (l.image.empty() ? "has no image" : "has an image"));
  }

  Job j;
  j.id = l.id;
  j.dir = meta["job_dir"].get<std::string>();
  j.time_limit_s = l.time_limit_s;
  j.uid = l.uid;
  j.forward_output = l.forward_output;
  j.launched = now;
  set_limit(j, l.time_limit_s);
  j.image = containers;
  auto r = std::make_unique<Restore>();
  Status prepared = prepare_restore(l, image_dir, j);
  if (prepared.is_ok() && containers) prepared = prepare_container_restore(l, image_dir, j, *r);
  if (!prepared.is_ok()) {
    discard(j);  // nothing of it may be left
    return Status(prepared.code(), name + " not restored: " + prepared.message());
  }
  r->criu.image_dir = image_dir;
  r->criu.cgroup_dirs = j.cgroup.dirs();
  r->criu.timeout = std::chrono::seconds(config_.criu_timeout_s);
  r->launch = std::move(l);
  r->job = std::move(j);
  // As for dumps: the thread touches only its Restore record.
  Restore* d = r.get();
  const int notify = notify_write_.get();
  r->thread = std::thread([this, d, notify, criu = criu_] {
    if (!d->pid_files.empty()) {
      run_container_restore(*d);
    } else if (auto root = criu_restore(criu, d->criu); root.is_ok()) {
      d->root = *root;
    } else {
      d->status = root.status();
    }
    d->done.store(true);
    const char byte = 'r';
    ssize_t ignored = write(notify, &byte, 1);
    (void)ignored;
  });
  restores_.emplace(given.id, std::move(r));
  return Status::ok();
}

Status ProcessExecutor::finish_restore(JobId id) {
  auto node = restores_.extract(id);
  std::unique_ptr<Restore> r = std::move(node.mapped());
  r->thread.join();
  JobLaunch& l = r->launch;
  Job& j = r->job;
  const std::string name = "job " + std::to_string(id);
  auto fail = [&](const Status& s) {
    // Nothing of the job may run on: kill what is in its new cgroups.
    discard(j);
    return Status(s.code(), name + " not restored: " + s.message());
  };
  if (!r->status.is_ok()) return fail(r->status);
  if (j.image) {
    // The new shell runs the restored containers; runc made their cgroups.
    Status pinned = pin_container_tasks(j.cgroup, l);
    if (!pinned.is_ok()) return fail(pinned);
    jobs_.emplace(id, std::move(j));
    return Status::ok();
  }
  const pid_t root = r->root;
  j.shell_cgroup = j.cgroup;
  // A split job's workers get their cgroups back (pin_tasks moves the tasks
  // in). On v2 the restored tree already sits in the job's cgroup, which then
  // cannot take children: the restore fails and the job starts again.
  for (WorkerSpec& worker : l.workers) {
    if (l.workers.size() < 2) break;
    auto child =
        j.cgroup.create_child("worker-" + std::to_string(worker.id),
                              {worker.host_cpus, worker.host_mems, worker.memory_limit_bytes});
    if (!child.is_ok()) {
      kill(root, SIGKILL);
      waitpid(root, nullptr, 0);
      return fail(child.status());
    }
    worker.cgroup_dirs = child->dirs();
  }
  j.pid = root;
  j.pidfd = open_pidfd(j.pid);
  if (j.pidfd < 0) {
    Status s = internal_error("pidfd_open of the restored shell " + std::to_string(j.pid) + ": " +
                              errno_text(errno));
    kill(j.pid, SIGKILL);
    return fail(s);
  }
  // The tree is frozen while it is pinned, so that no process forks past it.
  const std::string freezer = freezer_dir(j.cgroup);
  Status s = freezer.empty() ? Status::ok() : set_frozen(freezer, true);
  if (s.is_ok()) s = pin_tasks(j.cgroup, j.pid, l);
  if (!freezer.empty()) {
    Status thawed = set_frozen(freezer, false);
    if (s.is_ok()) s = thawed;
  }
  if (!s.is_ok()) {
    // A frozen tree would not die (v1): it was thawed above.
    return fail(s);
  }
  jobs_.emplace(id, std::move(j));
  return Status::ok();
}

Status ProcessExecutor::prepare_container_restore(JobLaunch& l, const std::string& image_dir,
                                                  Job& j, Restore& r) const {
  const JobFiles files(j.dir);
  // runc's state of the dumped containers came with the copy: not ours.
  std::error_code ec;
  fs::remove_all(files.oci_dir + "/state", ec);
  j.shell_cgroup = j.cgroup;
  if (hierarchy_.version() == CgroupVersion::kV2) {
    auto shell = j.cgroup.create_child("shell", {});
    if (!shell.is_ok()) return shell.status();
    j.shell_cgroup = std::move(shell).value();
  }
  for (std::size_t w = 0; w < l.workers.size(); ++w) {
    const int id = l.workers[w].id;
    const std::string images = image_dir + "/worker-" + std::to_string(id);
    if (!fs::exists(images + "/inventory.img", ec)) {
      return not_found("no container images for worker " + std::to_string(id) + " in " + images);
    }
    const std::string work = restore_work_dir(files, id);
    fs::remove_all(work, ec);
    HPCQ_RETURN_IF_ERROR(prepare_container(l, w, j, images));
    r.pid_files.push_back(work + "/pid");
    r.restore_logs.push_back(work + "/restore.log");
    j.worker_ids.push_back(id);
  }
  unlink(files.launch.c_str());
  return write_new_file(files.launch, encode_launch(l), 0600, 0, 0);
}

void ProcessExecutor::run_container_restore(Restore& r) {
  const HostCriuLock one_at_a_time;  // runc's CRIU, as ours
  Status started = start_shell(r.job);
  if (!started.is_ok()) {
    r.status = started;
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + r.criu.timeout;
  for (;;) {
    bool all = true;
    for (const std::string& pid_file : r.pid_files) all = all && !read_whole(pid_file).empty();
    if (all) {
      r.root = r.job.pid;
      return;
    }
    pollfd p{r.job.pidfd, POLLIN, 0};
    if (poll(&p, 1, 20) > 0) {
      // The shell ended: a runc restore failed (and the shell reaped it).
      std::string reason;
      for (const std::string& log : r.restore_logs) {
        if (reason.empty() && fs::exists(log)) reason = criu_failure_reason(log, "");
      }
      if (reason.empty()) reason = last_line(JobFiles(r.job.dir).shell_log);
      r.status = internal_error("runc restore failed: " +
                                (reason.empty() ? std::string("no reason given") : reason));
      return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      r.status =
          unavailable("runc restore ran past " + std::to_string(r.criu.timeout.count()) + " s");
      return;
    }
  }
}

}  // namespace hpcq::agent
