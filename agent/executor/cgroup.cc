#include "agent/executor/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "agent/executor/posix.h"
#include "lib/resource/cpu_list.h"

namespace hpcq::agent {
namespace {

constexpr long kCgroup2SuperMagic = 0x63677270;  // linux/magic.h CGROUP2_SUPER_MAGIC
const char* const kV1Controllers[] = {"cpuset", "memory", "pids", "freezer"};
// v2: enabled for the children of every directory the agent makes. cpu is
// used where the kernel has it (cpu.weight), the others where a limit needs
// them.
const std::vector<std::string> kV2Controllers = {"cpuset", "cpu", "memory", "pids"};
// cpu.weight per CPU of a cgroup's cpuset: the kernel's default weight (100)
// for each, within cpu.weight's range [1, 10000].
constexpr std::size_t kCpuWeightPerCpu = 100;
constexpr std::size_t kMaxCpuWeight = 10000;
// v2: the leaf of its own cgroup the agent moves into (settle_in_own_cgroup).
constexpr const char* kAgentLeaf = "agent";

// Cgroup files take one write(2) per value; a short or failed write is an error.
Status write_file(const std::string& path, const std::string& value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return internal_error("open " + path + ": " + errno_text(errno));
  ssize_t n = write(fd, value.data(), value.size());
  int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return internal_error("write '" + value + "' to " + path + ": " +
                          (n < 0 ? errno_text(err) : std::string("short write")));
  }
  return Status::ok();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// mkdir that accepts an existing directory; `created` says whether it is new.
Status make_dir(const std::string& path, bool* created) {
  *created = false;
  if (mkdir(path.c_str(), 0755) == 0) {
    *created = true;
    return Status::ok();
  }
  if (errno == EEXIST) return Status::ok();
  return internal_error("mkdir " + path + ": " + errno_text(errno));
}

// <...>/hpcq and <...>/hpcq/<instance>: entered, never listed, by others,
// so that no user learns which jobs a node runs (issue 45 item 12). Set
// on directories an older agent made too.
Status make_parent_dir(const std::string& path, bool* created) {
  HPCQ_RETURN_IF_ERROR(make_dir(path, created));
  if (chmod(path.c_str(), 0711) != 0) {
    return internal_error("chmod " + path + ": " + errno_text(errno));
  }
  return Status::ok();
}

// A job's own directory: root's and the job's group's, so that other users
// do not read its usage (memory.current, cpuacct) by guessing its id.
Status restrict_to_group(const std::string& dir, gid_t group) {
  if (chown(dir.c_str(), static_cast<uid_t>(-1), group) != 0 || chmod(dir.c_str(), 0750) != 0) {
    return internal_error("chown/chmod " + dir + ": " + errno_text(errno));
  }
  return Status::ok();
}

// A new v1 cpuset child has empty cpus/mems and refuses tasks: give every
// directory we pass through its parent's sets unless it already has some.
Status fill_v1_cpuset(const std::string& dir) {
  const std::string parent = std::filesystem::path(dir).parent_path();
  for (const char* file : {"cpuset.cpus", "cpuset.mems"}) {
    if (!trim(read_whole(dir + "/" + file)).empty()) continue;
    std::string value = trim(read_whole(parent + "/" + file));
    HPCQ_RETURN_IF_ERROR(write_file(dir + "/" + file, value));
  }
  return Status::ok();
}

std::vector<pid_t> read_procs(const std::string& dir) {
  std::vector<pid_t> pids;
  std::istringstream in(read_whole(dir + "/cgroup.procs"));
  long pid = 0;
  while (in >> pid) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

// `dir` and its descendant cgroups, children after their parent.
std::vector<std::string> cgroup_tree(const std::string& dir) {
  std::vector<std::string> tree{dir};
  for (std::size_t i = 0; i < tree.size(); ++i) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(tree[i], ec)) {
      if (entry.is_directory(ec)) tree.push_back(entry.path());
    }
  }
  return tree;
}

// Enables `wanted` controllers for the children of `dir` (v2). Those in
// `required` must be available; the others are enabled when they are.
// `enabled_out`, when given, gets the controllers enabled after.
Status enable_v2_controllers(const std::string& dir, const std::vector<std::string>& wanted,
                             const std::set<std::string>& required,
                             std::set<std::string>* enabled_out = nullptr) {
  std::istringstream available_in(read_whole(dir + "/cgroup.controllers"));
  std::set<std::string> available;
  for (std::string c; available_in >> c;) available.insert(c);
  std::istringstream enabled_in(read_whole(dir + "/cgroup.subtree_control"));
  std::set<std::string> enabled;
  for (std::string c; enabled_in >> c;) enabled.insert(c);
  for (const std::string& c : wanted) {
    if (enabled.count(c)) continue;
    if (!available.count(c)) {
      if (!required.count(c)) continue;
      return failed_precondition("cgroup v2 controller '" + c + "' is not available in " + dir +
                                 "/cgroup.controllers");
    }
    HPCQ_RETURN_IF_ERROR(write_file(dir + "/cgroup.subtree_control", "+" + c));
    enabled.insert(c);
  }
  if (enabled_out) *enabled_out = std::move(enabled);
  return Status::ok();
}

// A cgroup's share of the CPUs it shares with others (--oversubscribe):
// in proportion to its cpuset (v2 cpu.weight). Nothing where the kernel has
// no cpu controller or no cpuset was given (the default weight stays).
Status write_v2_cpu_weight(const std::string& dir, const std::vector<int>& cpus) {
  if (cpus.empty() || access((dir + "/cpu.weight").c_str(), F_OK) != 0) return Status::ok();
  const std::size_t weight = std::min(kMaxCpuWeight, kCpuWeightPerCpu * cpus.size());
  return write_file(dir + "/cpu.weight", std::to_string(weight));
}

// The directories a creation made: removed again, newest first, unless it
// succeeded (kept).
struct MadeDirs {
  std::vector<std::string> dirs;
  bool kept = false;
  ~MadeDirs() {
    if (kept) return;
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) rmdir(it->c_str());
  }
};

