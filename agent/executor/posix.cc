#include "agent/executor/posix.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace hpcq::agent {

namespace fs = std::filesystem;

void Fd::reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void default_signals() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

std::string errno_text(int err) { return strerror(err); }

int open_pidfd(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0U)); }

int signal_pidfd(int pidfd, int sig) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0U));
}

int signal_children(pid_t pid, int sig) {
  std::ifstream children("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) +
                         "/children");
  int sent = 0;
  pid_t child = 0;
  while (children >> child) {
    // A child reaped between the read and the open leaves its pid free for
    // reuse; the kernel hands pids out in order, so not within this loop.
    Fd fd(open_pidfd(child));
    if (fd.get() >= 0 && signal_pidfd(fd.get(), sig) == 0) ++sent;
  }
  return sent;
}

Status write_new_file(const std::string& path, const std::string& content, mode_t mode, uid_t uid,
                      gid_t gid) {
  Fd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (fd.get() < 0) return internal_error("create " + path + ": " + errno_text(errno));
  // The mode passed to open is filtered by the umask; the files' modes are part
  // of the contract (the script is the user's and only theirs).
  if (fchmod(fd.get(), mode) != 0 || fchown(fd.get(), uid, gid) != 0) {
    return internal_error("chmod/chown " + path + ": " + errno_text(errno));
  }
  return write_fully(fd.get(), content, path);
}

Status write_fully(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return internal_error("write " + path + ": " + errno_text(errno));
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return Status::ok();
}

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

Status replace_file(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".new";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return internal_error("create " + tmp + ": " + errno_text(errno));
  if (fchmod(fd, 0644) != 0) {
    const std::string why = errno_text(errno);
    close(fd);
    return internal_error("chmod " + tmp + ": " + why);
  }
  Status written = write_fully(fd, content, tmp);
  if (!written.is_ok()) {
    close(fd);
    return written;
  }
  if (close(fd) != 0) return internal_error("close " + tmp + ": " + errno_text(errno));
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return internal_error("rename " + tmp + ": " + errno_text(errno));
  }
  return Status::ok();
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("PPid:", 0) == 0) return static_cast<pid_t>(std::atoi(line.c_str() + 5));
  }
  return -1;
}

std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

namespace {

Result<sockaddr_un> unix_address(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return invalid_argument("socket path too long: " + path);
  addr.sun_family = AF_UNIX;
  path.copy(addr.sun_path, path.size());
  return addr;
}

}  // namespace

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

Result<int> listen_unix(const std::string& path) {
  auto addr = unix_address(path);
  if (!addr.is_ok()) return addr.status();
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return internal_error("socket: " + errno_text(errno));
  unlink(path.c_str());
  if (bind(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0 ||
      chmod(path.c_str(), 0600) != 0 || listen(fd, 4) != 0) {
    const int err = errno;
    close(fd);
    return internal_error("listening on " + path + ": " + errno_text(err));
  }
  return fd;
}

namespace {

// A message of one buffer with room for one descriptor (SCM_RIGHTS).
struct OneFdMessage {
  explicit OneFdMessage(iovec& iov) {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  OneFdMessage(const OneFdMessage&) = delete;  // msg points into control
  OneFdMessage& operator=(const OneFdMessage&) = delete;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
};

}  // namespace

Status send_fd(int socket, int fd) {
  char byte = 0;
  iovec iov{&byte, 1};
  OneFdMessage m(iov);
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  while (sendmsg(socket, &m.msg, MSG_NOSIGNAL) < 0) {
    if (errno != EINTR) return internal_error("sendmsg: " + errno_text(errno));
  }
  return Status::ok();
}

Received receive_fd(int socket) {
  Received got;
  got.data.resize(64 * 1024 + 64);
  iovec iov{got.data.data(), got.data.size()};
  OneFdMessage m(iov);
  ssize_t n;
  while ((n = recvmsg(socket, &m.msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n < 0 && errno == EAGAIN) {
    got.data.clear();
    return got;
  }
  if (n <= 0) {
    got.kind = Received::Kind::kClosed;
    got.data.clear();
    return got;
  }
  got.kind = Received::Kind::kMessage;
  got.data.resize(static_cast<std::size_t>(n));
  for (cmsghdr* c = CMSG_FIRSTHDR(&m.msg); c != nullptr; c = CMSG_NXTHDR(&m.msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int))) {
      std::memcpy(&got.fd, CMSG_DATA(c), sizeof got.fd);
    }
  }
  return got;
}

Result<int> connect_unix(const std::string& path) {
  auto addr = unix_address(path);
  if (!addr.is_ok()) return addr.status();
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return internal_error("socket: " + errno_text(errno));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0) {
    const int err = errno;
    close(fd);
    return internal_error("connecting to " + path + ": " + errno_text(err));
  }
  return fd;
}

Status copy_job_dir(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::create_directories(to, ec);
  if (ec) return internal_error("create " + to + ": " + ec.message());
  struct stat st {};
  if (stat(from.c_str(), &st) != 0)
    return internal_error("stat " + from + ": " + errno_text(errno));
  if (chmod(to.c_str(), st.st_mode & 07777) != 0 || chown(to.c_str(), st.st_uid, st.st_gid) != 0) {
    return internal_error("chmod/chown " + to + ": " + errno_text(errno));
  }
  for (const auto& entry : fs::directory_iterator(from, ec)) {
    const std::string src = entry.path().string();
    const std::string dst = to + "/" + entry.path().filename().string();
    if (lstat(src.c_str(), &st) != 0)
      return internal_error("stat " + src + ": " + errno_text(errno));
    if (S_ISDIR(st.st_mode)) {
      HPCQ_RETURN_IF_ERROR(copy_job_dir(src, dst));
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;
    fs::copy_file(src, dst, fs::copy_options::overwrite_existing, ec);
    if (ec) return internal_error("copy " + src + " to " + dst + ": " + ec.message());
    if (chmod(dst.c_str(), st.st_mode & 07777) != 0 ||
        chown(dst.c_str(), st.st_uid, st.st_gid) != 0) {
      return internal_error("chmod/chown " + dst + ": " + errno_text(errno));
    }
  }
  if (ec) return internal_error("read " + from + ": " + ec.message());
  return Status::ok();
}

std::uint64_t tree_bytes(const std::string& dir) {
  std::uint64_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec)) bytes += it->file_size(ec);
  }
  return bytes;
}

}  // namespace hpcq::agent
