#include "agent/executor/oci_bundle.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "lib/resource/cpu_list.h"

namespace hpcq::agent {
namespace {

using nlohmann::json;

// The container has its own /dev, /proc and /sys: a path there (an output
// file of /dev/null) means the container's own, never a bind of the host's.
bool kernel_path(const std::string& path) {
  for (const char* root : {"/dev", "/proc", "/sys"}) {
    const std::string r = root;
    if (path == r || path.rfind(r + "/", 0) == 0) return true;
  }
  return false;
}

int depth(const std::string& path) {
  return static_cast<int>(std::count(path.begin(), path.end(), '/'));
}

json bind_mount(const std::string& destination, const std::string& source, bool writable) {
  return {{"destination", destination},
          {"type", "bind"},
          {"source", source},
          {"options", {"rbind", writable ? "rw" : "ro", "nosuid", "nodev"}}};
}

// The container's mounts: the kernel's file systems every container gets
// (runc's defaults), the job's directories and files, and the shell.
json mounts_of(const OciContainer& c) {
  // The kernel's file systems every container gets (runc's defaults).
  json mounts = json::array({
      {{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
      {{"destination", "/dev"},
       {"type", "tmpfs"},
       {"source", "tmpfs"},
       {"options", {"nosuid", "strictatime", "mode=755", "size=65536k"}}},
      {{"destination", "/dev/pts"},
       {"type", "devpts"},
       {"source", "devpts"},
       {"options", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}}},
      {{"destination", "/dev/shm"},
       {"type", "tmpfs"},
       {"source", "shm"},
       {"options", {"nosuid", "noexec", "nodev", "mode=1777"}}},
      {{"destination", "/dev/mqueue"},
       {"type", "mqueue"},
       {"source", "mqueue"},
       {"options", {"nosuid", "noexec", "nodev"}}},
      {{"destination", "/sys"},
       {"type", "sysfs"},
       {"source", "sysfs"},
       {"options", {"nosuid", "noexec", "nodev", "ro"}}},
      {{"destination", "/sys/fs/cgroup"},
       {"type", "cgroup"},
       {"source", "cgroup"},
       {"options", {"nosuid", "noexec", "nodev", "relatime", "ro"}}},
      {{"destination", "/tmp"},
       {"type", "tmpfs"},
       {"source", "tmpfs"},
       {"options", {"nosuid", "nodev", "mode=1777"}}},
  });
  // Directory binds: writable wins over read-only for the same path; parents
  // first, so that a bind inside another one is not hidden by it.
  std::map<std::string, bool> dirs;
  for (const std::string& d : c.read_only_dirs) dirs.emplace(d, false);
  for (const std::string& d : c.writable_dirs) dirs[d] = true;
  std::vector<std::pair<std::string, bool>> ordered(dirs.begin(), dirs.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return depth(a.first) < depth(b.first); });
  for (const auto& [dir, writable] : ordered) {
    if (dir.empty() || dir == "/" || dir[0] != '/' || kernel_path(dir)) continue;
    mounts.push_back(bind_mount(dir, dir, writable));
  }
  for (const std::string& f : c.read_only_files) mounts.push_back(bind_mount(f, f, false));
  mounts.push_back(bind_mount(kContainerShell, c.shell_binary, false));
  return mounts;
}

// Its device files (the task's GPUs), and its cgroup's limits: devices,
// cpuset, memory, pids.
std::pair<json, json> devices_and_resources_of(const OciContainer& c) {
  json resources = {{"devices", json::array({{{"allow", false}, {"access", "rwm"}}})}};
  json devices = json::array();
  for (const DeviceFile& d : c.devices) {
    const std::string type(1, d.type);
    devices.push_back({{"path", d.path},
                       {"type", type},
                       {"major", d.major},
                       {"minor", d.minor},
                       {"fileMode", 0666},
                       {"uid", 0},
                       {"gid", 0}});
    resources["devices"].push_back({{"allow", true},
                                    {"type", type},
                                    {"major", d.major},
                                    {"minor", d.minor},
                                    {"access", "rwm"}});
  }
  if (!c.cpus.empty() || !c.mems.empty()) {
    resources["cpu"] = json::object();
    if (!c.cpus.empty()) resources["cpu"]["cpus"] = resource::format_cpu_list(c.cpus);
    if (!c.mems.empty()) resources["cpu"]["mems"] = resource::format_cpu_list(c.mems);
  }
  if (c.memory_limit_bytes > 0) resources["memory"] = {{"limit", c.memory_limit_bytes}};
  if (c.pids_limit > 0) resources["pids"] = {{"limit", c.pids_limit}};

  return {devices, resources};
}

}  // namespace

std::string oci_config_json(const OciContainer& c) {
  const json mounts = mounts_of(c);
  const auto [devices, resources] = devices_and_resources_of(c);
  json user = {{"uid", c.uid}, {"gid", c.gid}};
  if (!c.additional_gids.empty()) user["additionalGids"] = c.additional_gids;
  const json no_capabilities = json::array();
  json config = {
      {"ociVersion", "1.0.2"},
      {"process",
       {{"terminal", false},
        {"user", user},
        {"args", c.args},
        {"env", c.env},
        {"cwd", "/"},
        {"noNewPrivileges", true},
        {"capabilities",
         {{"bounding", no_capabilities},
          {"effective", no_capabilities},
          {"permitted", no_capabilities},
          {"ambient", no_capabilities}}}}},
      {"root", {{"path", c.rootfs}, {"readonly", true}}},
      {"mounts", mounts},
      {"linux",
       {{"namespaces", json::array({{{"type", "pid"}}, {{"type", "mount"}}, {{"type", "ipc"}}})},
        {"cgroupsPath", c.cgroups_path},
        {"devices", devices},
        {"resources", resources},
        {"maskedPaths",
         {"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
          "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"}},
        {"readonlyPaths",
         {"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
          "/proc/sysrq-trigger"}}}},
  };
  return config.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace hpcq::agent
