#include "agent/executor/gpu_devices.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/executor/posix.h"

namespace hpcq::agent {
namespace {

namespace fs = std::filesystem;

// NVIDIA's per-GPU file: "Device Minor: 3" in the driver's information file.
std::string nvidia_device(const std::string& root, const std::string& pci) {
  std::ifstream in(root + "/proc/driver/nvidia/gpus/" + pci + "/information");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Device Minor:", 0) != 0) continue;
    std::istringstream value(line.substr(std::strlen("Device Minor:")));
    int minor = -1;
    if (value >> minor && minor >= 0) return "/dev/nvidia" + std::to_string(minor);
  }
  return "";
}

// DRM's: the card and render nodes the PCI device has in sysfs.
std::vector<std::string> drm_devices(const std::string& root, const std::string& pci) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root + "/sys/bus/pci/devices/" + pci + "/drm", ec)) {
    const std::string name = e.path().filename();
    if (name.rfind("card", 0) == 0 || name.rfind("renderD", 0) == 0) {
      paths.push_back("/dev/dri/" + name);
    }
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// The program: r2 = device type, r3 = major, r4 = minor; for each denied
// file, if all three match return 0 (refuse); at the end return 1 (allow).
std::vector<bpf_insn> device_program(const std::vector<DeviceFile>& denied) {
  auto insn = [](std::uint8_t code, std::uint8_t dst, std::uint8_t src, std::int16_t off,
                 std::int32_t imm) {
    bpf_insn i{};
    i.code = code;
    i.dst_reg = dst & 0xf;
    i.src_reg = src & 0xf;
    i.off = off;
    i.imm = imm;
    return i;
  };
  // struct bpf_cgroup_dev_ctx { u32 access_type (access << 16 | type); u32 major; u32 minor; }
  std::vector<bpf_insn> p = {
      insn(BPF_LDX | BPF_W | BPF_MEM, BPF_REG_2, BPF_REG_1, 0, 0),
      insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff),
      insn(BPF_LDX | BPF_W | BPF_MEM, BPF_REG_3, BPF_REG_1, 4, 0),
      insn(BPF_LDX | BPF_W | BPF_MEM, BPF_REG_4, BPF_REG_1, 8, 0),
  };
  for (const DeviceFile& d : denied) {
    const std::int32_t type = d.type == 'b' ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR;
    p.push_back(insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_2, 0, 4, type));
    p.push_back(
        insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_3, 0, 3, static_cast<std::int32_t>(d.major)));
    p.push_back(
        insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_4, 0, 2, static_cast<std::int32_t>(d.minor)));
    p.push_back(insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0));
    p.push_back(insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  }
  p.push_back(insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1));
  p.push_back(insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  return p;
}

Status attach_device_program(const std::string& dir, const std::vector<DeviceFile>& denied) {
  const std::vector<bpf_insn> program = device_program(denied);
  static const char kLicense[] = "GPL";  // the verifier's requirement for some helpers; none used
  std::string log(4096, '\0');
  bpf_attr load{};
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insn_cnt = static_cast<std::uint32_t>(program.size());
  load.insns = reinterpret_cast<std::uint64_t>(program.data());
  load.license = reinterpret_cast<std::uint64_t>(kLicense);
  load.log_level = 1;
  load.log_size = static_cast<std::uint32_t>(log.size());
  load.log_buf = reinterpret_cast<std::uint64_t>(log.data());
  const int prog = static_cast<int>(syscall(SYS_bpf, BPF_PROG_LOAD, &load, sizeof load));
  if (prog < 0) {
    const int e = errno;
    log.resize(std::strlen(log.c_str()));
    return internal_error("loading the device program for " + dir + ": " + errno_text(e) +
                          (log.empty() ? "" : " (" + log.substr(0, 200) + ")"));
  }
  const int cgroup = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cgroup < 0) {
    const int e = errno;
    close(prog);
    return internal_error("open " + dir + ": " + errno_text(e));
  }
  bpf_attr attach{};
  attach.target_fd = static_cast<std::uint32_t>(cgroup);
  attach.attach_bpf_fd = static_cast<std::uint32_t>(prog);
  attach.attach_type = BPF_CGROUP_DEVICE;
  attach.attach_flags = BPF_F_ALLOW_MULTI;
  const long rc = syscall(SYS_bpf, BPF_PROG_ATTACH, &attach, sizeof attach);
  const int e = errno;
  // The attachment holds the program for as long as the cgroup lives.
  close(cgroup);
  close(prog);
  if (rc != 0)
    return internal_error("attaching the device program to " + dir + ": " + errno_text(e));
  return Status::ok();
}

}  // namespace

