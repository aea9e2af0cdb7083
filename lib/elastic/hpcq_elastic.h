// hpcq_elastic.h: the application's side of hpcq's resize protocol (hpcq
// issue 7). Header-only, C++17 or later, POSIX only: copy it or include it
// from the installed include directory; nothing to link.
//
// A job submitted with `hpcq submit -N MIN-MAX --elastic` runs its tasks on
// the first node with:
//   HPCQ_NODELIST_FILE  the job's current nodes, one host name per line
//   HPCQ_HOSTFILE       the same as a hostfile ("host slots=N")
//   HPCQ_RESIZE_SOCKET  where the node's agent tells of resizes
// When the scheduler (or `hpcq resize`) resizes the job, the agent rewrites
// both files (atomically), signals the process that opened the channel
// (SIGUSR1 unless the site's [agent] resize_signal says otherwise; a job
// that never opened one gets no signal) and writes one line on the socket:
//   "shrink <n> <nodelist file>"   the job is asked to give up its last nodes:
//                                  the file lists the n nodes it would keep;
//                                  after "ack" the others are taken (their
//                                  tasks are killed), after "decline" nothing
//                                  changes and the file is put back
//   "expand <n> <nodelist file>"   the new nodes already run the job's tasks;
//                                  "ack" to use them, "decline" to give them
//                                  back
// The answer is one line, "ack" or "decline". No answer within the site's
// [leader] resize_timeout_ms counts as a decline for a shrink; an expansion
// keeps its nodes.
//
// Use:
//   hpcq::elastic::Channel channel;
//   std::string error;
//   if (!channel.open(&error)) { ... not elastic, or not on the first node ... }
//   hpcq::elastic::Notice notice;
//   if (channel.wait(0, &notice, &error)) {      // poll; -1 blocks
//     auto nodes = hpcq::elastic::read_nodelist(notice.nodelist);
//     ... move work off the nodes that go, or onto the new ones ...
//     channel.ack(&error);                         // or channel.decline(&error)
//   }
// channel.fd() may go into the application's own poll()/epoll set instead.
//
// Thread safety: a Channel is used by one thread at a time. Errors are
// returned as false plus a one-line reason; nothing throws but std::string's
// allocation.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace hpcq::elastic {

struct Notice {
  enum class Kind { kShrink, kExpand };
  Kind kind = Kind::kShrink;
  int nodes = 0;         // the node count after the resize
  std::string nodelist;  // the file that lists them
};

// The host names in a node list file, in order; empty if it cannot be read.
inline std::vector<std::string> read_nodelist(const std::string& path) {
  std::vector<std::string> nodes;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) nodes.push_back(line);
  }
  return nodes;
}

// $HPCQ_NODELIST_FILE, or empty outside an elastic job's first node.
inline std::string nodelist_path() {
  const char* path = std::getenv("HPCQ_NODELIST_FILE");
  return path == nullptr ? std::string() : std::string(path);
}

// Parses "shrink <n> <path>" or "expand <n> <path>"; false if malformed.
inline bool parse_notice(const std::string& line, Notice* notice) {
  const std::size_t a = line.find(' ');
  const std::size_t b = a == std::string::npos ? a : line.find(' ', a + 1);
  if (b == std::string::npos || b + 1 >= line.size()) return false;
  const std::string word = line.substr(0, a);
  if (word == "shrink") {
    notice->kind = Notice::Kind::kShrink;
  } else if (word == "expand") {
    notice->kind = Notice::Kind::kExpand;
  } else {
    return false;
  }
  const std::string count = line.substr(a + 1, b - a - 1);
  char* end = nullptr;
  const long n = std::strtol(count.c_str(), &end, 10);
  if (count.empty() || *end != '\0' || n < 1 || n > 1000000) return false;
  notice->nodes = static_cast<int>(n);
  notice->nodelist = line.substr(b + 1);
  return true;
}

class Channel {
 public:
  Channel() = default;
  ~Channel() { close(); }
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Connects to $HPCQ_RESIZE_SOCKET (or `path` when given).
  bool open(std::string* error, const std::string& path = "") {
    close();
    std::string where = path;
    if (where.empty()) {
      const char* env = std::getenv("HPCQ_RESIZE_SOCKET");
      if (env == nullptr || *env == '\0') {
        return fail(error, "HPCQ_RESIZE_SOCKET is not set (not an elastic job's first node)");
      }
      where = env;
    }
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (where.size() >= sizeof address.sun_path) return fail(error, where + ": path too long");
    std::memcpy(address.sun_path, where.c_str(), where.size() + 1);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return fail(error, std::string("socket: ") + std::strerror(errno));
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      const std::string why = where + ": " + std::strerror(errno);
      close();
      return fail(error, why);
    }
    return true;
  }

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }  // readable when a notice (or the agent's close) is there

  // Waits up to timeout_ms (0: poll, -1: for ever) for the next notice.
  // false with an empty *error: none came in time; false with a reason: the
  // channel broke (the agent closed it: the job is ending).
  bool wait(int timeout_ms, Notice* notice, std::string* error) {
    if (error != nullptr) error->clear();
    if (fd_ < 0) return fail(error, "the resize channel is not open");
    for (;;) {
      const std::size_t eol = input_.find('\n');
      if (eol != std::string::npos) {
        std::string line = input_.substr(0, eol);
        input_.erase(0, eol + 1);
        if (parse_notice(line, notice)) return true;
        continue;  // not a notice: skipped
      }
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, timeout_ms);
      if (ready < 0 && errno == EINTR) {
        if (timeout_ms != 0) continue;  // the resize signal itself, most likely
        return false;
      }
      if (ready < 0) return fail(error, std::string("poll: ") + std::strerror(errno));
      if (ready == 0) return false;
      char buf[512];
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close();
        return fail(error, n == 0 ? "the agent closed the resize channel"
                                  : std::string("read: ") + std::strerror(errno));
      }
      input_.append(buf, static_cast<std::size_t>(n));
      timeout_ms = 0;  // what came may be a part of a line; the rest follows at once
    }
  }

  bool ack(std::string* error) { return answer("ack\n", error); }
  bool decline(std::string* error) { return answer("decline\n", error); }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    input_.clear();
  }

 private:
  static bool fail(std::string* error, const std::string& why) {
    if (error != nullptr) *error = why;
    return false;
  }
  bool answer(const char* line, std::string* error) {
    if (fd_ < 0) return fail(error, "the resize channel is not open");
    const std::size_t size = std::strlen(line);
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::send(fd_, line + done, size - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return fail(error, std::string("send: ") + std::strerror(errno));
      done += static_cast<std::size_t>(n);
    }
    return true;
  }

  int fd_ = -1;
  std::string input_;
};

}  // namespace hpcq::elastic
