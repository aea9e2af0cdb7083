#include "agent/executor/oci_bundle.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hpcq::agent {
namespace {

OciContainer sample() {
  OciContainer c;
  c.rootfs = "/images/busybox";
  c.args = {kContainerShell, "/state/jobs/5/oci/worker-1"};
  c.env = {"PATH=/bin"};
  c.uid = 1000;
  c.gid = 100;
  c.additional_gids = {27};
  c.cgroups_path = "/hpcq/rank-1/job-5/worker-1";
  c.cpus = {4, 5, 7};
  c.mems = {1};
  c.memory_limit_bytes = 1 << 30;
  c.pids_limit = 512;
  c.shell_binary = "/usr/libexec/hpcq/hpcq-container-shell";
  c.writable_dirs = {
      "/home/alice/run/out", "/home/alice/run", "/state/jobs/5/oci/worker-1", "/", "/dev",
      "/proc/self"};
  c.read_only_dirs = {"/home/alice/run"};
  c.read_only_files = {"/etc/hosts"};
  return c;
}

TEST(OciBundle, CarriesTheWorkersLimitsUserAndHostNetwork) {
  const nlohmann::json j = nlohmann::json::parse(oci_config_json(sample()));
  EXPECT_EQ(j["root"]["path"], "/images/busybox");
  EXPECT_EQ(j["process"]["user"]["uid"], 1000);
  EXPECT_EQ(j["process"]["user"]["gid"], 100);
  EXPECT_EQ(j["process"]["user"]["additionalGids"], nlohmann::json::array({27}));
  EXPECT_EQ(j["process"]["args"][0], kContainerShell);
  EXPECT_TRUE(j["process"]["capabilities"]["bounding"].empty());
  const auto& linux_section = j["linux"];
  EXPECT_EQ(linux_section["cgroupsPath"], "/hpcq/rank-1/job-5/worker-1");
  EXPECT_EQ(linux_section["resources"]["cpu"]["cpus"], "4-5,7");
  EXPECT_EQ(linux_section["resources"]["cpu"]["mems"], "1");
  EXPECT_EQ(linux_section["resources"]["memory"]["limit"], 1 << 30);
  EXPECT_EQ(linux_section["resources"]["pids"]["limit"], 512);
  // Host network and UTS: no such namespaces asked for.
  for (const auto& ns : linux_section["namespaces"]) {
    EXPECT_NE(ns["type"], "network");
    EXPECT_NE(ns["type"], "uts");
  }
  EXPECT_FALSE(j.contains("hostname"));
}

TEST(OciBundle, BindsEachDirectoryOnceParentsFirstNeverTheRootNorKernelFileSystems) {
  const nlohmann::json j = nlohmann::json::parse(oci_config_json(sample()));
  std::vector<std::string> binds;
  bool run_writable = false;
  for (const auto& m : j["mounts"]) {
    if (m["type"] != "bind") continue;
    binds.push_back(m["destination"]);
    if (m["destination"] == "/home/alice/run") {
      run_writable =
          std::find(m["options"].begin(), m["options"].end(), "rw") != m["options"].end();
    }
  }
  EXPECT_EQ(binds, (std::vector<std::string>{"/home/alice/run", "/home/alice/run/out",
                                             "/state/jobs/5/oci/worker-1", "/etc/hosts",
                                             kContainerShell}));
  EXPECT_TRUE(run_writable);  // writable wins over read-only
}

TEST(OciBundle, ItsGpusFilesAreMadeAndAllowedEveryOtherDeviceDenied) {
  OciContainer c = sample();
  EXPECT_TRUE(nlohmann::json::parse(oci_config_json(c))["linux"]["devices"].empty());
  c.devices = {{"/dev/nvidia1", 'c', 195, 1}, {"/dev/nvidiactl", 'c', 195, 255}};
  const nlohmann::json j = nlohmann::json::parse(oci_config_json(c));
  const auto& devices = j["linux"]["devices"];
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0]["path"], "/dev/nvidia1");
  EXPECT_EQ(devices[0]["type"], "c");
  EXPECT_EQ(devices[0]["major"], 195);
  EXPECT_EQ(devices[0]["minor"], 1);
  const auto& rules = j["linux"]["resources"]["devices"];
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0]["allow"], false);  // everything first, then its own back
  EXPECT_FALSE(rules[0].contains("major"));
  EXPECT_EQ(rules[1]["allow"], true);
  EXPECT_EQ(rules[1]["minor"], 1);
  EXPECT_EQ(rules[2]["minor"], 255);
  EXPECT_EQ(rules[2]["access"], "rwm");
}

TEST(OciBundle, NoLimitsWhenNoneAreGiven) {
  OciContainer c = sample();
  c.cpus.clear();
  c.mems.clear();
  c.memory_limit_bytes = 0;
  c.pids_limit = 0;
  const nlohmann::json j = nlohmann::json::parse(oci_config_json(c));
  EXPECT_FALSE(j["linux"]["resources"].contains("cpu"));
  EXPECT_FALSE(j["linux"]["resources"].contains("memory"));
  EXPECT_FALSE(j["linux"]["resources"].contains("pids"));
}

}  // namespace
}  // namespace hpcq::agent
