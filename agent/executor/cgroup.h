// Control groups of the jobs of one agent instance, on cgroup v1 or v2.
//
// Layout (several agents share a machine when a cluster is emulated, so every
// path names the agent's instance):
//   v1: <mount of ctl>/hpcq/<instance>/job-<id> for ctl in cpuset, memory, pids, freezer
//   v2: <base>/hpcq/<instance>/job-<id>, with +cpuset +cpu +memory +pids
//       (cpu where the kernel has it) enabled in the subtree_control of
//       <base>, <base>/hpcq and <base>/hpcq/<instance>; each cgroup given a
//       cpuset gets cpu.weight 100 per CPU of it (what it weighs against
//       others on shared CPUs, --oversubscribe). <base> is the root, or the
//       agent's own cgroup where one was delegated to it
//       (settle_in_own_cgroup). docs/cgroups.md.
// CgroupHierarchy::detect finds which one the machine has; JobCgroup is one
// job's set of directories. Nothing is removed implicitly: the executor
// decides when (a JobCgroup's destructor leaves the directories alone).
//
// Threads: values with no shared state; the kernel serialises the file writes.
// Errors: kFailedPrecondition when the machine lacks what is needed (no cgroup
// file system, a controller missing) or when a cgroup still holds processes;
// kInternal for an unexpected system error. Messages name the file and errno.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/status.h"

namespace hpcq::agent {

enum class CgroupVersion { kV1, kV2 };

struct CgroupLimits {
  std::vector<int> cpus;           // cpuset.cpus; empty: all of the parent's
  std::vector<int> mems;           // cpuset.mems; empty: all of the parent's
  std::uint64_t memory_bytes = 0;  // memory.limit_in_bytes / memory.max; 0: none
  std::int64_t pids_max = 0;       // pids.max; 0: none
  // The job's group: the one group, besides root, that may read the job's
  // directory (create_job; children made by create_child are inside it).
  gid_t group = 0;
};

class JobCgroup {
 public:
  JobCgroup() = default;
  JobCgroup(CgroupVersion version, std::vector<std::string> dirs)
      : version_(version), dirs_(std::move(dirs)) {}

  CgroupVersion version() const { return version_; }
  // v1: one directory per controller; v2: the one directory. Empty once removed.
  const std::vector<std::string>& dirs() const { return dirs_; }

  // Moves `pid` (of the caller's PID namespace) into every directory.
  Status add_process(pid_t pid) const;

  // The processes in any of the directories or their descendants (host
  // PIDs), ascending, unique.
  std::vector<pid_t> pids() const;

  // How many processes the kernel's OOM killer has killed in this cgroup and
  // its children (v1 memory.oom_control, v2 memory.events: "oom_kill N");
  // 0 where the kernel does not count them.
  int oom_kills() const;

  // The most memory the cgroup and its children have held (v1
  // memory.max_usage_in_bytes, v2 memory.peak); 0 where the kernel does not
  // keep it.
  std::uint64_t memory_peak_bytes() const;
  // The memory it holds now (v1 memory.usage_in_bytes, v2 memory.current).
  std::uint64_t memory_bytes() const;

  // A child cgroup `name` (a worker's) in every directory with these limits
  // (they must lie within this cgroup's). v2: the controllers are enabled
  // for this cgroup's children, so from then on it may hold no process of
  // its own (the kernel's no-internal-process rule): put them in children.
  // On error nothing new is left. remove() removes children too.
  Result<JobCgroup> create_child(const std::string& name, const CgroupLimits& limits) const;

  // Removes the directories, their child cgroups first. If processes remain
  // they are sent SIGKILL (v2: cgroup.kill) and kFailedPrecondition says so:
  // call again once they are gone. Directories already removed are not
  // retried; OK when none is left.
  Status remove();

 private:
  CgroupVersion version_ = CgroupVersion::kV1;
  std::vector<std::string> dirs_;
};

class CgroupHierarchy {
 public:
  // A cgroup2 file system mounted at `root` means v2 there; otherwise the v1
  // controllers cpuset, memory, pids and freezer must be mounted (found in
  // /proc/self/mounts). A cgroup2 mount elsewhere (hybrid: .../unified) is
  // not used: it has no controllers when v1 holds them.
  static Result<CgroupHierarchy> detect(const std::string& root = "/sys/fs/cgroup");

  CgroupVersion version() const { return version_; }

