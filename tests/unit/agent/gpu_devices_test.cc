// The GPU device files: found from a fake driver tree (real device nodes,
// made with mknod: skips unless root), named by the admin, and which a task
// is denied. The cgroup side is tested with real cgroups through hpcqd and
// agents (t0044) and, for v2's device program, in the guest (cgroup_v2).
#include "agent/executor/gpu_devices.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace hpcq::agent {
namespace {

namespace fs = std::filesystem;

// Char majors 240-254 are for local use: no driver answers them here.
constexpr unsigned kMajor = 240;

class GpuDevicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "making device nodes needs root";
    char tmpl[] = "/tmp/hpcq-gpu-devices-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    if (!root_.empty()) fs::remove_all(root_, ec);
  }
  void make_device(const std::string& path, unsigned minor) {
    fs::create_directories(fs::path(root_ + path).parent_path());
    ASSERT_EQ(mknod((root_ + path).c_str(), S_IFCHR | 0600, makedev(kMajor, minor)), 0) << path;
  }
  void write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  std::string root_;
};

resource::NodeTopology two_gpus(const std::string& a, const std::string& b) {
  resource::NodeTopology t;
  t.gpus = {{0, 0, "cuda0", a}, {1, 0, "cuda1", b}};
  return t;
}

TEST_F(GpuDevicesTest, NvidiaMinorsAndTheSharedControlFiles) {
  write("/proc/driver/nvidia/gpus/0000:3b:00.0/information", "Model: X\nDevice Minor: 1\n");
  write("/proc/driver/nvidia/gpus/0000:af:00.0/information", "Device Minor: 0\n");
  make_device("/dev/nvidia0", 0);
  make_device("/dev/nvidia1", 1);
  make_device("/dev/nvidiactl", 255);
  make_device("/dev/nvidia-uvm", 254);
  GpuDevices d = discover_gpu_devices(two_gpus("0000:3b:00.0", "0000:af:00.0"), root_);
  ASSERT_EQ(d.by_gpu.size(), 2u);
  EXPECT_EQ(d.by_gpu[0], (std::vector<DeviceFile>{{"/dev/nvidia1", 'c', kMajor, 1}}));
  EXPECT_EQ(d.by_gpu[1], (std::vector<DeviceFile>{{"/dev/nvidia0", 'c', kMajor, 0}}));
  EXPECT_EQ(d.shared, (std::vector<DeviceFile>{{"/dev/nvidiactl", 'c', kMajor, 255},
                                               {"/dev/nvidia-uvm", 'c', kMajor, 254}}));
}

TEST_F(GpuDevicesTest, DrmCardAndRenderNodes) {
  fs::create_directories(root_ + "/sys/bus/pci/devices/0000:03:00.0/drm/card1");
  fs::create_directories(root_ + "/sys/bus/pci/devices/0000:03:00.0/drm/renderD129");
  fs::create_directories(root_ + "/sys/bus/pci/devices/0000:04:00.0/drm/card2");
  make_device("/dev/dri/card1", 1);
  make_device("/dev/dri/renderD129", 129);
  make_device("/dev/dri/card2", 2);
  GpuDevices d = discover_gpu_devices(two_gpus("0000:03:00.0", "0000:04:00.0"), root_);
  ASSERT_EQ(d.by_gpu.size(), 2u);
  EXPECT_EQ(d.by_gpu[0], (std::vector<DeviceFile>{{"/dev/dri/card1", 'c', kMajor, 1},
                                                  {"/dev/dri/renderD129", 'c', kMajor, 129}}));
  EXPECT_EQ(d.by_gpu[1], (std::vector<DeviceFile>{{"/dev/dri/card2", 'c', kMajor, 2}}));
  EXPECT_TRUE(d.shared.empty());
}

TEST_F(GpuDevicesTest, AGpuWithoutFilesLeavesNoneKnown) {
  write("/proc/driver/nvidia/gpus/0000:3b:00.0/information", "Device Minor: 0\n");
  make_device("/dev/nvidia0", 0);
  // The second GPU has no PCI id (an emulated node's) and no files.
  EXPECT_TRUE(discover_gpu_devices(two_gpus("0000:3b:00.0", ""), root_).empty());
  EXPECT_TRUE(discover_gpu_devices(resource::NodeTopology{}, root_).empty());
}

TEST_F(GpuDevicesTest, NamedFilesAndWhatATaskIsDenied) {
  make_device("/g0", 10);
  make_device("/g1", 11);
  make_device("/g1-render", 12);
  write("/plain", "not a device");
  auto d = named_gpu_devices({{root_ + "/g0"}, {root_ + "/g1", root_ + "/g1-render"}}, 2);
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_EQ(denied_devices(*d, {0}),
            (std::vector<DeviceFile>{{root_ + "/g1", 'c', kMajor, 11},
                                     {root_ + "/g1-render", 'c', kMajor, 12}}));
  EXPECT_EQ(denied_devices(*d, {1}), (std::vector<DeviceFile>{{root_ + "/g0", 'c', kMajor, 10}}));
  EXPECT_TRUE(denied_devices(*d, {0, 1}).empty());
  EXPECT_EQ(denied_devices(*d, {}).size(), 3u);

  auto miscounted = named_gpu_devices({{root_ + "/g0"}}, 2);
  EXPECT_EQ(miscounted.status().code(), Code::kInvalidArgument);
  EXPECT_NE(miscounted.status().message().find("names 1 GPU(s), the node has 2"),
            std::string::npos);
  auto plain = named_gpu_devices({{root_ + "/plain"}}, 1);
  EXPECT_NE(plain.status().message().find("is not a device file"), std::string::npos);
  auto missing = named_gpu_devices({{root_ + "/none"}}, 1);
  EXPECT_EQ(missing.status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace hpcq::agent
