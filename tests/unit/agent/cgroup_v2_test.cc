// cgroup v2 with its controllers, as production nodes boot: the agent's job,
// worker and shell-leaf cgroups, cpu.weight, freezing through cgroup.freeze,
// the OOM count of memory.events, and jobs under a cgroup delegated to the
// agent, and a task's device program. These build machines mount v1, so this skips here (saying
// why); the guest of tests/guest/ (cgroup v2 alone, meson test 'guest') runs it. cgroup_test.cc
// covers what v1 and v2 share.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "agent/executor/cgroup.h"
#include "agent/executor/freeze_and_pin.h"
#include "agent/executor/gpu_devices.h"
#include "agent/executor/posix.h"
#include "lib/resource/cpu_list.h"
#include "tests/unit/agent/executor_fixture.h"

namespace hpcq::agent {
namespace {

namespace fs = std::filesystem;

using fixture::read_trimmed;
using fixture::start_sleeper;

class CgroupV2ControllersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create cgroups";
    auto h = CgroupHierarchy::detect();
    if (!h.is_ok() || h->version() != CgroupVersion::kV2) {
      GTEST_SKIP() << "/sys/fs/cgroup is not cgroup v2 (tests/guest/ runs this on v2)";
    }
    hierarchy_ = std::move(h).value();
    instance_ = "cgtest-v2-" + std::to_string(getpid());
    std::istringstream in(read_trimmed("/sys/fs/cgroup/cgroup.controllers"));
    std::set<std::string> have;
    for (std::string c; in >> c;) have.insert(c);
    for (const char* c : {"cpuset", "cpu", "memory", "pids"}) {
      if (!have.count(c)) GTEST_SKIP() << "no " << c << " in /sys/fs/cgroup/cgroup.controllers";
    }
    cpus_ = parse("/sys/fs/cgroup/cpuset.cpus.effective");
    mems_ = parse("/sys/fs/cgroup/cpuset.mems.effective");
    ASSERT_FALSE(cpus_.empty() || mems_.empty());
  }
  static std::vector<int> parse(const std::string& file) {
    auto list = resource::parse_cpu_list(read_trimmed(file));
    return list.is_ok() ? *list : std::vector<int>{};
  }
  // Removes `job`, waiting for the kernel to see it emptied.
  static Status remove_all(JobCgroup& job) {
    Status removed = job.remove();
    for (int i = 0; i < 200 && !removed.is_ok(); ++i) {
      usleep(10'000);
      removed = job.remove();
    }
    return removed;
  }
  void TearDown() override {
    if (!instance_.empty()) hierarchy_.remove_instance_dirs(instance_);
  }

  CgroupHierarchy hierarchy_;
  std::string instance_;
  std::vector<int> cpus_, mems_;
};

// The job's limits, a worker's within them, cpu.weight in proportion to each
// cpuset, and v2's no-internal-process rule: once the job hands controllers
// to children, its processes belong in a leaf (the shell's), not beside them.
TEST_F(CgroupV2ControllersTest, JobWorkerAndShellLeafLimits) {
  auto cg = hierarchy_.create_job(instance_, 11, {cpus_, mems_, 64 << 20, 32});
  ASSERT_TRUE(cg.is_ok()) << cg.status().to_string();
  JobCgroup job = std::move(cg).value();
  const std::string dir = job.dirs().at(0);
  EXPECT_EQ(dir, "/sys/fs/cgroup/hpcq/" + instance_ + "/job-11");
  EXPECT_EQ(read_trimmed(dir + "/cpuset.cpus"), resource::format_cpu_list(cpus_));
  EXPECT_EQ(read_trimmed(dir + "/cpuset.mems"), resource::format_cpu_list(mems_));
  EXPECT_EQ(read_trimmed(dir + "/memory.max"), std::to_string(64 << 20));
  EXPECT_EQ(read_trimmed(dir + "/pids.max"), "32");
  EXPECT_EQ(read_trimmed(dir + "/cpu.weight"), std::to_string(100 * cpus_.size()));

  auto shell = job.create_child("shell", {});
  ASSERT_TRUE(shell.is_ok()) << shell.status().to_string();
  auto worker = job.create_child("worker-1", {{cpus_.back()}, {mems_.back()}, 16 << 20});
  ASSERT_TRUE(worker.is_ok()) << worker.status().to_string();
  const std::string w = worker->dirs().at(0);
  EXPECT_EQ(read_trimmed(w + "/cpuset.cpus.effective"), std::to_string(cpus_.back()));
  EXPECT_EQ(read_trimmed(w + "/cpuset.mems.effective"), std::to_string(mems_.back()));
  EXPECT_EQ(read_trimmed(w + "/memory.max"), std::to_string(16 << 20));
  EXPECT_EQ(read_trimmed(w + "/cpu.weight"), "100");
  std::istringstream enabled(read_trimmed(dir + "/cgroup.subtree_control"));
  std::set<std::string> handed_down;
  for (std::string c; enabled >> c;) handed_down.insert(c);
  for (const char* c : {"cpuset", "cpu", "memory", "pids"}) EXPECT_TRUE(handed_down.count(c)) << c;

  pid_t in_leaf = start_sleeper();
  pid_t beside = start_sleeper();
  ASSERT_TRUE(shell->add_process(in_leaf).is_ok());
  Status refused = job.add_process(beside);
  EXPECT_FALSE(refused.is_ok()) << "a process beside child cgroups";
  EXPECT_NE(refused.message().find("Device or resource busy"), std::string::npos)
      << refused.to_string();
  kill(beside, SIGKILL);
  waitpid(beside, nullptr, 0);
  EXPECT_EQ(job.pids(), std::vector<pid_t>{in_leaf});

  EXPECT_EQ(job.remove().code(), Code::kFailedPrecondition);  // cgroup.kill
  int status = 0;
  ASSERT_EQ(waitpid(in_leaf, &status, 0), in_leaf);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  Status removed = remove_all(job);
  EXPECT_TRUE(removed.is_ok()) << removed.to_string();
  EXPECT_FALSE(fs::exists(dir));
}

// Checkpoints freeze the job through cgroup.freeze and wait for
// cgroup.events to say so.
TEST_F(CgroupV2ControllersTest, FreezesAndThawsThroughCgroupFreeze) {
  auto cg = hierarchy_.create_job(instance_, 12, {});
  ASSERT_TRUE(cg.is_ok()) << cg.status().to_string();
  JobCgroup job = std::move(cg).value();
  auto shell = job.create_child("shell", {});
  ASSERT_TRUE(shell.is_ok()) << shell.status().to_string();
  pid_t child = start_sleeper();
  ASSERT_TRUE(shell->add_process(child).is_ok());
  const std::string dir = freezer_dir(job);
  ASSERT_EQ(dir, job.dirs().at(0));
  Status frozen = set_frozen(dir, true);
  EXPECT_TRUE(frozen.is_ok()) << frozen.to_string();
  EXPECT_NE(read_trimmed(dir + "/cgroup.events").find("frozen 1"), std::string::npos);
  EXPECT_NE(read_trimmed(shell->dirs().at(0) + "/cgroup.events").find("frozen 1"),
            std::string::npos);
  EXPECT_TRUE(set_frozen(dir, false).is_ok());
  EXPECT_NE(read_trimmed(dir + "/cgroup.events").find("frozen 0"), std::string::npos);
  EXPECT_EQ(job.remove().code(), Code::kFailedPrecondition);
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(remove_all(job).is_ok());
}

// The memory-limit kill is counted from memory.events (the subtree's), and
// the peak is kept.
TEST_F(CgroupV2ControllersTest, OomKillInALeafIsCountedForTheJob) {
  auto cg = hierarchy_.create_job(instance_, 13, {{}, {}, 16 << 20});
  ASSERT_TRUE(cg.is_ok()) << cg.status().to_string();
  JobCgroup job = std::move(cg).value();
  auto leaf = job.create_child("shell", {});
  ASSERT_TRUE(leaf.is_ok()) << leaf.status().to_string();
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t child = fork();
  if (child == 0) {
    char byte;
    close(go[1]);
    if (read(go[0], &byte, 1) != 1) _exit(2);
    const std::size_t size = 256u << 20;
    // volatile: the compiler may not drop an allocation nobody reads back.
    volatile char* block = static_cast<volatile char*>(malloc(size));
    if (block == nullptr) _exit(3);
    for (std::size_t i = 0; i < size; i += 4096) block[i] = 1;  // the OOM killer ends it here
    _exit(0);
  }
  close(go[0]);
  ASSERT_TRUE(leaf->add_process(child).is_ok());
  ASSERT_EQ(write(go[1], "g", 1), 1);
  close(go[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_GE(job.oom_kills(), 1);
  EXPECT_GT(job.memory_peak_bytes(), 8u << 20);
  EXPECT_TRUE(remove_all(job).is_ok());
}

// systemd's Delegate=yes gives the agent a cgroup of its own: the agent
// moves into its leaf "agent" and its jobs' cgroups go below that cgroup.
// A cgroup it shares with processes it did not start (a login session that
// ran `hpcq start`) is not its own: its jobs go under the root.
// A task's device cgroup on v2: a BPF device program keeps it from the
// node's other GPUs (two device files of char major 240, for local use: an
// allowed open gets ENXIO, no driver; a denied one EPERM), in a bare child
// of the job's cgroup beside the job's own processes.
TEST_F(CgroupV2ControllersTest, ADeviceProgramDeniesTheOtherGpus) {
  char tmpl[] = "/tmp/hpcq-v2-devices-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string devs = tmpl;
  for (unsigned g : {0U, 1U}) {
    const std::string path = devs + "/gpu" + std::to_string(g);
    ASSERT_EQ(mknod(path.c_str(), S_IFCHR | 0666, makedev(240, g)), 0) << errno_text(errno);
  }
  auto gpus = named_gpu_devices({{devs + "/gpu0"}, {devs + "/gpu1"}}, 2);
  ASSERT_TRUE(gpus.is_ok()) << gpus.status().to_string();
  auto cg = hierarchy_.create_job(instance_, 13, {cpus_, mems_, 0, 0});
  ASSERT_TRUE(cg.is_ok()) << cg.status().to_string();
  JobCgroup job = std::move(cg).value();
  auto dir = hierarchy_.device_dir(instance_, 13, job.dirs().at(0), "gpus-0");
  ASSERT_TRUE(dir.is_ok()) << dir.status().to_string();
  EXPECT_EQ(*dir, job.dirs().at(0) + "/gpus-0");
  ASSERT_TRUE(make_device_cgroup(*dir, true, denied_devices(*gpus, {0})).is_ok());

  auto open_errno = [&](const std::string& cgroup, unsigned gpu) {
    const pid_t child = fork();
    if (child == 0) {
      if (!cgroup.empty() && !write_text(cgroup + "/cgroup.procs", "0")) _exit(100);
      const int fd = open((devs + "/gpu" + std::to_string(gpu)).c_str(), O_RDONLY);
      _exit(fd >= 0 ? 0 : errno);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(open_errno(*dir, 0), ENXIO);              // its own: past the cgroup
  EXPECT_EQ(open_errno(*dir, 1), EPERM);              // the other GPU
  EXPECT_EQ(open_errno(job.dirs().at(0), 1), ENXIO);  // the job's cgroup itself is not limited
  EXPECT_TRUE(remove_all(job).is_ok());
  fs::remove_all(devs);
}

TEST_F(CgroupV2ControllersTest, JobsGoUnderTheAgentsDelegatedCgroup) {
  const std::string unit = "/hpcq-delegate-test-" + std::to_string(getpid()) + ".service";
  const std::string dir = "/sys/fs/cgroup" + unit;
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const pid_t agent = start_sleeper();  // stands for the agent
  ASSERT_TRUE(JobCgroup(CgroupVersion::kV2, {dir}).add_process(agent).is_ok());
  auto h = CgroupHierarchy::detect();
  ASSERT_TRUE(h.is_ok());
  auto base = h->settle_in_own_cgroup(agent);
  ASSERT_TRUE(base.is_ok()) << base.status().to_string();
  EXPECT_EQ(*base, unit);
  EXPECT_EQ(read_trimmed("/proc/" + std::to_string(agent) + "/cgroup"), "0::" + unit + "/agent");
  EXPECT_EQ(h->job_path(instance_, 12), unit + "/hpcq/" + instance_ + "/job-12");
  auto cg = h->create_job(instance_, 12, {cpus_, mems_, 32 << 20, 16});
  ASSERT_TRUE(cg.is_ok()) << cg.status().to_string();
  JobCgroup job = std::move(cg).value();
  EXPECT_EQ(job.dirs().at(0), dir + "/hpcq/" + instance_ + "/job-12");
  EXPECT_EQ(read_trimmed(job.dirs().at(0) + "/memory.max"), std::to_string(32 << 20));
  EXPECT_EQ(h->instance_dirs(instance_), std::vector<std::string>{dir + "/hpcq/" + instance_});
  EXPECT_TRUE(remove_all(job).is_ok());
  h->remove_instance_dirs(instance_);
  EXPECT_EQ(rmdir((dir + "/hpcq").c_str()), 0);
  kill(agent, SIGKILL);
  waitpid(agent, nullptr, 0);
  for (int i = 0; i < 200 && rmdir((dir + "/agent").c_str()) != 0; ++i) usleep(10'000);
  EXPECT_EQ(rmdir(dir.c_str()), 0) << errno_text(errno);

  const std::string session = "/hpcq-session-test-" + std::to_string(getpid()) + ".scope";
  const std::string shared = "/sys/fs/cgroup" + session;
  ASSERT_EQ(mkdir(shared.c_str(), 0755), 0);
  const pid_t started_by_hand = start_sleeper();
  const pid_t beside = start_sleeper();
  const JobCgroup both(CgroupVersion::kV2, {shared});
  ASSERT_TRUE(both.add_process(started_by_hand).is_ok() && both.add_process(beside).is_ok());
  auto h2 = CgroupHierarchy::detect();
  ASSERT_TRUE(h2.is_ok());
  auto root = h2->settle_in_own_cgroup(started_by_hand);
  ASSERT_TRUE(root.is_ok()) << root.status().to_string();
  EXPECT_EQ(*root, "/");
  EXPECT_EQ(read_trimmed("/proc/" + std::to_string(started_by_hand) + "/cgroup"), "0::" + session);
  EXPECT_EQ(h2->job_path(instance_, 12), "/hpcq/" + instance_ + "/job-12");
  EXPECT_FALSE(fs::exists(shared + "/agent"));
  for (pid_t p : {started_by_hand, beside}) {
    kill(p, SIGKILL);
    waitpid(p, nullptr, 0);
  }
  for (int i = 0; i < 200 && rmdir(shared.c_str()) != 0; ++i) usleep(10'000);
  EXPECT_FALSE(fs::exists(shared));
}

}  // namespace
}  // namespace hpcq::agent
