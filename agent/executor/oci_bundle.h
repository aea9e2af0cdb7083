// The OCI runtime configuration (config.json) of one worker's container.
//
// An image job's worker runs under runc: its container's init is
// hpcq-container-shell (the job shell, linked statically so that it runs in
// any root file system), bind-mounted at kContainerShell, which starts the
// worker's tasks as the job shell does outside. The container shares the
// host's network and UTS namespaces (MPI and the hostfile see the node's own
// name and addresses) and gets its own PID, mount and IPC namespaces; its
// cgroup (cgroupsPath, below the job's) carries the worker's cpuset, memory
// limit and a pids limit; the job's working and output directories, the job
// directory and the worker's own directory are bind-mounted at the paths they
// have on the host, so every path in launch.json means the same inside. Its
// GPUs' device files are made at their host paths too.
//
// Pure; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/executor/gpu_devices.h"

namespace hpcq::agent {

inline constexpr const char* kContainerShell = "/.hpcq/shell";

struct OciContainer {
  std::string rootfs;             // absolute
  std::vector<std::string> args;  // the container's init and its arguments
  std::vector<std::string> env;   // "K=V"
  std::uint32_t uid = 0, gid = 0;
  std::vector<std::uint32_t> additional_gids;
  std::string cgroups_path;                  // e.g. "/hpcq/rank-1/job-5/worker-0"
  std::vector<int> cpus, mems;               // host ids
  std::uint64_t memory_limit_bytes = 0;      // 0: none
  std::int64_t pids_limit = 0;               // 0: none
  std::string shell_binary;                  // host path, bound read-only at kContainerShell
  std::vector<std::string> read_only_dirs;   // bound at the same path, read-only
  std::vector<std::string> writable_dirs;    // bound at the same path, read-write
  std::vector<std::string> read_only_files;  // e.g. /etc/hosts (bound where it exists)
  // Device files made in the container at their host paths and allowed in
  // its devices cgroup (the worker's GPUs); every other device is denied
  // but runc's defaults (null, zero, tty, ...).
  std::vector<DeviceFile> devices;
};

// config.json's text (OCI runtime spec 1.0.2). Bind mounts are deduplicated
// ("/" is never bound: the image is the root; nor anything under /dev, /proc
// or /sys: the container's own are used) and ordered so that a parent
// directory is mounted before what lies inside it.
std::string oci_config_json(const OciContainer& container);

}  // namespace hpcq::agent