// The v2 controllers a cgroup with these limits needs enabled in its parent.
std::set<std::string> required_v2_controllers(const CgroupLimits& limits) {
  std::set<std::string> required;
  if (!limits.cpus.empty() || !limits.mems.empty()) required.insert("cpuset");
  if (limits.memory_bytes > 0) required.insert("memory");
  return required;
}

}  // namespace

Status JobCgroup::add_process(pid_t pid) const {
  for (const std::string& dir : dirs_) {
    HPCQ_RETURN_IF_ERROR(write_file(dir + "/cgroup.procs", std::to_string(pid)));
  }
  return Status::ok();
}

int JobCgroup::oom_kills() const {
  // v2's memory.events counts the subtree; v1 counts each cgroup alone.
  const char* file = version_ == CgroupVersion::kV2 ? "memory.events" : "memory.oom_control";
  int kills = 0;
  auto count_in = [&](const std::string& dir) {
    std::istringstream in(read_whole(dir + "/" + file));
    std::string key;
    long long value = 0;
    while (in >> key >> value) {
      if (key == "oom_kill") kills += static_cast<int>(value);
    }
  };
  for (const std::string& dir : dirs_) {
    if (!std::filesystem::exists(dir + "/" + file)) continue;
    count_in(dir);
    if (version_ == CgroupVersion::kV2) continue;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec)) count_in(it->path().string());
    }
  }
  return kills;
}

namespace {

// The first directory's value of a memory file (v1 has it in the memory
// controller's directory only); 0 where none has it.
std::uint64_t read_memory_file(const std::vector<std::string>& dirs, const char* file) {
  for (const std::string& dir : dirs) {
    const std::string text = read_whole(dir + "/" + file);
    if (!text.empty()) return std::strtoull(text.c_str(), nullptr, 10);
  }
  return 0;
}

}  // namespace

std::uint64_t JobCgroup::memory_peak_bytes() const {
  return read_memory_file(
      dirs_, version_ == CgroupVersion::kV2 ? "memory.peak" : "memory.max_usage_in_bytes");
}

std::uint64_t JobCgroup::memory_bytes() const {
  return read_memory_file(
      dirs_, version_ == CgroupVersion::kV2 ? "memory.current" : "memory.usage_in_bytes");
}

std::vector<pid_t> JobCgroup::pids() const {
  std::set<pid_t> all;
  for (const std::string& dir : dirs_) {
    for (const std::string& cgroup : cgroup_tree(dir)) {
      for (pid_t p : read_procs(cgroup)) all.insert(p);
    }
  }
  return {all.begin(), all.end()};
}

