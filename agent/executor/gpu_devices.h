// The device files of a node's GPUs, and the cgroup rules that keep a task
// from opening the GPUs that are not its own.
//
// Each GPU of the node's topology (resource::Gpu, by id) has one or more
// device files: /dev/nvidia<minor> for NVIDIA's driver (the minor from
// /proc/driver/nvidia/gpus/<PCI bus id>/information), /dev/dri/card<N> and
// /dev/dri/renderD<N> for a DRM driver (from /sys/bus/pci/devices/<PCI bus
// id>/drm). An admin may name them instead, as Slurm's gres.conf File= does
// ([agent] gpu_devices in hpcq.toml(5)); an emulated node (a synthetic or XML
// topology) has none unless named. A node's shared control files
// (/dev/nvidiactl, /dev/nvidia-uvm, ...) are opened by every GPU program:
// they are never denied, and an image job with GPUs gets them too.
//
// A task's cgroup denies the device files of every GPU of the node that is
// not the task's: v1 with devices.deny in the devices controller, v2 with a
// BPF_PROG_TYPE_CGROUP_DEVICE program attached to the task's cgroup
// (BPF_F_ALLOW_MULTI, so an ancestor's program, systemd's or runc's, still
// applies too). Everything else stays as the parent allows.
//
// Threads: plain values and functions; the kernel serialises the writes.
// Errors: kInvalidArgument for a named file that is not a device (naming it);
// kInternal for a system call that failed (naming it and errno).
#pragma once

#include <string>
#include <vector>

#include "lib/core/status.h"
#include "lib/resource/topology.h"

namespace hpcq::agent {

struct DeviceFile {
  std::string path;
  char type = 'c';  // 'c' character, 'b' block
  unsigned major = 0, minor = 0;
  bool operator==(const DeviceFile&) const = default;
};

struct GpuDevices {
  std::vector<std::vector<DeviceFile>> by_gpu;  // by GPU id; empty: none known
  std::vector<DeviceFile> shared;               // control files every GPU program opens
  bool empty() const { return by_gpu.empty(); }
};

// The device file at `path` (stat()ed).
Result<DeviceFile> device_file(const std::string& path);

// The admin's list: one entry per GPU id, each one or more paths. The number
// of entries must be the topology's GPU count.
Result<GpuDevices> named_gpu_devices(const std::vector<std::vector<std::string>>& paths,
                                     int num_gpus);

// Found from each GPU's PCI bus id under `root` ("" on a real node; a test's
// tree otherwise): NVIDIA's files, else DRM's. A GPU with no file found
// leaves the whole result empty (no isolation is better said than half of it:
// the caller reports it).
GpuDevices discover_gpu_devices(const resource::NodeTopology& topology,
                                const std::string& root = "");

// The files of the node's GPUs that are not in `mine` (GPU ids).
std::vector<DeviceFile> denied_devices(const GpuDevices& devices, const std::vector<int>& mine);

// Makes `dir` a cgroup (mkdir; it may exist) in which `denied` cannot be
// opened (read, written or mknod'ed). v1: `dir` is in the devices hierarchy;
// v2: a BPF program on `dir`.
Status make_device_cgroup(const std::string& dir, bool v2, const std::vector<DeviceFile>& denied);

}  // namespace hpcq::agent
