// The CRIU runner: finds and checks the criu binary, and runs `criu dump` and
// `criu restore` as child processes with an explicit argv, turning a failure
// into one line taken from CRIU's own log.
//
// What CRIU needs of a job, and what the process executor gives it (DESIGN.md,
// "Executors"): a tree whose root is PID 1 of its own PID namespace and a
// session leader (hpcq-job-shell), a mount namespace of its own whose root
// is the namespace's root (not a chroot's: CRIU refuses that), stdio on
// files opened inside it, no pipes or sockets to the outside. Cgroups are
// not CRIU's business here (--manage-cgroups=ignore): a restore runs CRIU
// inside the job's new cgroups, so the restored tree is born in them.
//
// A restore uses --restore-detached --restore-sibling: the restored root is a
// child of the caller (not of criu), so the caller can wait for it as for a
// launched job. criu_restore() returns it; if the restore fails after CRIU
// had created it, criu_restore() kills and reaps it, so nothing is left.
//
// Threads: blocking calls (each waits for criu, bounded by a timeout); any
// thread, but the caller must not reap children it did not start (criu's pid
// and the restored root are this call's to wait for).
// Errors: kFailedPrecondition when CRIU is missing or does not work here
// (version, `criu check`); kUnavailable when criu ran past its time and was
// killed (retryable); kInternal for a dump or restore that criu reported as failed,
// with the first error line of its log; kNotFound for missing images.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "lib/core/status.h"

