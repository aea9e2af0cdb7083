#include "agent/executor/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include "agent/executor/cgroup.h"
#include "agent/executor/job_namespaces.h"
#include "agent/executor/posix.h"
#include "agent/executor/trial_job.h"

namespace hpcq::agent {
namespace {

std::string read_fd(int fd) {
  std::string out;
  if (lseek(fd, 0, SEEK_SET) != 0) return out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string last_nonempty_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

// The PIDs of this process's children, zombies included (they stay on the
// parent's list until reaped). Needs CONFIG_PROC_CHILDREN; empty without it.
std::set<pid_t> own_children() {
  std::set<pid_t> pids;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(task.path() / "children");
    pid_t pid;
    while (in >> pid) pids.insert(pid);
  }
  return pids;
}

// A descriptor of `path` holding a POSIX record lock on the whole file,
// waited for; -1 if the file cannot be opened. The lock goes with the
// descriptor (or the process), never to a child (see HostCriuLock).
int lock_host_file(const char* path) {
  const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  struct flock whole {};
  whole.l_type = F_WRLCK;
  whole.l_whence = SEEK_SET;
  while (fcntl(fd, F_SETLKW, &whole) != 0 && errno == EINTR) {
  }
  return fd;
}

struct CriuRun {
  int exit_code = -1;  // 128 + signal when killed
  bool timed_out = false;
  std::string output;  // criu's stdout and stderr
};

// What run_tool's child needs, built before the fork: the child of a
// process with other threads may not allocate.
struct ToolChild {
  int go_read, go_write;  // the go byte: sent once the child is in its cgroups
  int devnull, out;       // its stdin; its stdout and stderr
  int pid_ns;             // -1, or the PID namespace the program runs in
  const std::vector<int>& keep_fds;
  char* const* argv;
  char* const* envp;
};

// The child of run_tool's fork (async-signal-safe): waits for the go, then
// execs the program (in the PID namespace `pid_ns`, see run_tool).
[[noreturn]] void run_tool_child(const ToolChild& c) {
  default_signals();
  // Our copy of the write end must go, or a parent that dies before the
  // go byte would leave us blocked here for ever (holding whatever we
  // inherited, the host's CRIU lock included) instead of reading EOF.
  close(c.go_write);
  char go = 0;
  ssize_t n;
  do {
    n = read(c.go_read, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) _exit(127);  // the parent gave up on us
  if (dup2(c.devnull, 0) < 0 || dup2(c.out, 1) < 0 || dup2(c.out, 2) < 0) _exit(127);
  // What the program is to inherit (criu's --inherit-fd), at its number.
  for (int fd : c.keep_fds) {
    if (fd <= 2 || fcntl(fd, F_SETFD, 0) != 0) _exit(127);
  }
  if (c.pid_ns >= 0) {
    if (setns(c.pid_ns, CLONE_NEWPID) != 0) _exit(127);
    const pid_t program = fork();
    if (program < 0) _exit(127);
    if (program > 0) {
      int status = 0;
      while (waitpid(program, &status, 0) < 0 && errno == EINTR) {
      }
      _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    // Killed with us (our time limit).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (enter_job_mount_namespace(nullptr, nullptr) != nullptr) {
      static const char kNs[] = "cannot mount the job's /proc\n";
      ssize_t ignored = write(2, kNs, sizeof kNs - 1);
      (void)ignored;
      _exit(127);
    }
  }
  execve(c.argv[0], c.argv, c.envp);
  static const char kMsg[] = "exec failed\n";
  ssize_t ignored = write(2, kMsg, sizeof kMsg - 1);
  (void)ignored;
  _exit(127);
}

// Whether the process of `pidfd` ends within `timeout`.
bool ended_in_time(int pidfd, std::chrono::seconds timeout) {
  pollfd p{pidfd, POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 60'000))) > 0) return true;
  }
}

// Runs `binary` with `args` (argv[1..]); stdin /dev/null, stdout/stderr
// captured. The child is moved into each of `cgroup_dirs` before it execs.
// With `pid_ns_of` > 0 the program runs in that process's PID namespace, in
// a mount namespace of its own with that namespace's /proc (what runc needs
// to find the PIDs its state names): the child enters the namespace and
// forks the program, whose exit status it passes on.
Result<CriuRun> run_tool(const std::string& binary, const std::vector<std::string>& args,
                         const std::vector<std::string>& cgroup_dirs, std::chrono::seconds timeout,
                         pid_t pid_ns_of = -1, const std::vector<int>& keep_fds = {}) {
  const HostCriuLock one_at_a_time;
  const std::string ns = "/proc/" + std::to_string(pid_ns_of) + "/ns/pid";
  Fd pid_ns(pid_ns_of > 0 ? open(ns.c_str(), O_RDONLY | O_CLOEXEC) : -1);
  if (pid_ns_of > 0 && pid_ns.get() < 0) {
    return internal_error("open " + ns + ": " + errno_text(errno));
  }
  Fd out(memfd_create("criu-output", MFD_CLOEXEC));
  if (out.get() < 0) return internal_error("memfd_create: " + errno_text(errno));
  Fd devnull(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (devnull.get() < 0) return internal_error("open /dev/null: " + errno_text(errno));
  int go_pipe[2];
  if (pipe2(go_pipe, O_CLOEXEC) != 0) return internal_error("pipe: " + errno_text(errno));
  Fd go_read(go_pipe[0]), go_write(go_pipe[1]);

  // Everything the child needs is built before fork: it may not allocate.
  std::vector<std::string> strings;
  strings.push_back(binary);
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::string path_env = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::string criu_env = kCriuEnvironment;  // runc passes it on to its criu
  char* envp[] = {path_env.data(), criu_env.data(), nullptr};

  // No handler of the caller may run in the child; the child restores
  // default dispositions and an empty mask before exec.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const ToolChild child{go_read.get(), go_write.get(), devnull.get(), out.get(),
                        pid_ns.get(),  keep_fds,       argv.data(),   envp};
  pid_t pid = fork();
  if (pid == 0) run_tool_child(child);
  int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return internal_error("fork: " + errno_text(fork_errno));
  go_read.reset();
  // The child cannot end before it reads the go byte, so its PID is ours.
  Fd pidfd(open_pidfd(pid));
  auto reap = [&] {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
  };
  std::string setup_error;
  if (pidfd.get() < 0) setup_error = "pidfd_open: " + errno_text(errno);
  for (const std::string& dir : cgroup_dirs) {
    if (!setup_error.empty()) break;
    const std::string procs = dir + "/cgroup.procs";
    std::ofstream f(procs);
    f << pid;
    f.flush();
    if (!f) setup_error = "cannot move criu into " + procs;
  }
  if (!setup_error.empty()) {
    go_write.reset();  // the child exits at once
    reap();
    return internal_error(setup_error);
  }
  char go = 'g';
  if (write(go_write.get(), &go, 1) != 1) kill(pid, SIGKILL);
  go_write.reset();

  CriuRun run;
  run.timed_out = !ended_in_time(pidfd.get(), timeout);
  if (run.timed_out) kill(pid, SIGKILL);
  int status = reap();
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.output = read_fd(out.get());
  return run;
}

Result<CriuRun> run_criu(const CriuInfo& criu, const std::vector<std::string>& args,
                         const std::vector<std::string>& cgroup_dirs, std::chrono::seconds timeout,
                         const std::vector<int>& keep_fds = {}) {
  return run_tool(criu.binary, args, cgroup_dirs, timeout, -1, keep_fds);
}

bool is_harmless(const std::string& line) {
  // CRIU reports this when the restored limit is above its own; the restore
  // goes on (DESIGN.md).
  return line.find("RLIMIT_NOFILE") != std::string::npos;
}

std::string describe_failure(const CriuRun& run, const std::string& what, const std::string& log) {
  if (run.timed_out) return what + " ran past its time limit and was killed";
  std::string fallback = last_nonempty_line(run.output);
  if (fallback.empty()) fallback = "criu exited with code " + std::to_string(run.exit_code);
  std::string reason = criu_failure_reason(log, fallback);
  // prlimit() of another user's task needs CAP_SYS_RESOURCE, which some
  // containers drop even for root.
  if (reason.find("rlimit") != std::string::npos &&
      reason.find("not permitted") != std::string::npos) {
    reason += " (CRIU lacks CAP_SYS_RESOURCE: only root's jobs can be dumped here)";
  }
  return what + " failed: " + reason + " (log: " + log + ")";
}

// CRIU's seize of a frozen tree now and then runs past its own --timeout
// ("Timeout reached", while it collects the tasks): here about one dump in
// 50 to 80, each time with the last task a `sh` child not yet exec'd (the
// freezer caught a vfork, whose parent cannot stop for ptrace before the
// child execs); CRIU issue #423 reports ~4% on Docker trees. CRIU gives up
// cleanly (the tree is unseized and thawed and runs on), so the dump is
// tried again.
constexpr int kDumpAttempts = 3;

Result<CriuRun> dump_with_retries(const std::function<Result<CriuRun>()>& dump_once,
                                  const std::string& what, const std::string& log) {
  for (int attempt = 1;; ++attempt) {
    auto run = dump_once();
    if (!run.is_ok() || run->timed_out || run->exit_code == 0 || attempt == kDumpAttempts ||
        criu_failure_reason(log, "").find("Timeout reached") == std::string::npos) {
      return run;
    }
    spdlog::warn("{}: CRIU timed out seizing the tree (attempt {} of {}): trying again", what,
                 attempt, kDumpAttempts);
  }
}

}  // namespace

namespace {
std::mutex& host_criu_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace

HostCriuLock::HostCriuLock()
    // No lock (-1): CRIU may then fail on a clash, and says so.
    : in_process_(host_criu_mutex()), fd_(lock_host_file("/tmp/.hpcq-criu.lock")) {}

HostCriuLock::~HostCriuLock() {
  if (fd_ >= 0) close(fd_);
}

std::string criu_failure_reason(const std::string& log_path, const std::string& fallback) {
  std::ifstream in(log_path);
  std::string line;
  while (std::getline(in, line)) {
    size_t at = line.find("Error (");
    if (at == std::string::npos || is_harmless(line)) continue;
    size_t close = line.find("): ", at);
    std::string msg = close == std::string::npos ? line.substr(at) : line.substr(close + 3);
    while (!msg.empty() && (msg.back() == ' ' || msg.back() == '\r')) msg.pop_back();
    if (!msg.empty()) return msg;
  }
  return fallback;
}

std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = getenv("PATH");
  std::istringstream dirs(path != nullptr && *path != '\0' ? path
                                                           : "/usr/local/sbin:/usr/local/bin:"
                                                             "/usr/sbin:/usr/bin:/sbin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

Result<CriuInfo> probe_criu(const std::string& binary) {
  std::string name = binary.empty() ? "criu" : binary;
  CriuInfo info;
  info.binary = find_program(name);
  if (info.binary.empty()) {
    return failed_precondition("no '" + name + "' in PATH (install it with .ci/install-criu)");
  }
  if (access(info.binary.c_str(), X_OK) != 0) {
    return failed_precondition("CRIU '" + info.binary +
                               "' is not executable: " + errno_text(errno));
  }
  auto version = run_criu(info, {"--version"}, {}, std::chrono::seconds(30));
  if (!version.is_ok()) return version.status();
  std::istringstream out(version->output);
  std::string line;
  while (std::getline(out, line)) {
    if (line.rfind("Version:", 0) == 0) {
      std::istringstream fields(line.substr(8));
      fields >> info.version;
    }
  }
  if (version->exit_code != 0 || info.version.empty()) {
    return failed_precondition("'" + info.binary + " --version' gave no version (exit code " +
                               std::to_string(version->exit_code) + ")");
  }
  if (std::atoi(info.version.c_str()) < 4) {
    return failed_precondition("CRIU " + info.version + " at " + info.binary +
                               " is too old (need >= 4; run .ci/install-criu)");
  }
  auto check = run_criu(info, {"check"}, {}, std::chrono::seconds(60));
  if (!check.is_ok()) return check.status();
  if (check->exit_code != 0) {
    std::string why = last_nonempty_line(check->output);
    return failed_precondition(
        "'" + info.binary +
        " check' failed: " + (why.empty() ? "exit code " + std::to_string(check->exit_code) : why));
  }
  return info;
}

namespace {

constexpr char kTrialCache[] = "/tmp/.hpcq-criu-trial";

// What the trial dumps, named in the cache's key: an answer about another
// kind of process (a bare sleep in the agent's namespaces, before) is not one
// about this kind.
constexpr char kTrialKind[] = "job-like";

// Whether this process's root is its mount namespace's root, as CRIU
// requires of a job's (a chroot's is not: "The root task has another root
// than mntns"); nullopt where that cannot be told. A child compares "/"
// before and after entering its own mount namespace, which moves its root to
// the namespace's (setns(2)).
std::optional<bool> root_is_namespace_root() {
  const Fd own_ns(open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC));
  if (own_ns.get() < 0) return std::nullopt;
  // Only syscalls in the child (we may have threads), and no handler of ours.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t child = fork();
  if (child == 0) {
    constexpr unsigned kWhat = STATX_INO | STATX_MNT_ID;
    struct statx before {};
    struct statx after {};
    if (statx(AT_FDCWD, "/", 0, kWhat, &before) != 0 || setns(own_ns.get(), CLONE_NEWNS) != 0 ||
        statx(AT_FDCWD, "/", 0, kWhat, &after) != 0) {
      _exit(2);
    }
    const bool same = before.stx_dev_major == after.stx_dev_major &&
                      before.stx_dev_minor == after.stx_dev_minor &&
                      before.stx_ino == after.stx_ino && before.stx_mnt_id == after.stx_mnt_id;
    _exit(same ? 0 : 1);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (child < 0) return std::nullopt;
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) return std::nullopt;
  return WEXITSTATUS(status) == 0;
}

// What a trial's answer depends on wherever it runs: the boot (the kernel),
// the binary and the environment it runs with, the kind of process and its
// user. Empty where the binary cannot be read.
std::string trial_key(const CriuInfo& criu, uid_t uid) {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  boot >> boot_id;
  struct stat st {};
  if (stat(criu.binary.c_str(), &st) != 0) return "";
  std::string key = boot_id + " " + criu.binary + " " + std::to_string(st.st_size) + " " +
                    std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) +
                    " " + kCriuEnvironment + " " + kTrialKind;
  if (uid != 0) key += " uid=" + std::to_string(uid);
  return key;
}

// The lines of kTrialCache ("<key>\t<ok or the reason>") of this boot whose
// binary is still there.
std::vector<std::string> kept_answers(const std::string& key) {
  std::vector<std::string> lines;
  std::ifstream cached(kTrialCache);
  std::string line;
  while (std::getline(cached, line)) {
    const size_t tab = line.find('\t');
    std::istringstream fields(line.substr(0, tab));
    std::string boot_id, binary;
    fields >> boot_id >> binary;
    if (tab != std::string::npos && key.compare(0, boot_id.size() + 1, boot_id + " ") == 0 &&
        access(binary.c_str(), X_OK) == 0) {
      lines.push_back(line);
    }
  }
  return lines;
}

// The answer kept under `key` in `lines`, if any.
std::optional<std::string> answer_of(const std::vector<std::string>& lines,
                                     const std::string& key) {
  for (const std::string& line : lines) {
    if (!key.empty() && line.size() > key.size() && line.compare(0, key.size(), key) == 0 &&
        line[key.size()] == '\t') {
      return line.substr(key.size() + 1);
    }
  }
  return std::nullopt;
}

// Rewrites kTrialCache: `lines` but those of the `replaced` keys, then
// `key`'s new answer.
void keep_answer(const std::vector<std::string>& lines,
                 std::initializer_list<std::string_view> replaced, const std::string& key,
                 const Status& verdict) {
  const std::string tmp = std::string(kTrialCache) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const std::string& line : lines) {
      const std::string_view line_key = std::string_view(line).substr(0, line.find('\t'));
      if (std::find(replaced.begin(), replaced.end(), line_key) == replaced.end()) {
        out << line << "\n";
      }
    }
    out << key << "\t" << (verdict.is_ok() ? "ok" : verdict.message()) << "\n";
  }
  std::error_code ec;
  std::filesystem::rename(tmp, kTrialCache, ec);
}

Status run_trial_dump(const CriuInfo& criu, std::chrono::seconds timeout, uid_t uid,
                      const CgroupHierarchy& cgroups) {
  char tmpl[] = "/tmp/hpcq-criu-trial-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return trial_setup_failed("mkdtemp: " + errno_text(errno));
  const std::string dir = tmpl;
  auto job = TrialJob::start(cgroups, uid);
  if (!job.is_ok()) {
    std::filesystem::remove_all(dir);
    return job.status();
  }
  // As a job's dump (CriuDump), without --leave-running: a dump that works
  // kills the sleep itself.
  std::vector<std::string> args = {"dump", "--tree", std::to_string((*job)->pid())};
  for (const char* arg : {"--images-dir", "--work-dir"}) args.insert(args.end(), {arg, dir});
  args.insert(args.end(), {"--log-file", "dump.log", "-v4", "--manage-cgroups=ignore"});
  if (!(*job)->freezer().empty()) args.insert(args.end(), {"--freeze-cgroup", (*job)->freezer()});
  auto run = run_criu(criu, args, {}, timeout);
  job->reset();
  const std::string what =
      kTrialDumpVerdict + (uid != 0 ? " (uid " + std::to_string(uid) + ")" : std::string());
  Status verdict = Status::ok();
  if (!run.is_ok()) {
    verdict = run.status();
  } else if (run->timed_out) {
    // What this kernel does (a dump that works takes well under a second).
    struct utsname host {};
    uname(&host);
    verdict = failed_precondition("CRIU " + criu.version + " " + kKernelCannotDump + " (" +
                                  host.release + "; `criu check` passes): " + what + " hung for " +
                                  std::to_string(timeout.count()) + " s");
  } else if (run->exit_code != 0) {
    verdict = failed_precondition(
        "CRIU " + criu.version + " failed " + what + ": " +
        criu_failure_reason(dir + "/dump.log", last_nonempty_line(run->output)));
  }
  std::filesystem::remove_all(dir);
  return verdict;
}

}  // namespace

