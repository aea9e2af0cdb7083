// Small POSIX helpers the executor, the CRIU runner, the cgroup code and the
// agent share: an owned file descriptor, errno as text, pidfds, and whole-file
// reads and writes. Thread-safe (they keep no state).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "lib/core/status.h"

namespace hpcq::agent {

// A file descriptor closed with its owner (or by reset()).
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset();
  void adopt(int fd) {  // closes the one held, then holds `fd`
    reset();
    fd_ = fd;
  }
  int release() {  // the caller owns it now
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

std::string errno_text(int err);

// In a new child (after fork or clone): every signal's default disposition
// and an empty mask, so that no handler of the parent runs in it.
// Async-signal-safe.
void default_signals();

// Raw system calls: glibc 2.36's <sys/pidfd.h> lacks extern "C" (unusable
// from C++). -1 with errno set on failure.
int open_pidfd(pid_t pid);
int signal_pidfd(int pidfd, int sig);
// Sends `sig` to each child of `pid` (/proc/PID/task/PID/children), each
// through a pidfd; how many took it.
int signal_children(pid_t pid, int sig);

// Creates `path` (it must not exist) with exactly `mode` (not filtered by the
// umask), owned by uid:gid, holding `content`. Errors name the path.
Status write_new_file(const std::string& path, const std::string& content, mode_t mode, uid_t uid,
                      gid_t gid);

// Writes all of `bytes` to `fd` (a file: EINTR retried); the error names
// `path`.
Status write_fully(int fd, std::string_view bytes, const std::string& path);
// Writes `text` over the file, creating it; false (errno set) on failure.
bool write_text(const std::string& path, const std::string& text);
// Written aside (mode 0644), then renamed over `path`: a reader sees the old
// or the new file, never a part of one. Errors name the file.
Status replace_file(const std::string& path, const std::string& content);

// The file's contents; empty if it cannot be read.
std::string read_whole(const std::string& path);

// The parent of process `pid` (its PPid); -1 if it is gone.
pid_t parent_of(pid_t pid);

// The file's last line that is not empty; empty if none.
std::string last_line(const std::string& path);

// Copies a directory tree's directories and regular files with their modes
// and owners (CRIU refuses to reopen a file whose owner or mode changed under
// a task, and a job's script is its user's alone). Errors name the path.
Status copy_job_dir(const std::string& from, const std::string& to);

// A listening SOCK_SEQPACKET unix socket at `path` (any file there is
// replaced), non-blocking and close-on-exec, mode 0600: for root only.
// Closes `fd` if it is open and leaves it -1: a descriptor a struct holds.
void close_fd(int& fd);
Result<int> listen_unix(const std::string& path);
// A connection to the SOCK_SEQPACKET unix socket at `path`, close-on-exec.
Result<int> connect_unix(const std::string& path);
// One byte with `fd` attached (SCM_RIGHTS) on the connected socket `socket`.
Status send_fd(int socket, int fd);
// The next message on `socket`, without waiting, and the descriptor it
// carries (close-on-exec), if any.
struct Received {
  enum class Kind { kNothingYet, kMessage, kClosed };  // kClosed: end of file, or an error
  Kind kind = Kind::kNothingYet;
  int fd = -1;
  std::string data;
};
Received receive_fd(int socket);

// The bytes of the regular files below `dir`.
std::uint64_t tree_bytes(const std::string& dir);

}  // namespace hpcq::agent