Result<JobCgroup> JobCgroup::create_child(const std::string& name,
                                          const CgroupLimits& limits) const {
  MadeDirs made;
  std::vector<std::string> children;
  for (const std::string& parent : dirs_) {
    const std::string dir = parent + "/" + name;
    if (version_ == CgroupVersion::kV2) {
      HPCQ_RETURN_IF_ERROR(
          enable_v2_controllers(parent, kV2Controllers, required_v2_controllers(limits)));
    }
    bool created = false;
    Status s = make_dir(dir, &created);
    if (!s.is_ok()) return s;
    if (created) made.dirs.push_back(dir);
    const bool v1 = version_ == CgroupVersion::kV1;
    const bool has_cpuset = !v1 || std::filesystem::exists(dir + "/cpuset.cpus");
    const bool has_memory =
        std::filesystem::exists(dir + (v1 ? "/memory.limit_in_bytes" : "/memory.max"));
    if (has_cpuset) {
      if (!limits.cpus.empty())
        s = write_file(dir + "/cpuset.cpus", resource::format_cpu_list(limits.cpus));
      if (s.is_ok() && !limits.mems.empty()) {
        s = write_file(dir + "/cpuset.mems", resource::format_cpu_list(limits.mems));
      }
      if (s.is_ok() && v1) s = fill_v1_cpuset(dir);
    }
    if (s.is_ok() && has_memory && limits.memory_bytes > 0) {
      s = write_file(dir + (v1 ? "/memory.limit_in_bytes" : "/memory.max"),
                     std::to_string(limits.memory_bytes));
    }
    if (s.is_ok() && !v1) s = write_v2_cpu_weight(dir, limits.cpus);
    if (!s.is_ok()) return s;
    children.push_back(dir);
  }
  made.kept = true;
  return JobCgroup(version_, std::move(children));
}

Status JobCgroup::remove() {
  // Most jobs' cgroups are empty and have no children (workers, steps): one
  // rmdir each, without listing them (their dozens of control files).
  std::erase_if(dirs_,
                [](const std::string& dir) { return rmdir(dir.c_str()) == 0 || errno == ENOENT; });
  if (dirs_.empty()) return Status::ok();
  std::vector<pid_t> left = pids();
  if (!left.empty()) {
    // Only a process moved in from outside the job's PID namespace can
    // outlive the namespace's init; it belongs to the job all the same.
    if (version_ == CgroupVersion::kV2 && write_file(dirs_.front() + "/cgroup.kill", "1").is_ok()) {
      // cgroup.kill (Linux 5.14) also catches processes forking meanwhile.
    } else {
      for (pid_t p : left) kill(p, SIGKILL);
    }
    return failed_precondition(std::to_string(left.size()) + " process(es) left in " +
                               dirs_.front());
  }
  std::vector<std::string> remaining;
  Status status;
  for (const std::string& dir : dirs_) {
    const std::vector<std::string> tree = cgroup_tree(dir);
    for (auto child = tree.rbegin(); child + 1 != tree.rend(); ++child) rmdir(child->c_str());
    if (rmdir(dir.c_str()) == 0 || errno == ENOENT) continue;
    int err = errno;
    remaining.push_back(dir);
    // EBUSY right after the last exit: the kernel has not yet noticed the
    // cgroup is unpopulated (v2); a retry succeeds.
    if (status.is_ok()) {
      status = err == EBUSY ? failed_precondition("rmdir " + dir + ": " + errno_text(err))
                            : internal_error("rmdir " + dir + ": " + errno_text(err));
    }
  }
  dirs_ = std::move(remaining);
  return status;
}

Result<CgroupHierarchy> CgroupHierarchy::detect(const std::string& root) {
  CgroupHierarchy h;
  struct statfs fs {};
  if (statfs(root.c_str(), &fs) != 0) {
    return failed_precondition("no cgroup file system: statfs " + root + ": " + errno_text(errno));
  }
  if (static_cast<long>(fs.f_type) == kCgroup2SuperMagic) {
    h.version_ = CgroupVersion::kV2;
    h.v2_root_ = root;
    return h;
  }
  std::ifstream mounts("/proc/self/mounts");
  std::string line;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string source, target, type, options;
    if (!(fields >> source >> target >> type >> options)) continue;
    if (type == "cgroup2") {
      h.v1_other_mounts_.insert(target);  // hybrid: runc joins .../unified too
      continue;
    }
    if (type != "cgroup") continue;
    std::istringstream opts(options);
    bool managed = false;
    for (std::string opt; std::getline(opts, opt, ',');) {
      if (opt == "devices") h.v1_devices_mount_ = target;
      for (const char* c : kV1Controllers) {
        if (opt == c && !h.v1_mounts_.count(c)) h.v1_mounts_[c] = target;
        if (opt == c) managed = true;
      }
    }
    if (!managed) h.v1_other_mounts_.insert(target);
  }
  for (const char* c : kV1Controllers) {
    if (!h.v1_mounts_.count(c)) {
      return failed_precondition(root + " is not cgroup v2 and the cgroup v1 controller '" + c +
                                 "' is not mounted (/proc/self/mounts)");
    }
  }
  h.version_ = CgroupVersion::kV1;
  return h;
}