Status criu_trial_dump(const CriuInfo& criu, std::chrono::seconds timeout, uid_t as_user,
                       const CgroupHierarchy* cgroups) {
  // One trial at a time on the host: the others wait, then read its answer.
  static std::mutex in_process;
  const std::lock_guard<std::mutex> one_here(in_process);
  const Fd lock(lock_host_file("/tmp/.hpcq-criu-trial.lock"));
  // A negative answer is neither kept nor read under HPCQ_CRIU_TRIAL_CACHE=off
  // (CI: a wrong "cannot dump" must not skip the rest of the run's
  // checkpoint tests).
  const char* cache = std::getenv("HPCQ_CRIU_TRIAL_CACHE");
  const bool keep_negative = cache == nullptr || std::string(cache) != "off";
  // A hang is the kernel's, kept for any root. Any other answer depends on
  // the root too and is kept only where it is its mount namespace's root (a
  // chroot's cannot be dumped, and may share this /tmp with the host's).
  const std::string kernel_key = trial_key(criu, as_user);
  const std::string host_key = kernel_key.empty() || !root_is_namespace_root().value_or(false)
                                   ? ""
                                   : kernel_key + " namespace-root";
  const std::vector<std::string> lines = kept_answers(kernel_key);
  for (const std::string& key : {kernel_key, host_key}) {
    const std::optional<std::string> answer = answer_of(lines, key);
    if (answer && *answer == "ok") return Status::ok();
    if (answer && keep_negative) return failed_precondition(*answer);
  }
  std::optional<CgroupHierarchy> detected;
  if (cgroups == nullptr) {
    auto found = CgroupHierarchy::detect();
    if (!found.is_ok()) return trial_setup_failed(found.status().message());
    cgroups = &detected.emplace(std::move(found).value());
  }
  Status verdict = run_trial_dump(criu, timeout, as_user, *cgroups);
  // A hang may be a loaded machine's stall: only a second one in a row is
  // taken for the kernel's.
  auto hung = [](const Status& s) {
    return s.message().find(kKernelCannotDump) != std::string::npos;
  };
  if (hung(verdict)) verdict = run_trial_dump(criu, timeout, as_user, *cgroups);
  // Only a verdict on CRIU itself is kept, not a failure to set the trial up.
  const std::string& key = hung(verdict) ? kernel_key : host_key;
  if (!key.empty() &&
      (verdict.is_ok() || (keep_negative && verdict.code() == Code::kFailedPrecondition))) {
    keep_answer(lines, {kernel_key, host_key}, key, verdict);
  }
  return verdict;
}

