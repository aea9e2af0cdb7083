// ProcessExecutor, starting a job: its directory, cgroups and workers (OCI
// bundles for image jobs), and the job shell cloned into a new PID namespace
// (see process_executor.h).
#include "agent/executor/process_executor.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "agent/executor/job_namespaces.h"
#include "agent/executor/oci_bundle.h"
#include "agent/executor/posix.h"

namespace hpcq::agent {
namespace {

// How long the executor waits for a shell to say its tasks are started (on
// the agent's loop, between other work: check_ready). Only a wedged machine
// takes this long; the job is then left to end on its own.
constexpr int kReadyTimeoutMs = 10'000;

// The shell's exit code when it could not even read its launch file; it then
// leaves no results.json and its log explains.
constexpr int kShellSetupFailed = 125;

// Fails the child of clone() with a line in the shell's log.
[[noreturn]] __attribute__((no_sanitize("address", "undefined"))) void child_failed(
    const char* what) {
  static const char kPrefix[] = "hpcq-job-shell: ";
  ssize_t ignored = write(2, kPrefix, sizeof kPrefix - 1);
  ignored = write(2, what, strlen(what));
  ignored = write(2, "\n", 1);
  (void)ignored;
  _exit(kShellSetupFailed);
}

// What the shell's child needs, all built before the clone: the child shares
// the agent's memory (CLONE_VM) and may not allocate.
struct ShellChild {
  int go_fd, devnull_fd, log_fd, ready_fd, output_fd;
  int held_fd;  // the executor's end of the channel, for the shell to hold
  const char* log_path;
  const char* private_tmp;  // null: the node's /tmp and /dev/shm
  const char* private_shm;
  char* const* argv;
  char* const* envp;
};

// Runs in the child of clone(CLONE_VM | CLONE_VFORK), on its own stack, in
// the agent's memory while the agent's thread waits: only async-signal-safe
// calls until execve, as in posix_spawn. (Copying the agent's page tables
// for a fork, and the copy-on-write faults after it, were the largest part
// of the agent's CPU per job.) The shell it execs waits on kGoFd until the
// executor has put it into the job's cgroups (not this child: shell/contract.h
// says why), so that no process of the job runs outside them. It gives the
// job its own /proc before the shell starts (enter_job_mount_namespace, the
// same as CRIU's trial dump): a mount namespace (a private copy of the node's
// mounts) with a proc of the job's PID namespace over /proc, so that ps,
// pgrep, /proc/self and /proc/<pid>/fd (UCX) show the job's processes, and
// only them. Stdio is reopened inside it, and the shell exec'd there, so that
// nothing of the shell refers to a mount of the node's namespace: CRIU dumps
// the job's mount namespace with it and cannot dump a file or mapping from
// outside it. Not instrumented: a sanitizer's bookkeeping is not safe here.
__attribute__((no_sanitize("address", "undefined"))) int exec_shell(void* arg) {
  const ShellChild& c = *static_cast<const ShellChild*>(arg);
  const int devnull_fd = c.devnull_fd, log_fd = c.log_fd, ready_fd = c.ready_fd,
            output_fd = c.output_fd;
  // Lift every fd above 0..5 first so that the dup2s cannot clobber each other.
  int in = fcntl(devnull_fd, F_DUPFD, 10);
  int out = fcntl(log_fd, F_DUPFD, 10);
  int ready = fcntl(ready_fd, F_DUPFD, 10);
  int go = fcntl(c.go_fd, F_DUPFD, 10);
  int output = output_fd < 0 ? -1 : fcntl(output_fd, F_DUPFD, 10);
  int held = c.held_fd < 0 ? -1 : fcntl(c.held_fd, F_DUPFD, 10);
  if (in < 0 || out < 0 || ready < 0 || go < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 ||
      dup2(out, 2) < 0 || dup2(ready, 3) < 0 || dup2(go, kGoFd) < 0 ||
      (output_fd >= 0 && (output < 0 || dup2(output, kOutputFd) < 0)) ||
      (c.held_fd >= 0 && (held < 0 || dup2(held, kHeldChannelFd) < 0))) {
    _exit(kShellSetupFailed);
  }
  // The agent's sockets and pidfds are not the job's business.
  if (output_fd < 0) close(kOutputFd);
  if (c.held_fd < 0) close(kHeldChannelFd);
  const unsigned first_closed = static_cast<unsigned>(kHeldChannelFd) + 1;
  if (syscall(SYS_close_range, first_closed, ~0U, 0U) != 0) {
    for (int fd = static_cast<int>(first_closed); fd < 65536; ++fd) close(fd);
  }
  if (const char* failed = enter_job_mount_namespace(c.private_tmp, c.private_shm)) {
    child_failed(failed);
  }
  // As the executor opened the log (not O_APPEND), at its end.
  in = open("/dev/null", O_RDONLY);
  out = open(c.log_path, O_WRONLY);
  if (in < 0 || out < 0 || lseek(out, 0, SEEK_END) < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 ||
      dup2(out, 2) < 0) {
    child_failed("reopening stdio in the job's mount namespace failed");
  }
  close(in);
  close(out);
  execve(c.argv[0], c.argv, c.envp);
  child_failed("execve failed");
}

}  // namespace

std::string ProcessExecutor::restore_work_dir(const JobFiles& files, int worker) {
  return files.oci_dir + "/restore-" + std::to_string(worker);
}

void ProcessExecutor::resolve_user(JobLaunch& l) {
  if (passwd* pw = getpwuid(l.uid)) l.home = pw->pw_dir;
  l.groups.clear();
  if (l.user.empty()) return;
  int n = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(n));
  if (getgrouplist(l.user.c_str(), l.gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<std::size_t>(n));
    if (getgrouplist(l.user.c_str(), l.gid, groups.data(), &n) < 0) n = 0;
  }
  l.groups.assign(groups.begin(), groups.begin() + std::max(n, 0));
}