Result<std::string> CgroupHierarchy::settle_in_own_cgroup(pid_t self) {
  if (version_ != CgroupVersion::kV2) return std::string("/");
  std::string own;
  std::istringstream lines(read_whole("/proc/" + std::to_string(self) + "/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("0::", 0) == 0) own = line.substr(3);
  }
  if (own.empty()) {
    return failed_precondition("/proc/" + std::to_string(self) + "/cgroup has no cgroup v2 line");
  }
  if (own == "/") return own;
  const std::string leaf = std::string("/") + kAgentLeaf;
  if (own.size() > leaf.size() && own.compare(own.size() - leaf.size(), leaf.size(), leaf) == 0) {
    v2_base_ = own.substr(0, own.size() - leaf.size());  // settled already (a re-exec)
    return v2_base_;
  }
  const std::string dir = v2_root_ + own;
  for (pid_t pid : read_procs(dir)) {
    if (pid != self && parent_of(pid) != self) return std::string("/");  // not delegated to us
  }
  bool created = false;
  HPCQ_RETURN_IF_ERROR(make_dir(dir + leaf, &created));
  HPCQ_RETURN_IF_ERROR(write_file(dir + leaf + "/cgroup.procs", std::to_string(self)));
  Status enabled = enable_v2_controllers(dir, kV2Controllers, {});
  if (!enabled.is_ok()) {
    // Something else holds processes there after all: go back, jobs under the root.
    (void)write_file(dir + "/cgroup.procs", std::to_string(self));
    if (created) rmdir((dir + leaf).c_str());
    return Status(enabled.code(),
                  "cgroup " + own + " cannot be the jobs' parent: " + enabled.message());
  }
  v2_base_ = own;
  return v2_base_;
}

std::string CgroupHierarchy::job_path(const std::string& instance, JobId id) const {
  return v2_base_ + "/hpcq/" + instance + "/job-" + std::to_string(id);
}

void CgroupHierarchy::remove_other_controllers(const std::string& instance, JobId id) const {
  for (const std::string& mount : v1_other_mounts_) {
    const std::string dir = mount + job_path(instance, id);
    if (!std::filesystem::exists(dir)) continue;
    const std::vector<std::string> tree = cgroup_tree(dir);
    for (auto it = tree.rbegin(); it != tree.rend(); ++it) rmdir(it->c_str());
  }
}

Result<std::string> CgroupHierarchy::device_dir(const std::string& instance, JobId id,
                                                const std::string& task_cgroup,
                                                const std::string& name) const {
  if (version_ == CgroupVersion::kV2) return task_cgroup + "/" + name;
  if (v1_devices_mount_.empty()) {
    return failed_precondition(
        "GPU isolation needs the cgroup v1 devices controller, which is not mounted");
  }
  std::string dir = v1_devices_mount_;
  for (const std::string& part : {std::string("hpcq"), instance, "job-" + std::to_string(id)}) {
    dir += "/" + part;
    bool created = false;
    HPCQ_RETURN_IF_ERROR(make_parent_dir(dir, &created));
  }
  return dir + "/" + name;
}

std::vector<std::string> CgroupHierarchy::instance_dirs(const std::string& instance) const {
  if (version_ == CgroupVersion::kV2) return {v2_root_ + v2_base_ + "/hpcq/" + instance};
  std::vector<std::string> dirs;
  for (const char* c : kV1Controllers) dirs.push_back(v1_mounts_.at(c) + "/hpcq/" + instance);
  return dirs;
}

Result<JobCgroup> CgroupHierarchy::create_job(const std::string& instance, JobId id,
                                              const CgroupLimits& limits) const {
  auto job = create_job_once(instance, id, limits);
  if (job.is_ok() || job.status().code() != Code::kNotFound) return job;
  // A parent made ready for an earlier job is gone (removed behind us).
  ready_parents_.clear();
  job = create_job_once(instance, id, limits);
  if (!job.is_ok() && job.status().code() == Code::kNotFound) {
    return internal_error(job.status().message());
  }
  return job;
}

namespace {

// The job's own directory: kNotFound when its parent is missing.
Status make_job_dir(const std::string& dir, gid_t group, std::vector<std::string>& made) {
  if (mkdir(dir.c_str(), 0750) == 0) {
    made.push_back(dir);
  } else if (errno != EEXIST) {
    return Status(errno == ENOENT ? Code::kNotFound : Code::kInternal,
                  "mkdir " + dir + ": " + errno_text(errno));
  }
  return restrict_to_group(dir, group);
}

}  // namespace

Result<JobCgroup> CgroupHierarchy::create_job_once(const std::string& instance, JobId id,
                                                   const CgroupLimits& limits) const {
  MadeDirs made;
  auto job = version_ == CgroupVersion::kV2 ? create_v2_job(instance, id, limits, made.dirs)
                                            : create_v1_job(instance, id, limits, made.dirs);
  made.kept = job.is_ok();
  return job;
}

Result<JobCgroup> CgroupHierarchy::create_v2_job(const std::string& instance, JobId id,
                                                 const CgroupLimits& limits,
                                                 std::vector<std::string>& made_dirs) const {
  const std::string job = "job-" + std::to_string(id);
  bool created = false;
  const std::set<std::string> required = required_v2_controllers(limits);
  std::string dir = v2_root_ + v2_base_;
  for (const std::string& part : {std::string("hpcq"), instance, job}) {
    auto ready = ready_parents_.find(dir);
    if (ready == ready_parents_.end() || !std::includes(ready->second.begin(), ready->second.end(),
                                                        required.begin(), required.end())) {
      std::set<std::string> enabled;
      HPCQ_RETURN_IF_ERROR(enable_v2_controllers(dir, kV2Controllers, required, &enabled));
      ready_parents_[dir] = std::move(enabled);
    }
    dir += "/" + part;
    if (part == job) {
      HPCQ_RETURN_IF_ERROR(make_job_dir(dir, limits.group, made_dirs));
    } else if (!ready_parents_.count(dir)) {
      HPCQ_RETURN_IF_ERROR(make_parent_dir(dir, &created));
      if (created) made_dirs.push_back(dir);
    }
  }
  // An empty cpuset in v2 means "the parent's": only write what is given.
  if (!limits.cpus.empty()) {
    HPCQ_RETURN_IF_ERROR(write_file(dir + "/cpuset.cpus", resource::format_cpu_list(limits.cpus)));
  }
  if (!limits.mems.empty()) {
    HPCQ_RETURN_IF_ERROR(write_file(dir + "/cpuset.mems", resource::format_cpu_list(limits.mems)));
  }
  if (limits.memory_bytes > 0) {
    HPCQ_RETURN_IF_ERROR(write_file(dir + "/memory.max", std::to_string(limits.memory_bytes)));
  }
  if (limits.pids_max > 0) {
    HPCQ_RETURN_IF_ERROR(write_file(dir + "/pids.max", std::to_string(limits.pids_max)));
  }
  HPCQ_RETURN_IF_ERROR(write_v2_cpu_weight(dir, limits.cpus));
  return JobCgroup(CgroupVersion::kV2, {dir});
}

Result<JobCgroup> CgroupHierarchy::create_v1_job(const std::string& instance, JobId id,
                                                 const CgroupLimits& limits,
                                                 std::vector<std::string>& made_dirs) const {
  const std::string job = "job-" + std::to_string(id);
  bool created = false;
  // <mount>/hpcq/<instance>, made ready once (a cpuset given its parent's sets).
  auto make_instance_dir = [&](const std::string& mount, bool cpuset) -> Result<std::string> {
    std::string dir = mount;
    for (const std::string& part : {std::string("hpcq"), instance}) {
      dir += "/" + part;
      if (ready_parents_.count(dir)) continue;
      HPCQ_RETURN_IF_ERROR(make_parent_dir(dir, &created));
      if (created) made_dirs.push_back(dir);
      if (cpuset) HPCQ_RETURN_IF_ERROR(fill_v1_cpuset(dir));
      ready_parents_[dir];
    }
    return dir;
  };
  // Each controller's directory with its limit.
  auto make_controller_dir = [&](const std::string& controller) -> Result<std::string> {
    auto parent = make_instance_dir(v1_mounts_.at(controller), controller == "cpuset");
    if (!parent.is_ok()) return parent.status();
    const std::string dir = *parent + "/" + job;
    Status s = make_job_dir(dir, limits.group, made_dirs);
    if (s.is_ok() && controller == "cpuset") {
      if (!limits.cpus.empty()) {
        s = write_file(dir + "/cpuset.cpus", resource::format_cpu_list(limits.cpus));
      }
      if (s.is_ok() && !limits.mems.empty()) {
        s = write_file(dir + "/cpuset.mems", resource::format_cpu_list(limits.mems));
      }
      // Whatever was not given.
      if (s.is_ok() && (limits.cpus.empty() || limits.mems.empty())) s = fill_v1_cpuset(dir);
    } else if (s.is_ok() && controller == "memory" && limits.memory_bytes > 0) {
      s = write_file(dir + "/memory.limit_in_bytes", std::to_string(limits.memory_bytes));
    } else if (s.is_ok() && controller == "pids" && limits.pids_max > 0) {
      s = write_file(dir + "/pids.max", std::to_string(limits.pids_max));
    }
    if (!s.is_ok()) return s;
    return dir;
  };
  std::vector<std::string> dirs;
  for (const char* c : kV1Controllers) {
    auto dir = make_controller_dir(c);
    if (!dir.is_ok()) return dir.status();
    dirs.push_back(*dir);
  }
  // runc puts image jobs in every hierarchy: theirs are not listed either.
  for (const std::string& mount : v1_other_mounts_) {
    auto parent = make_instance_dir(mount, false);
    if (!parent.is_ok()) return parent.status();
  }
  return JobCgroup(CgroupVersion::kV1, std::move(dirs));
}

JobCgroup CgroupHierarchy::existing_job(const std::string& instance, JobId id) const {
  std::vector<std::string> dirs;
  for (const std::string& base : instance_dirs(instance)) {
    const std::string dir = base + "/job-" + std::to_string(id);
    if (access(dir.c_str(), F_OK) == 0) dirs.push_back(dir);
  }
  return JobCgroup(version_, std::move(dirs));
}

int CgroupHierarchy::remove_stale(const std::string& instance, const std::set<JobId>& kept) const {
  std::set<std::string> kept_names;
  for (JobId id : kept) kept_names.insert("job-" + std::to_string(id));
  std::vector<std::string> stale;
  // v1: runc's and the tasks' device cgroups lie in the other controllers too.
  std::vector<std::string> bases = instance_dirs(instance);
  for (const std::string& mount : v1_other_mounts_) bases.push_back(mount + "/hpcq/" + instance);
  for (const std::string& base : bases) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(base, ec)) {
      const std::string name = entry.path().filename();
      if (name.rfind("job-", 0) == 0 && entry.is_directory() && !kept_names.count(name)) {
        stale.push_back(entry.path());
      }
    }
  }
  // SIGKILL until empty (a fork in flight may add a process once), for at
  // most about a second.
  for (int round = 0; round < 100; ++round) {
    bool any = false;
    for (const std::string& dir : stale) {
      for (const std::string& cgroup : cgroup_tree(dir)) {
        for (pid_t pid : read_procs(cgroup)) {
          any = true;
          kill(pid, SIGKILL);
        }
      }
    }
    if (!any) break;
    usleep(10'000);
  }
  int left = 0;
  for (const std::string& dir : stale) {
    const std::vector<std::string> tree = cgroup_tree(dir);
    for (auto child = tree.rbegin(); child + 1 != tree.rend(); ++child) rmdir(child->c_str());
    if (rmdir(dir.c_str()) != 0 && errno != ENOENT) ++left;
  }
  return left;
}

void CgroupHierarchy::remove_instance_dirs(const std::string& instance) const {
  ready_parents_.clear();
  for (const std::string& dir : instance_dirs(instance)) rmdir(dir.c_str());
  // runc made the instance's directory in the controllers hpcq does not use
  // (blkio, cpu, devices, ...) for image jobs' containers.
  for (const std::string& mount : v1_other_mounts_) rmdir((mount + "/hpcq/" + instance).c_str());
}

}  // namespace hpcq::agent