  // v2: where systemd's Delegate=yes (or an admin) gave the agent a cgroup
  // of its own, makes it the base of the jobs' cgroups: moves process `self`
  // (the agent) into the leaf <own>/agent, since v2 hands controllers down
  // only from a cgroup that holds no process (the no-internal-process rule),
  // and enables them in <own>. Where `self` is in the root cgroup, or shares
  // its cgroup with processes it did not start (a login session that ran
  // `hpcq start`: not delegated to it), the base stays the root. v1: does
  // nothing. Returns the base (relative to the root; "/" for the root).
  Result<std::string> settle_in_own_cgroup(pid_t self);

  // "<base>/hpcq/<instance>/job-<id>": the job's cgroup below each
  // hierarchy's root (what an OCI config's cgroupsPath is relative to).
  std::string job_path(const std::string& instance, JobId id) const;

  // v1: removes what is left of the job's directories in the controllers
  // the executor does not manage (runc joins them all: cpu, devices, ...),
  // children first. Best effort; v2 has nothing more to remove.
  void remove_other_controllers(const std::string& instance, JobId id) const;

  // Where a task's device cgroup `name` (gpu_devices.h) goes, its parent
  // directories made. v1: <devices mount>/hpcq/<instance>/job-<id>/<name>
  // (removed with remove_other_controllers); kFailedPrecondition when the
  // devices controller is not mounted. v2: `task_cgroup`/<name>, below the
  // cgroup the task lives in (a bare child: no controllers are enabled for
  // it, so the task's parent keeps its processes), removed with the job's.
  Result<std::string> device_dir(const std::string& instance, JobId id,
                                 const std::string& task_cgroup, const std::string& name) const;

  // <...>/hpcq/<instance> in every hierarchy (whether or not it exists).
  std::vector<std::string> instance_dirs(const std::string& instance) const;

  // Creates job-<id> (and the parents it needs), sets the limits. Other
  // users neither list a node's jobs nor read one's usage: the parents
  // are 0711 and job-<id> is 0750, root's and `limits.group`'s (v1: also
  // <mount>/hpcq/<instance> of the controllers runc joins). A leftover
  // empty directory of the same job is reused. On error nothing new is left.
  // The parents are made ready once (mkdir, v1 cpuset's sets, v2's
  // subtree_control), not for every job; should they vanish, the job's
  // mkdir finds none and they are made again.
  Result<JobCgroup> create_job(const std::string& instance, JobId id,
                               const CgroupLimits& limits) const;

  // The cgroup create_job made for job `id`, as it is now (the directories
  // that exist): a restarted agent's hold on a job it takes back.
  JobCgroup existing_job(const std::string& instance, JobId id) const;

  // Removes the job-* directories a previous instance of the same name left
  // (v1: in every controller, those of runc and of device cgroups too),
  // except those of the jobs in `kept` (taken back: shell_record.h). Their
  // processes are killed first: the leader counts a job the new agent does
  // not run as lost, so it must not run on beside a requeued copy. Returns
  // how many directories remain.
  int remove_stale(const std::string& instance, const std::set<JobId>& kept = {}) const;

  // Removes <...>/hpcq/<instance> where it is empty, in every v1 controller
  // (runc's of image jobs too) (best effort: the shared <...>/hpcq stays,
  // another instance may be creating its directory in it).
  void remove_instance_dirs(const std::string& instance) const;

 private:
  CgroupVersion version_ = CgroupVersion::kV1;
  std::string v2_root_;
  std::string v2_base_;  // below v2_root_: "" or the agent's own cgroup ("/system.slice/...")
  std::map<std::string, std::string> v1_mounts_;  // controller -> mount point
  std::set<std::string> v1_other_mounts_;         // mount points of the other controllers
  std::string v1_devices_mount_;                  // one of those: the devices controller's

  Result<JobCgroup> create_job_once(const std::string& instance, JobId id,
                                    const CgroupLimits& limits) const;
  // create_job_once's two halves; `made_dirs`: the directories made, which
  // the caller removes unless the whole succeeds.
  Result<JobCgroup> create_v2_job(const std::string& instance, JobId id, const CgroupLimits& limits,
                                  std::vector<std::string>& made_dirs) const;
  Result<JobCgroup> create_v1_job(const std::string& instance, JobId id, const CgroupLimits& limits,
                                  std::vector<std::string>& made_dirs) const;
  // The parent directories create_job has made ready: v1, each directory
  // (an empty set); v2, the controllers enabled for its children.
  mutable std::map<std::string, std::set<std::string>> ready_parents_;
};

}  // namespace hpcq::agent