void ProcessExecutor::offer_pmix_where_present(JobLaunch& l) const {
  if (l.pmi.api == kMpiBoth && !pmix_shell_present_) l.pmi.api = "pmi1";
}

CgroupLimits ProcessExecutor::job_limits(const JobLaunch& l) const {
  const auto cores = static_cast<std::int64_t>(std::max<std::size_t>(1, l.host_cpus.size()));
  return {l.host_cpus, l.host_mems, l.memory_limit_bytes, config_.pids_per_core * cores, l.gid};
}

Status ProcessExecutor::prepare_job_dir(const JobLaunch& l, const std::string& dir) const {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);  // a crashed agent's leftovers
  // Entered by the job's user (its files are named in its environment), not
  // listed by others.
  if (mkdir(dir.c_str(), 0711) != 0)
    return internal_error("mkdir " + dir + ": " + errno_text(errno));
  if (chmod(dir.c_str(), 0711) != 0)
    return internal_error("chmod " + dir + ": " + errno_text(errno));
  const JobFiles files(dir);
  HPCQ_RETURN_IF_ERROR(write_hostfiles(files, l.hostfile, 0, l.gid));
  if (!l.script.empty()) {
    HPCQ_RETURN_IF_ERROR(write_new_file(files.script, l.script, 0700, l.uid, l.gid));
  }
  if (l.step != 0 || !l.image.empty()) return Status::ok();
  if (config_.private_tmp == "off") {  // TMPDIR, the user's own
    if (mkdir(files.tmpdir.c_str(), 0700) != 0 || chown(files.tmpdir.c_str(), l.uid, l.gid) != 0) {
      return internal_error("making " + files.tmpdir + ": " + errno_text(errno));
    }
    return Status::ok();
  }
  // The job's /tmp and /dev/shm, sticky and open to all as the system's are.
  if (mkdir(files.private_dir.c_str(), 0700) != 0) {
    return internal_error("mkdir " + files.private_dir + ": " + errno_text(errno));
  }
  for (const char* name : {"/tmp", "/shm"}) {
    const std::string d = files.private_dir + name;
    if (mkdir(d.c_str(), 01777) != 0 || chmod(d.c_str(), 01777) != 0) {
      return internal_error("mkdir " + d + ": " + errno_text(errno));
    }
    if (config_.private_tmp == "tmpfs" &&
        mount("tmpfs", d.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) {
      return internal_error("mounting a tmpfs on " + d + ": " + errno_text(errno));
    }
  }
  return Status::ok();
}

