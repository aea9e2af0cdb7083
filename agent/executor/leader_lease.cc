#include "agent/executor/leader_lease.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "agent/executor/posix.h"
#include "lib/core/bytes.h"

namespace hpcq::agent {

TimeUs boot_clock_us() {
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  return TimeUs{now.tv_sec} * kUsPerSecond + now.tv_nsec / 1000;
}

std::string encode_lease(TimeUs deadline) {
  std::string bytes;
  put_u64(bytes, static_cast<std::uint64_t>(deadline));
  put_u64(bytes, static_cast<std::uint64_t>(deadline));
  return bytes;
}

std::optional<TimeUs> decode_lease(std::string_view bytes) {
  if (bytes.size() < kLeaseFileBytes) return 0;
  const std::uint64_t first = get_u64(bytes), second = get_u64(bytes.substr(8));
  if (first != second) return std::nullopt;
  return static_cast<TimeUs>(first);
}

bool LeaderLease::renew(TimeUs sent_at) {
  const TimeUs until = sent_at + fence_after_;
  if (sent_at <= 0 || until <= deadline_) return false;
  deadline_ = until;
  return true;
}

Result<LeaseFile> LeaseFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return internal_error("lease file " + path + ": " + errno_text(errno));
  LeaseFile file(fd, path);
  char bytes[kLeaseFileBytes];
  const ssize_t n = pread(fd, bytes, sizeof bytes, 0);
  if (n != static_cast<ssize_t>(sizeof bytes)) HPCQ_RETURN_IF_ERROR(file.write(0));
  return file;
}

LeaseFile::~LeaseFile() {
  if (fd_ >= 0) close(fd_);
}

Status LeaseFile::write(TimeUs deadline) {
  const std::string bytes = encode_lease(deadline);
  if (pwrite(fd_, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    return internal_error("lease file " + path_ + ": " + errno_text(errno));
  }
  return Status::ok();
}

namespace {

// The watch's state, for its signal handler: set once before the timer starts.
char g_lease_path[4096];
std::atomic<TimeUs> g_fenced_at{0};
// The file first read: one found later at the path with another identity,
// or none, is not this node's agent's lease (the job was restored from a
// checkpoint, whose restore may give the shell a frozen copy of a tmpfs run
// directory, or none): the watch stops rather than kill on a stale deadline.
dev_t g_lease_dev = 0;
ino_t g_lease_ino = 0;
bool g_lease_known = false, g_watch_off = false;
static_assert(std::atomic<TimeUs>::is_always_lock_free);

int lease_look_signal() { return SIGRTMIN + 2; }  // prepare_dump_signal() is +1

// Whether the open file is the one the watch first read (which it is, then).
bool same_lease_file(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return true;
  if (!g_lease_known) {
    g_lease_dev = st.st_dev;
    g_lease_ino = st.st_ino;
    g_lease_known = true;
  }
  return st.st_dev == g_lease_dev && st.st_ino == g_lease_ino;
}

void look_at_lease(int) {
  if (g_watch_off) return;
  const int saved_errno = errno;
  std::optional<TimeUs> deadline;
  const int fd = ::open(g_lease_path, O_RDONLY | O_CLOEXEC);
  const bool gone = fd < 0 && (errno == ENOENT || errno == ENOTDIR);
  if ((fd >= 0 && !same_lease_file(fd)) || (gone && g_lease_known)) {
    if (fd >= 0) close(fd);
    g_watch_off = true;
    static const char kOff[] =
        "hpcq-job-shell: the node's lease file is not the one it was (a restored job): no "
        "longer watched\n";
    ssize_t ignored = write(2, kOff, sizeof kOff - 1);
    (void)ignored;
    errno = saved_errno;
    return;
  }
  if (fd >= 0) {
    char bytes[kLeaseFileBytes];
    const ssize_t n = ::read(fd, bytes, sizeof bytes);
    close(fd);
    if (n >= 0) deadline = decode_lease(std::string_view(bytes, static_cast<size_t>(n)));
  } else if (gone) {
    deadline = 0;  // never there: no lease was granted
  }
  // Otherwise (out of descriptors, ...) no deadline: looked at next time.
  if (deadline && boot_clock_us() >= *deadline) {
    TimeUs none = 0;
    g_fenced_at.compare_exchange_strong(none, boot_clock_us());
    kill(-1, SIGKILL);  // from init: every process of the namespace but the shell
  }
  errno = saved_errno;
}

}  // namespace

Status start_lease_watch(const std::string& path) {
  // kill(-1) from anything but a namespace's init would reach the whole node.
  if (getpid() != 1) return failed_precondition("the job shell is not its PID namespace's init");
  if (path.empty() || path.size() >= sizeof g_lease_path) {
    return invalid_argument("lease file path '" + path + "' is empty or too long");
  }
  std::memcpy(g_lease_path, path.c_str(), path.size() + 1);
  struct sigaction sa {};
  sa.sa_handler = look_at_lease;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(lease_look_signal(), &sa, nullptr);
  sigset_t look;
  sigemptyset(&look);
  sigaddset(&look, lease_look_signal());
  sigprocmask(SIG_UNBLOCK, &look, nullptr);
  sigevent event{};
  event.sigev_notify = SIGEV_SIGNAL;
  event.sigev_signo = lease_look_signal();
  timer_t timer;
  if (timer_create(CLOCK_MONOTONIC, &event, &timer) != 0) {
    return internal_error("timer_create: " + errno_text(errno));
  }
  itimerspec every{};
  every.it_interval.tv_nsec = kLeaseLookMs * 1'000'000L;
  every.it_value = every.it_interval;
  if (timer_settime(timer, 0, &every, nullptr) != 0) {
    return internal_error("timer_settime: " + errno_text(errno));
  }
  return Status::ok();
}

TimeUs lease_fenced_at() { return g_fenced_at.load(); }

}  // namespace hpcq::agent
