#include "lib/job/script_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lib/core/units.h"

namespace hpcq::job {
namespace {

// Closes the descriptor it holds.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Up to `limit` bytes from `fd` into `out` (appended); false on a read error.
bool read_up_to(int fd, std::size_t limit, std::string& out) {
  char buffer[65536];
  while (out.size() < limit) {
    const std::size_t want = std::min(sizeof buffer, limit - out.size());
    const ssize_t got = ::read(fd, buffer, want);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return false;
    if (got == 0) break;
    out.append(buffer, static_cast<std::size_t>(got));
  }
  return true;
}

std::string mib_text(std::size_t bytes) {
  return bytes % (1 << 20) == 0 ? std::to_string(bytes >> 20) + " MiB"
                                : std::to_string(bytes) + " bytes";
}

}  // namespace

Result<std::string> read_script_file(const std::string& path, std::size_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return not_found("cannot read " + quote(path) + ": " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return not_found(quote(path) + " is a directory");
  if (!S_ISREG(st.st_mode)) {
    return Status(Code::kFailedPrecondition,
                  quote(path) + " is not a regular file (a script must be one)");
  }
  // O_NONBLOCK: should the path have become a FIFO since the stat, the open
  // must not wait for a writer; fstat below refuses it.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return not_found("cannot read " + quote(path) + ": " + std::strerror(errno));
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status(Code::kFailedPrecondition,
                  quote(path) + " is not a regular file (a script must be one)");
  }
  std::string text;
  if (!read_up_to(fd.get(), 2, text)) {
    return not_found("cannot read " + quote(path) + ": " + std::strerror(errno));
  }
  if (!text.starts_with("#!")) return text;  // a command, not a script
  const auto too_large = [&] {
    return Status(Code::kFailedPrecondition,
                  "script " + quote(path) + " is larger than " + mib_text(max_bytes) +
                      " (the most a script may be, as Slurm's default max_script_size)");
  };
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) return too_large();
  // One byte past the bound tells a file that grew since the fstat.
  if (!read_up_to(fd.get(), max_bytes + 1, text)) {
    return not_found("cannot read " + quote(path) + ": " + std::strerror(errno));
  }
  if (text.size() > max_bytes) return too_large();
  return text;
}

}  // namespace hpcq::job