void ProcessExecutor::remove_job_dir(const std::string& dir) const {
  if (config_.private_tmp == "tmpfs") {
    const JobFiles files(dir);
    for (const char* name : {"/tmp", "/shm"}) {
      umount2((files.private_dir + name).c_str(), MNT_DETACH);  // fails where none is
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
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
  return prepare_device_cgroups(l, j);
}

Status ProcessExecutor::prepare_device_cgroups(JobLaunch& l, Job& j) const {
  if (config_.gpu_devices.empty() || !l.image.empty()) return Status::ok();
  const bool v2 = hierarchy_.version() == CgroupVersion::kV2;
  std::set<std::string> made;
  for (TaskSpec& task : l.tasks) {
    // On v2 a child of the cgroup the task lives in: its worker's, or the shell's.
    const WorkerSpec& worker = l.workers[static_cast<std::size_t>(task.worker)];
    const std::string& home =
        worker.cgroup_dirs.empty() ? j.shell_cgroup.dirs().front() : worker.cgroup_dirs.front();
    std::string name = l.step == 0 ? "gpus" : "step-" + std::to_string(l.step) + "-gpus";
    for (int g : task.gpus) name += "-" + std::to_string(g);
    auto dir = hierarchy_.device_dir(config_.instance, l.id, home, name);
    if (!dir.is_ok()) return dir.status();
    if (made.insert(*dir).second) {
      j.device_cgroups = true;
      HPCQ_RETURN_IF_ERROR(
          make_device_cgroup(*dir, v2, denied_devices(config_.gpu_devices, task.gpus)));
    }
    task.device_cgroup = *dir;
  }
  return Status::ok();
}

std::string ProcessExecutor::container_id(JobId job, int worker) const {
  return "hpcq-" + config_.instance + "-" + std::to_string(job) + "-" + std::to_string(worker);
}

namespace {

// The image's root file system: a bundle's (its config.json names it) or
// the image itself.
Result<std::string> image_rootfs(const std::string& image) {
  std::string rootfs = image;
  const std::string bundle_config = read_whole(image + "/config.json");
  if (!bundle_config.empty()) {
    nlohmann::json c = nlohmann::json::parse(bundle_config, nullptr, false);
    if (c.is_discarded() || !c.contains("root") || !c["root"].contains("path") ||
        !c["root"]["path"].is_string()) {
      return invalid_argument("image " + image + ": config.json has no root.path");
    }
    const std::string path = c["root"]["path"].get<std::string>();
    rootfs = !path.empty() && path[0] == '/' ? path : image + "/" + path;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(rootfs, ec)) {
    return invalid_argument("image " + image + ": " + rootfs + " is not a directory");
  }
  return rootfs;
}

}  // namespace

OciContainer ProcessExecutor::container_config(const JobLaunch& l, const JobLaunch& inner,
                                               const std::string& rootfs,
                                               const std::string& dir) const {
  const WorkerSpec& worker = inner.workers.front();
  OciContainer c;
  c.rootfs = rootfs;
  c.args = {kContainerShell, dir};
  c.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
  c.uid = l.uid;
  c.gid = l.gid;
  for (std::uint32_t g : l.groups) {
    if (g != l.gid) c.additional_gids.push_back(g);
  }
  c.cgroups_path =
      hierarchy_.job_path(config_.instance, l.id) + "/worker-" + std::to_string(worker.id);
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
  std::error_code ec;
  if (std::filesystem::exists("/etc/hosts", ec)) c.read_only_files.push_back("/etc/hosts");
  std::set<int> gpus;
  for (const TaskSpec& t : inner.tasks) gpus.insert(t.gpus.begin(), t.gpus.end());
  for (int g : gpus) {
    if (static_cast<std::size_t>(g) >= config_.gpu_devices.by_gpu.size()) continue;
    const auto& files = config_.gpu_devices.by_gpu[static_cast<std::size_t>(g)];
    c.devices.insert(c.devices.end(), files.begin(), files.end());
  }
  if (!c.devices.empty()) {
    const auto& shared = config_.gpu_devices.shared;
    c.devices.insert(c.devices.end(), shared.begin(), shared.end());
  }
  return c;
}

Status ProcessExecutor::prepare_container(JobLaunch& l, std::size_t w, const Job& j,
                                          const std::string& restore_images) const {
  WorkerSpec& worker = l.workers[w];
  auto rootfs = image_rootfs(l.image);
  if (!rootfs.is_ok()) return rootfs.status();

  const JobFiles files(j.dir);
  if (mkdir(files.oci_dir.c_str(), 0711) != 0 && errno != EEXIST) {
    return internal_error("mkdir " + files.oci_dir + ": " + errno_text(errno));
  }
  const std::string dir = files.oci_dir + "/worker-" + std::to_string(worker.id);
  const JobFiles inside(dir);
  if (!restore_images.empty()) {
    // The bundle came back with the job directory; the shell inside read
    // its files at its start, only the container's config and the
    // hostfiles (where the job runs now) are new.
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
  if (restore_images.empty()) {
    HPCQ_RETURN_IF_ERROR(write_new_file(inside.launch, encode_launch(inner), 0600, l.uid, l.gid));
    if (!l.script.empty()) {
      HPCQ_RETURN_IF_ERROR(write_new_file(inside.script, l.script, 0700, l.uid, l.gid));
    }
  }
  HPCQ_RETURN_IF_ERROR(write_hostfiles(inside, l.hostfile, l.uid, l.gid));

  HPCQ_RETURN_IF_ERROR(write_new_file(
      dir + "/config.json", oci_config_json(container_config(l, inner, *rootfs, dir)), 0600, 0, 0));

  worker.results = inside.results;
  const std::string id = container_id(l.id, worker.id);
  if (restore_images.empty()) {
    worker.command = {config_.runc_path, "--root", files.oci_dir + "/state", "run"};
    // The shell inside gets the channel (shell/main.cc's start_worker).
    if (l.forward_output) worker.command.insert(worker.command.end(), {"--preserve-fds", "2"});
    worker.command.insert(worker.command.end(), {"--bundle", dir, id});
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
  l.leader_lease = config_.leader_lease;
  const std::string job = "job " + std::to_string(l.id);
  HPCQ_RETURN_IF_ERROR(validate(l));
  resolve_user(l);
  offer_pmix_where_present(l);
  l.pmi.max_kvs_bytes = config_.pmi_max_kvs_bytes;

  Job j;
  j.dir = config_.state_dir + "/jobs/" + std::to_string(l.id);
  take_launch_fields(j, l);
  j.launched = now;
  j.report_start = true;
  set_limit(j, l.time_limit_s);
  std::error_code ec;
  Status s = prepare_job_dir(l, j.dir);
  if (!s.is_ok()) {
    remove_job_dir(j.dir);
    return Status(s.code(), job + ": " + s.message());
  }
  auto cgroup = hierarchy_.create_job(config_.instance, l.id, job_limits(l));
  if (!cgroup.is_ok()) {
    remove_job_dir(j.dir);
    return Status(cgroup.status().code(), job + ": " + cgroup.status().message());
  }
  j.cgroup = std::move(cgroup).value();
  j.shell_cgroup = j.cgroup;
  s = prepare_workers(l, j);
  if (j.image) {
    for (const WorkerSpec& worker : l.workers) j.worker_ids.push_back(worker.id);
  }
  if (l.image.empty()) l.tmpdir = config_.private_tmp == "off" ? JobFiles(j.dir).tmpdir : "/tmp";
  if (s.is_ok()) s = write_new_file(JobFiles(j.dir).launch, encode_launch(l), 0600, 0, 0);
  if (s.is_ok()) s = start_shell(j);
  if (!s.is_ok()) {
    if (!j.cgroup.remove().is_ok()) {
      spdlog::warn("{}: cgroups not removed after a failed start", job);
    }
    remove_job_dir(j.dir);
    return Status(s.code(), job + ": " + s.message());
  }
  record_shell(j);
  jobs_.emplace(l.id, std::move(j));
  return Status::ok();
}

namespace {

// clone(CLONE_VM | CLONE_VFORK | CLONE_NEWPID) of `child(arg)` on a stack of
// its own; returns its pid (and sets `pidfd`) once it has exec'd or died, or
// -1 with errno set.
pid_t clone_into_new_pid_ns(int (*child)(void*), void* arg, int* pidfd) {
  // Ours waits meanwhile (CLONE_VFORK): one stack for each launch, freed
  // once the child has exec'd or died.
  constexpr std::size_t kChildStack = 64 * 1024;
  void* stack = mmap(nullptr, kChildStack, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return -1;
  // No agent signal handler may run in the child (it would act on the
  // agent's state); the shell resets the mask it inherits.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int flags = CLONE_VM | CLONE_VFORK | CLONE_NEWPID | SIGCHLD;
  char* stack_top = static_cast<char*>(stack) + kChildStack;
  pid_t pid = clone(child, stack_top, flags | CLONE_PIDFD, arg, pidfd);
  if (pid < 0 && errno == EINVAL) {
    // A kernel before 5.2 has no CLONE_PIDFD: the open after is safe, as the
    // child cannot be reaped (and its PID reused) by anyone but us.
    pid = clone(child, stack_top, flags, arg);
    if (pid > 0) *pidfd = open_pidfd(pid);
  }
  const int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  munmap(stack, kChildStack);
  errno = clone_errno;
  return pid;
}

// Forwarded output: the shell's end of a packet socket (`theirs`); ours,
// non-blocking, is one of wait_fds() (take_output). Returns the inode of
// theirs (a dump takes it as an external socket), 0 if unknown.
Result<std::uint64_t> open_channel(Fd& ours, Fd& theirs) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return internal_error("socketpair: " + errno_text(errno));
  }
  ours.adopt(pair[0]);
  theirs.adopt(pair[1]);
  fcntl(ours.get(), F_SETFL, O_NONBLOCK);
  struct stat st {};
  return fstat(theirs.get(), &st) == 0 ? std::uint64_t{st.st_ino} : 0;
}

// The cloned shell (`pid`, `pidfd`) has exec'd and waits for the go on
// `go_write`, or has died with a line in its log, which reap() reports: it
// is put into `cgroup` and let go. On error it is killed and reaped.
Status let_shell_go(pid_t pid, int pidfd, const JobCgroup& cgroup, int go_write) {
  auto abandon = [&](Status s) {
    kill(pid, SIGKILL);  // still ours to reap: its PID cannot have been reused
    waitpid(pid, nullptr, 0);
    if (pidfd >= 0) close(pidfd);
    return s;
  };
  if (pidfd < 0) return abandon(internal_error("pidfd_open: " + errno_text(errno)));
  Status joined = cgroup.add_process(pid);
  if (!joined.is_ok()) return abandon(joined);
  // A shell that already ended (EPIPE, ECONNRESET) is no launch failure:
  // reap() reports it with the last line of its log.
  const char go = 'g';
  if (send(go_write, &go, 1, MSG_NOSIGNAL) != 1 && errno != EPIPE && errno != ECONNRESET) {
    return abandon(internal_error("the shell's go socket: " + errno_text(errno)));
  }
  return Status::ok();
}

}  // namespace

Status ProcessExecutor::start_shell(Job& job) {
  const JobFiles files(job.dir);
  Fd log(open(files.shell_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (log.get() < 0) return internal_error("create " + files.shell_log + ": " + errno_text(errno));
  Fd devnull(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (devnull.get() < 0) return internal_error("open /dev/null: " + errno_text(errno));
  int ready_pipe[2];
  if (pipe2(ready_pipe, O_CLOEXEC) != 0) return internal_error("pipe: " + errno_text(errno));
  Fd ready_read(ready_pipe[0]), ready_write(ready_pipe[1]);
  Fd output_ours, output_theirs;
  if (job.channel.open) {
    Result<std::uint64_t> inode = open_channel(output_ours, output_theirs);
    if (!inode.is_ok()) return inode.status();
    job.channel.inode = *inode;
  }

  // Everything the child needs is built before clone: it may not allocate.
  std::string shell = config_.job_shell_path, dir = job.dir, flag = kOwnProcFlag;
  std::string log_path = files.shell_log;
  if (job.pmix_server) {
    shell += kPmixShellSuffix;
    if (access(shell.c_str(), X_OK) != 0) {
      return internal_error("the PMIx job shell '" + shell + "' is not there to run");
    }
  }
  std::string path_env = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  // For the CRIU of a `runc restore` the shell runs (its tasks get their own).
  std::string criu_env = kCriuEnvironment;
  const std::string private_tmp = job.private_dir + "/tmp", private_shm = job.private_dir + "/shm";
  char* argv[] = {shell.data(), dir.data(), flag.data(), nullptr};
  char* envp[] = {path_env.data(), criu_env.data(), nullptr};
  // A socket, not a pipe: the go is sent with MSG_NOSIGNAL, so that a shell
  // gone before it is no SIGPIPE for the process hosting the executor.
  int go_pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go_pair) != 0)
    return internal_error("socketpair: " + errno_text(errno));
  Fd go_read(go_pair[0]), go_write(go_pair[1]);
  ShellChild child{go_read.get(),
                   devnull.get(),
                   log.get(),
                   ready_write.get(),
                   output_theirs.get(),
                   output_ours.get(),
                   log_path.c_str(),
                   job.private_dir.empty() ? nullptr : private_tmp.c_str(),
                   private_shm.c_str(),
                   argv,
                   envp};
  // Where the shell opens its channel when its tasks first use PMI; ready
  // before the shell runs (a restarted agent's leftover file is replaced).
  Fd pmi_listen;
  if (job.channel.on_demand) {
    Result<int> listening = listen_unix(files.pmi_socket);
    if (!listening.is_ok()) return listening.status();
    pmi_listen.adopt(*listening);
  }
  int pidfd = -1;
  const pid_t pid = clone_into_new_pid_ns(exec_shell, &child, &pidfd);
  if (pid < 0) return internal_error("clone(CLONE_NEWPID): " + errno_text(errno));
  ready_write.reset();
  output_theirs.reset();
  go_read.reset();
  HPCQ_RETURN_IF_ERROR(let_shell_go(pid, pidfd, job.shell_cgroup, go_write.get()));
  job.pid = pid;
  job.pidfd = pidfd;
  job.channel.fd = output_ours.release();
  job.channel.listen_fd = pmi_listen.release();
  // The shell writes one byte once every task is forked, then closes; end
  // of file alone means it ended early, which reap() reports. Not waited
  // for here: forking the tasks can take seconds (a task's output file on a
  // stalled file system or a FIFO, a loaded host), and this runs on the
  // agent's loop, whose heartbeats keep the node up (check_ready).
  fcntl(ready_read.get(), F_SETFL, O_NONBLOCK);
  job.ready_fd = ready_read.release();
  job.ready_by = std::chrono::steady_clock::now() + std::chrono::milliseconds(kReadyTimeoutMs);
  return Status::ok();
}

void ProcessExecutor::check_ready(Job& job) {
  if (job.ready_fd < 0) return;
  char buf[16];
  ssize_t n;
  do {
    n = read(job.ready_fd, buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && errno == EAGAIN) {
    if (std::chrono::steady_clock::now() < job.ready_by) return;
    spdlog::warn("job {}{}: the job shell did not report its tasks started within {} ms", job.id,
                 job.step == 0 ? std::string() : " step " + std::to_string(job.step),
                 kReadyTimeoutMs);
  }
  mark_started(job);  // the byte, end of file (the shell ended), or given up on
}

void ProcessExecutor::mark_started(Job& job) {
  if (job.ready_fd < 0) return;
  close(job.ready_fd);
  job.ready_fd = -1;
  if (job.report_start) started_.push_back({job.id, job.step});
  // An ended shell is past signals (its pidfd may already be closed).
  for (int signo : std::exchange(job.held_signals, {})) {
    if (!job.exited) signal_pidfd(job.pidfd, signo);
  }
}

int ProcessExecutor::signal_tasks(Job& job, int signo) {
  if (job.ready_fd < 0) return signal_pidfd(job.pidfd, signo);
  job.held_signals.push_back(signo);
  return 0;
}

}  // namespace hpcq::agent