namespace hpcq::agent {

class CgroupHierarchy;

struct CriuInfo {
  std::string binary;   // absolute path
  std::string version;  // e.g. "4.1.1"
};

// Finds `binary` (a path, or a name looked up in PATH; empty means "criu"),
// requires version >= 4 and runs `criu check`. A node where this fails still
// runs jobs; its checkpoints fail with this reason.
Result<CriuInfo> probe_criu(const std::string& binary);

// The environment every CRIU runs with (directly, or under runc). CRIU_FAULT
// 130 is CRIU's own switch (FI_NO_BREAKPOINTS) for stopping a task leaving
// its parasite or restorer by stepping to its sigreturn syscall instead of
// with a hardware breakpoint: some virtualised kernels never deliver the
// breakpoint's trap (a 6.18 PVM guest here; Xen guests before, where CRIU
// had breakpoints off by default for years), and every dump hangs there
// while `criu check` passes. Stepping works on every kernel; the breakpoint
// only saves a few syscall stops per task.
inline constexpr char kCriuEnvironment[] = "CRIU_FAULT=130";

// Whether CRIU can dump a job on this host, tried for real: `criu check`
// passes on kernels where every dump hangs (with hardware breakpoints, see
// kCriuEnvironment), and in a chroot, where no job's mount namespace can be
// dumped ("The root task has another root than mntns"). So a `sleep` made as
// a job is made (TrialJob, trial_job.h) is dumped, within `timeout`, as a
// job's dump is (--freeze-cgroup): PID 1 of a PID namespace of its
// own, in the job's mount namespace (enter_job_mount_namespace: / private,
// its own /proc) with stdio on /dev/null opened there, a session leader, in
// a cgroup made as a job's is (`cgroups`' create_job under the instance
// "criu-trial-<pid>"; null: CgroupHierarchy::detect()) that CRIU freezes, as
// it does a job's; it runs as `as_user`, as a job's tasks do (CRIU, as root,
// may still be unable to dump another user's process: without
// CAP_SYS_RESOURCE it cannot read its rlimits). .ci/criu-dumps dumps the
// same kind of process.
// The answer is kept for this boot in /tmp/.hpcq-criu-trial (delete it to
// try again), so that agents starting on one host wait for a hanging dump
// once, not each: keyed by the binary (path, size, mtime), kCriuEnvironment
// and the user; a hang for any root, any other answer only where the root
// is its mount namespace's (not in a chroot, whose answer differs and which
// may share /tmp with the host). A negative answer is not kept under
// HPCQ_CRIU_TRIAL_CACHE=off.
// A hang is tried once more before it counts.
// Errors: kFailedPrecondition with the reason when the dump fails or hangs,
// its message holding kTrialDumpVerdict (tests skip on it): a hang says
// "cannot dump a process on this kernel" (kKernelCannotDump), a failure gives
// CRIU's reason. kInternal ("setting up the trial dump: ...") when the
// process or its cgroup could not be made: not an answer about CRIU, not
// kept.
inline constexpr char kTrialDumpVerdict[] = "a trial dump of a sleep made as jobs are";
inline constexpr char kKernelCannotDump[] = "cannot dump a process on this kernel";
Status criu_trial_dump(const CriuInfo& criu,
                       std::chrono::seconds timeout = std::chrono::seconds(15), uid_t as_user = 0,
                       const CgroupHierarchy* cgroups = nullptr);

struct CriuDump {
  pid_t root = -1;            // host PID of the tree's root (the job shell)
  std::string image_dir;      // must exist; images and dump.log go here
  bool leave_running = true;  // false: CRIU kills the tree once the images are written
  std::string freeze_cgroup;  // freezer cgroup of the tree (v1 freezer or v2 dir); empty: ptrace
  std::chrono::seconds timeout{600};
  // Inodes of the tree's unix sockets whose peer is outside it (the shell's
  // channel to this agent): dumped as external (`--external unix[INO]`), to
  // be given a new peer at restore (CriuRestore::inherit).
  std::vector<std::uint64_t> external_sockets;
  // Mount points (directories or files) of the tree's mount namespace left
  // out of the images (`--external mnt[POINT]:POINT`), whose files CRIU would
  // otherwise dump (a tmpfs's) and restore as a private copy; the restore
  // binds the node's own there (CriuRestore::external_mounts).
  std::vector<std::string> external_mounts;
};

// Runs `criu dump`. On failure CRIU resumes the tree; the caller should still
// thaw `freeze_cgroup` (a criu killed for its timeout cannot).
Status criu_dump(const CriuInfo& criu, const CriuDump& dump);

struct CriuRestore {
  std::string image_dir;  // images from criu_dump(); restore.log and restore.pid go here
  // Cgroup directories criu is moved into (their cgroup.procs) before it
  // starts, so that the restored tree is born in them.
  std::vector<std::string> cgroup_dirs;
  std::chrono::seconds timeout{600};
  // Descriptors of ours the restored tree gets in place of its external
  // sockets, by the dumped socket's inode (`--inherit-fd fd[N]:socket:[INO]`).
  std::vector<std::pair<int, std::uint64_t>> inherit;
  // The dump's external mounts (CriuDump::external_mounts): each is bound
  // from this node's file or directory of that path (`--external mnt[POINT]:POINT`).
  std::vector<std::string> external_mounts;
};

// Runs `criu restore`; returns the host PID of the restored root, a child of
// the caller. On error nothing of the restored tree is left.
Result<pid_t> criu_restore(const CriuInfo& criu, const CriuRestore& restore);

// One CRIU at a time on a host, held for this object's lifetime: every
// criu run here takes it, and so must whoever has runc run CRIU (a job
// shell's `runc restore`). CRIU's parasite mounts a /proc of the dumped
// task's PID namespace at a fixed /tmp/crtools-proc of the task's mount
// namespace -- the host's for the process executor -- so two dumps at once
// (two jobs on one node, or emulated nodes sharing a host) fail with
// EEXIST. A mutex between this process's threads, and a POSIX record lock
// (fcntl) on /tmp/.hpcq-criu.lock between processes. Not flock: a child
// forked meanwhile (a job shell, criu before its exec) would share an flock
// and, stuck, hold it for ever; record locks are the process's own, never
// inherited, and go when it dies.
class HostCriuLock {
 public:
  HostCriuLock();
  ~HostCriuLock();
  HostCriuLock(const HostCriuLock&) = delete;
  HostCriuLock& operator=(const HostCriuLock&) = delete;

 private:
  std::unique_lock<std::mutex> in_process_;
  int fd_;
};

// `runc checkpoint` of one container of an image job (the OCI executor):
// runc drives CRIU (`runc --criu`) over the container's tree, its mounts,
// namespaces and the pipes of its stdio (descriptors.json), which
// `runc restore` then maps onto its own. runc's state (`--root`) names the
// container's PIDs as the job's PID namespace sees them (the job shell ran
// `runc run` there, with that namespace's /proc), so runc checkpoint runs
// in that namespace too, with a /proc of its own.
struct RuncDump {
  std::string runc;           // runc binary, absolute
  std::string state_root;     // runc --root
  std::string container;      // container id
  pid_t namespace_of = -1;    // a host PID in the job's PID namespace (its shell)
  std::string image_dir;      // must exist; images and dump.log go here
  bool leave_running = true;  // false: CRIU kills the container once dumped
  std::chrono::seconds timeout{600};
};

Status runc_dump(const CriuInfo& criu, const RuncDump& dump);

// `name` if it holds a '/', else the first executable `name` in PATH; empty
// if there is none.
std::string find_program(const std::string& name);

// One line explaining why CRIU failed, from its log: the first "Error" line
// without its timestamp and source location, or `fallback` if there is none.
std::string criu_failure_reason(const std::string& log_path, const std::string& fallback);

}  // namespace hpcq::agent