Result<DeviceFile> device_file(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return invalid_argument("GPU device " + path + ": " + errno_text(errno));
  }
  if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return invalid_argument("GPU device " + path + " is not a device file");
  }
  return DeviceFile{path, S_ISBLK(st.st_mode) ? 'b' : 'c', major(st.st_rdev), minor(st.st_rdev)};
}

Result<GpuDevices> named_gpu_devices(const std::vector<std::vector<std::string>>& paths,
                                     int num_gpus) {
  if (static_cast<int>(paths.size()) != num_gpus) {
    return invalid_argument("[agent] gpu_devices names " + std::to_string(paths.size()) +
                            " GPU(s), the node has " + std::to_string(num_gpus));
  }
  GpuDevices devices;
  for (const std::vector<std::string>& gpu : paths) {
    devices.by_gpu.emplace_back();
    for (const std::string& path : gpu) {
      auto file = device_file(path);
      if (!file.is_ok()) return file.status();
      devices.by_gpu.back().push_back(*file);
    }
  }
  return devices;
}

GpuDevices discover_gpu_devices(const resource::NodeTopology& topology, const std::string& root) {
  GpuDevices devices;
  for (const resource::Gpu& gpu : topology.gpus) {
    std::vector<std::string> paths;
    if (!gpu.pci_bus_id.empty()) {
      const std::string nvidia = nvidia_device(root, gpu.pci_bus_id);
      paths = nvidia.empty() ? drm_devices(root, gpu.pci_bus_id) : std::vector{nvidia};
    }
    devices.by_gpu.emplace_back();
    for (const std::string& path : paths) {
      auto file = device_file(root + path);
      if (!file.is_ok()) continue;
      file->path = path;
      devices.by_gpu.back().push_back(*file);
    }
    if (devices.by_gpu.back().empty()) return {};
  }
  for (const char* name :
       {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}) {
    auto file = device_file(root + name);
    if (!file.is_ok() || devices.by_gpu.empty()) continue;
    file->path = name;
    devices.shared.push_back(*file);
  }
  return devices;
}

std::vector<DeviceFile> denied_devices(const GpuDevices& devices, const std::vector<int>& mine) {
  std::vector<DeviceFile> denied;
  for (std::size_t g = 0; g < devices.by_gpu.size(); ++g) {
    if (std::find(mine.begin(), mine.end(), static_cast<int>(g)) != mine.end()) continue;
    for (const DeviceFile& file : devices.by_gpu[g]) {
      // Two GPUs never share a file, but an admin's list might say so: a
      // file of one of mine stays open.
      bool also_mine = false;
      for (int m : mine) {
        if (m < 0 || static_cast<std::size_t>(m) >= devices.by_gpu.size()) continue;
        const auto& own = devices.by_gpu[static_cast<std::size_t>(m)];
        also_mine = also_mine || std::find(own.begin(), own.end(), file) != own.end();
      }
      if (!also_mine) denied.push_back(file);
    }
  }
  return denied;
}

Status make_device_cgroup(const std::string& dir, bool v2, const std::vector<DeviceFile>& denied) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return internal_error("mkdir " + dir + ": " + errno_text(errno));
  }
  if (v2) return attach_device_program(dir, denied);
  for (const DeviceFile& d : denied) {
    const std::string rule = std::string(1, d.type) + " " + std::to_string(d.major) + ":" +
                             std::to_string(d.minor) + " rwm";
    if (!write_text(dir + "/devices.deny", rule)) {
      return internal_error("write '" + rule + "' to " + dir +
                            "/devices.deny: " + errno_text(errno));
    }
  }
  return Status::ok();
}

}  // namespace hpcq::agent
