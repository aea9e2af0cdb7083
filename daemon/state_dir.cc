#include "daemon/state_dir.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

namespace hpcq::daemon {

Status prepare_state_dir(const std::string& dir) {
  const std::filesystem::path path(dir);
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return internal_error("state dir " + dir + ": " + ec.message());
  if (mkdir(dir.c_str(), 0700) == 0) {
    // mkdir's mode passes through the umask, which may only take bits away.
    if (chmod(dir.c_str(), 0700) != 0) {
      return internal_error("state dir " + dir + ": chmod 700: " + std::strerror(errno));
    }
    return Status::ok();
  }
  if (errno != EEXIST) return internal_error("state dir " + dir + ": " + std::strerror(errno));
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) {
    return internal_error("state dir " + dir + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return invalid_argument("state dir " + dir + " is not a directory");
  }
  if (st.st_uid != geteuid()) {
    return invalid_argument("state dir " + dir + " belongs to uid " + std::to_string(st.st_uid) +
                            ", not to this daemon's uid " + std::to_string(geteuid()));
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return invalid_argument("state dir " + dir + " is open to other users (mode " + mode +
                            "); its database holds jobs' environments: chmod 700 " + dir);
  }
  return Status::ok();
}

}  // namespace hpcq::daemon