Status criu_dump(const CriuInfo& criu, const CriuDump& dump) {
  std::vector<std::string> args = {"dump",
                                   "--tree",
                                   std::to_string(dump.root),
                                   "--images-dir",
                                   dump.image_dir,
                                   "--work-dir",
                                   dump.image_dir,
                                   "--log-file",
                                   "dump.log",
                                   "-v4",
                                   "--manage-cgroups=ignore"};
  if (!dump.freeze_cgroup.empty()) {
    args.push_back("--freeze-cgroup");
    args.push_back(dump.freeze_cgroup);
  }
  if (dump.leave_running) args.push_back("--leave-running");
  for (std::uint64_t inode : dump.external_sockets) {
    args.push_back("--external");
    args.push_back("unix[" + std::to_string(inode) + "]");
  }
  for (const std::string& point : dump.external_mounts) {
    args.push_back("--external");
    args.push_back("mnt[" + point + "]:" + point);
  }
  const std::string log = dump.image_dir + "/dump.log";
  auto run = dump_with_retries([&] { return run_criu(criu, args, {}, dump.timeout); },
                               "criu dump of " + std::to_string(dump.root), log);
  if (!run.is_ok()) return run.status();
  if (run->timed_out) {
    return unavailable("criu dump ran past " + std::to_string(dump.timeout.count()) +
                       " s and was killed");
  }
  if (run->exit_code != 0) return internal_error(describe_failure(*run, "criu dump", log));
  return Status::ok();
}

