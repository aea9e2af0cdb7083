#include "agent/executor/job_namespaces.h"

#include <sched.h>
#include <sys/mount.h>

namespace hpcq::agent {

__attribute__((no_sanitize("address", "undefined"))) const char* enter_job_mount_namespace(
    const char* private_tmp, const char* private_shm) {
  if (unshare(CLONE_NEWNS) != 0) return "unshare(CLONE_NEWNS) failed";
  // Private, so that the job's mounts do not reach the node's namespace
  // (nor the node's later mounts the job's).
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return "making / private failed";
  }
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    return "mounting /proc failed";
  }
  if (private_tmp != nullptr && (mount(private_tmp, "/tmp", nullptr, MS_BIND, nullptr) != 0 ||
                                 mount(private_shm, "/dev/shm", nullptr, MS_BIND, nullptr) != 0)) {
    return "mounting the job's own /tmp and /dev/shm failed";
  }
  return nullptr;
}

}  // namespace hpcq::agent
