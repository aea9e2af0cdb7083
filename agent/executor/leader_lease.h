// A node's lease on its jobs: how long they may run without the leader.
//
// The leader gives up on a node it has not heard from for node_down_after_ms
// and may then run the node's jobs elsewhere. Jobs that ran on there would
// run twice (a frozen or killed agent leaves its job shells and tasks
// running). So the node stops them first: every heartbeat the leader
// answers renews the lease until the heartbeat's send time plus
// fence_after_ms (ClusterConfig: node_down_after_ms less one heartbeat), and
// the leader's last word of the node came no earlier than that send time.
// The agent writes the deadline to a file (LeaseFile); each job shell reads
// it every kLeaseLookMs and, past it, kills its tasks itself
// (start_lease_watch): it does so also when its agent is frozen or gone, and
// a restarted agent that the leader answers renews the same file.
//
// The clock is CLOCK_BOOTTIME: one clock for every process of the node, and
// one that runs on while the node is suspended, as the leader's does.
//
// The file: the deadline twice, 8 bytes little-endian each, in place (no
// rename, so no new block is needed once it exists): a read torn by a
// concurrent write has two different copies and is taken again at the next
// look. A file that holds no deadline, or was never there, is an expired
// lease: the agent writes it before it starts any job. A job restored from a
// checkpoint may find at the path another file than its shell first read,
// or none (another node's, or a frozen copy of a tmpfs run directory): its
// watch then stops, with a line in the shell's log, rather than kill on a
// stale deadline; a restored job is not fenced (docs/admin-guide.md).
//
// LeaderLease is a pure value (no clock, no I/O). LeaseFile belongs to the
// agent's loop thread. start_lease_watch is for the job shell's main thread,
// once; its handler uses only async-signal-safe calls.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "lib/core/ids.h"
#include "lib/core/status.h"

namespace hpcq::agent {

// A task the watch killed ended so (TaskResult::error): the job's reason.
inline constexpr char kLeaseLostError[] =
    "killed on its node, which had no answer from hpcqd within its lease (the job may run "
    "elsewhere)";
// How often a job shell looks at the lease.
inline constexpr int kLeaseLookMs = 100;
inline constexpr std::size_t kLeaseFileBytes = 16;

// CLOCK_BOOTTIME in microseconds. Async-signal-safe.
TimeUs boot_clock_us();

// The file's bytes for `deadline`.
std::string encode_lease(TimeUs deadline);
// The deadline in a file's bytes; nullopt for a torn read (the two copies
// differ). A short file holds no deadline: 0, expired.
std::optional<TimeUs> decode_lease(std::string_view bytes);

// The agent's deadline, renewed by the leader's answers.
class LeaderLease {
 public:
  explicit LeaderLease(TimeUs fence_after) : fence_after_(fence_after) {}
  // The leader answered what this agent sent at `sent_at` (boot clock).
  // True if the deadline moved on: a late answer to an older message does
  // not shorten it.
  bool renew(TimeUs sent_at);
  TimeUs deadline() const { return deadline_; }
  bool expired(TimeUs now) const { return now >= deadline_; }

 private:
  TimeUs fence_after_;
  TimeUs deadline_ = 0;  // none granted yet: expired
};

// The lease file, opened (created, 0644) once and written in place.
class LeaseFile {
 public:
  // A file that holds no deadline yet gets 0 (expired): its block is
  // allocated now, so that later writes cannot fail for want of space.
  static Result<LeaseFile> open(const std::string& path);
  LeaseFile(LeaseFile&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
    other.fd_ = -1;
  }
  LeaseFile& operator=(LeaseFile&&) = delete;
  LeaseFile(const LeaseFile&) = delete;
  ~LeaseFile();
  Status write(TimeUs deadline);
  const std::string& path() const { return path_; }

 private:
  LeaseFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

// The job shell's watch of the lease at `path`: a timer signal every
// kLeaseLookMs whose handler reads the file and, once its deadline has
// passed, kills every other process of the shell's PID namespace with
// SIGKILL (the shell is its init), again at every look after. A handler,
// not the shell's loop, so that a shell blocked on its channel to a frozen
// agent still does it. Installs the handler (SA_RESTART) and unblocks the
// signal; fails only if the timer cannot be made.
Status start_lease_watch(const std::string& path);
// When the watch first found the lease expired and killed the tasks (boot
// clock); 0: it has not.
TimeUs lease_fenced_at();

}  // namespace hpcq::agent