Result<pid_t> criu_restore(const CriuInfo& criu, const CriuRestore& restore) {
  struct stat st {};
  if (stat((restore.image_dir + "/inventory.img").c_str(), &st) != 0) {
    return not_found("no CRIU images in " + restore.image_dir +
                     " (inventory.img: " + errno_text(errno) + ")");
  }
  const std::string pidfile = restore.image_dir + "/restore.pid";
  unlink(pidfile.c_str());
  // --root /: the job's mount namespace (its own /proc) is rebuilt on the
  // node's root.
  std::vector<std::string> args = {"restore",
                                   "--images-dir",
                                   restore.image_dir,
                                   "--work-dir",
                                   restore.image_dir,
                                   "--log-file",
                                   "restore.log",
                                   "-v4",
                                   "--manage-cgroups=ignore",
                                   "--root",
                                   "/",
                                   "--restore-detached",
                                   "--restore-sibling",
                                   "--pidfile",
                                   "restore.pid"};
  // The restored root becomes our child (CLONE_PARENT); if the restore then
  // fails it is left to us to kill and reap. Our children before the run
  // tell it apart from any other.
  std::vector<int> keep;
  for (const auto& [fd, inode] : restore.inherit) {
    args.push_back("--inherit-fd");
    args.push_back("fd[" + std::to_string(fd) + "]:socket:[" + std::to_string(inode) + "]");
    keep.push_back(fd);
  }
  for (const std::string& point : restore.external_mounts) {
    args.push_back("--external");
    args.push_back("mnt[" + point + "]:" + point);
  }
  const std::set<pid_t> before = own_children();
  auto run = run_criu(criu, args, restore.cgroup_dirs, restore.timeout, keep);
  if (!run.is_ok()) return run.status();
  pid_t root = -1;
  {
    std::ifstream in(pidfile);
    in >> root;
  }
  const bool ok = !run->timed_out && run->exit_code == 0 && root > 0;
  for (pid_t child : own_children()) {
    if (before.count(child) || (ok && child == root)) continue;
    kill(child, SIGKILL);
    while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (run->timed_out) {
    return unavailable("criu restore ran past " + std::to_string(restore.timeout.count()) +
                       " s and was killed");
  }
  if (!ok) {
    if (run->exit_code == 0) {
      return internal_error("criu restore wrote no root PID to " + pidfile);
    }
    return internal_error(
        describe_failure(*run, "criu restore", restore.image_dir + "/restore.log"));
  }
  return root;
}

Status runc_dump(const CriuInfo& criu, const RuncDump& dump) {
  std::vector<std::string> args = {"--criu",        criu.binary,   "--root",
                                   dump.state_root, "checkpoint",  "--image-path",
                                   dump.image_dir,  "--work-path", dump.image_dir};
  if (dump.leave_running) args.push_back("--leave-running");
  args.push_back(dump.container);
  const std::string log = dump.image_dir + "/dump.log";
  auto run = dump_with_retries(
      [&] { return run_tool(dump.runc, args, {}, dump.timeout, dump.namespace_of); },
      "runc checkpoint of " + dump.container, log);
  if (!run.is_ok()) return run.status();
  if (run->timed_out) {
    return unavailable("runc checkpoint ran past " + std::to_string(dump.timeout.count()) +
                       " s and was killed");
  }
  if (run->exit_code != 0) {
    return internal_error(describe_failure(*run, "runc checkpoint of " + dump.container, log));
  }
  return Status::ok();
}

}  // namespace hpcq::agent
