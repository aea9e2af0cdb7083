#include "lib/resource/hwloc_import.h"

#include <gtest/gtest.h>
#include <hwloc.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

namespace hpcq::resource {
namespace {

struct Shape {
  std::string spec;
  int packages;
  int numa;
  int cores;
  int pus_per_core;
};

TEST(HwlocImport, SyntheticShapes) {
  const Shape shapes[] = {
      {"pack:2 numa:2 core:4 pu:1", 2, 4, 16, 1},
      {"synthetic:pack:2 numa:2 core:4 pu:1", 2, 4, 16, 1},
      {"numa:1 core:2 pu:2", 1, 1, 2, 2},
      {"core:3 pu:2", 1, 1, 3, 2},
      {"pack:1 pu:4", 1, 1, 4, 1},  // no Core level: one core per PU
      {"pack:4 core:2 pu:1", 4, 1, 8, 1},
  };
  for (const Shape& s : shapes) {
    auto topo = discover_topology(s.spec);
    ASSERT_TRUE(topo.is_ok()) << s.spec << ": " << topo.status().to_string();
    EXPECT_EQ(topo->packages, s.packages) << s.spec;
    EXPECT_EQ(static_cast<int>(topo->numa.size()), s.numa) << s.spec;
    EXPECT_EQ(topo->num_cores(), s.cores) << s.spec;
    for (int i = 0; i < topo->num_cores(); ++i) {
      const Core& core = topo->cores[static_cast<std::size_t>(i)];
      EXPECT_EQ(core.id, i);
      EXPECT_EQ(static_cast<int>(core.pus.size()), s.pus_per_core) << s.spec;
      EXPECT_GE(core.numa, 0);
      EXPECT_LT(core.numa, s.numa);
    }
    EXPECT_EQ(topo->memory_bytes, static_cast<std::uint64_t>(s.numa) * kDefaultNumaMemoryBytes);
  }
}

TEST(HwlocImport, CoresBelongToTheirNumaAndPackage) {
  auto topo = discover_topology("pack:2 numa:2 core:4 pu:2");
  ASSERT_TRUE(topo.is_ok());
  ASSERT_EQ(topo->num_cores(), 16);
  for (const Core& core : topo->cores) {
    EXPECT_EQ(core.numa, core.id / 4) << "core " << core.id;
    EXPECT_EQ(core.package, core.id / 8) << "core " << core.id;
    EXPECT_EQ(core.pus, (std::vector<int>{2 * core.id, 2 * core.id + 1}));
  }
  for (const NumaDomain& d : topo->numa) EXPECT_EQ(d.package, d.id / 2);
  EXPECT_EQ(topo->source, "synthetic:pack:2 numa:2 core:4 pu:2");
}

TEST(HwlocImport, MemoryFromTheString) {
  auto topo = discover_topology("pack:2 numa:1(memory=8GB) core:2 pu:1");
  ASSERT_TRUE(topo.is_ok()) << topo.status().to_string();
  ASSERT_EQ(topo->numa.size(), 2u);
  for (const NumaDomain& d : topo->numa) EXPECT_EQ(d.memory_bytes, 8'000'000'000ULL);
  EXPECT_EQ(topo->memory_bytes, 16'000'000'000ULL);
}

TEST(HwlocImport, BadSpecsNameTheSpec) {
  for (const char* spec : {"", "pack:x", "synthetic:", "bogus:2 core:1", "core:0"}) {
    auto topo = discover_topology(spec);
    ASSERT_FALSE(topo.is_ok()) << "'" << spec << "' accepted";
    EXPECT_EQ(topo.status().code(), Code::kInvalidArgument) << topo.status().to_string();
    if (*spec != '\0') {
      EXPECT_NE(topo.status().message().find(spec), std::string::npos) << topo.status().message();
    }
  }
  auto missing = discover_topology("xml:/nonexistent/topo.xml");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/topo.xml"), std::string::npos);
}

TEST(HwlocImport, XmlExportReadsBackTheSame) {
  // Write an XML export of a synthetic machine with hwloc itself, as lstopo would.
  hwloc_topology_t t = nullptr;
  ASSERT_EQ(hwloc_topology_init(&t), 0);
  ASSERT_EQ(hwloc_topology_set_synthetic(t, "pack:2 numa:1(memory=4GB) core:3 pu:2"), 0);
  ASSERT_EQ(hwloc_topology_load(t), 0);
  const std::string path = ::testing::TempDir() + "hpcq_topo_" + std::to_string(getpid()) + ".xml";
  ASSERT_EQ(hwloc_topology_export_xml(t, path.c_str(), 0), 0);
  hwloc_topology_destroy(t);

  auto topo = discover_topology("xml:" + path);
  std::remove(path.c_str());
  ASSERT_TRUE(topo.is_ok()) << topo.status().to_string();
  EXPECT_EQ(topo->packages, 2);
  EXPECT_EQ(topo->numa.size(), 2u);
  EXPECT_EQ(topo->num_cores(), 6);
  EXPECT_EQ(topo->cores[4].numa, 1);
  EXPECT_EQ(topo->cores[4].pus.size(), 2u);
  EXPECT_EQ(topo->memory_bytes, 8'000'000'000ULL);
  EXPECT_EQ(topo->source, "xml:" + path);
}

TEST(HwlocImport, Host) {
  auto topo = discover_topology("host");
  ASSERT_TRUE(topo.is_ok()) << topo.status().to_string();
  EXPECT_GE(topo->num_cores(), 1);
  EXPECT_GE(topo->packages, 1);
  EXPECT_GE(topo->numa.size(), 1u);
  EXPECT_GT(topo->memory_bytes, 0u);
  EXPECT_EQ(topo->source, "host");
}

}  // namespace
}  // namespace hpcq::resource

namespace hpcq::resource {
namespace {

TEST(HwlocImport, XmlFixtureEmulatesAGpuNode) {
  auto topo = discover_topology(std::string("xml:") + HPCQ_RESOURCE_TEST_DIR + "/gpu_node.xml");
  ASSERT_TRUE(topo.is_ok()) << topo.status().to_string();
  EXPECT_EQ(topo->packages, 2);
  ASSERT_EQ(topo->numa.size(), 4u);
  EXPECT_EQ(topo->num_cores(), 16);
  EXPECT_EQ(topo->num_pus(), 32);
  EXPECT_EQ(topo->memory_bytes, 4 * (64ULL << 30));
  // One GPU per PCI device (card + cuda OS devices count once), one per domain.
  ASSERT_EQ(topo->num_gpus(), 4);
  const char* buses[] = {"0000:17:00.0", "0000:3b:00.0", "0000:86:00.0", "0000:af:00.0"};
  for (int i = 0; i < 4; ++i) {
    const Gpu& gpu = topo->gpus[static_cast<std::size_t>(i)];
    EXPECT_EQ(gpu.id, i);
    EXPECT_EQ(gpu.numa, i);
    EXPECT_EQ(gpu.name, "cuda" + std::to_string(i));
    EXPECT_EQ(gpu.pci_bus_id, buses[i]);
  }
  for (const NumaDomain& d : topo->numa) EXPECT_EQ(d.package, d.id / 2);
  // Synthetic strings have no GPUs.
  auto synthetic = discover_topology("pack:2 numa:2 core:4 pu:2");
  ASSERT_TRUE(synthetic.is_ok());
  EXPECT_EQ(synthetic->num_gpus(), 0);
}

}  // namespace
}  // namespace hpcq::resource
