// Checkpoint/restore of real jobs with the real ProcessExecutor and real CRIU
// (checkpoint.h, process_executor.h). Needs root and a cgroup file system
// (skipped without, like process_executor_test) and a working CRIU >= 4: a
// missing CRIU FAILS these tests (CI installs it with .ci/install-criu)
// unless HPCQ_SKIP_CRIU_TESTS=1 is set; a host on which the trial dump of a
// process made as jobs are fails or hangs (criu_trial_dump: a kernel that
// lets no dump finish, a chroot) skips them, saying so, unless
// HPCQ_REQUIRE_CHECKPOINT=1.
//
// The job counts once per 100 ms into its output file ("<task> <n>" lines);
// "no gap and no restart" is read from that file: every task's numbers are
// 1, 2, 3, ... with none missing or repeated, across the checkpoint.
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "agent/executor/checkpoint.h"
#include "agent/executor/process_executor.h"
#include "tests/unit/agent/executor_fixture.h"

#ifndef HPCQ_JOB_SHELL
#error "HPCQ_JOB_SHELL must name the hpcq-job-shell binary"
#endif

namespace hpcq::agent {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using namespace fixture;  // now_us, read_file, allowed_cpus, checkpoint_and_wait, ...

// task -> its numbers, in file order.
std::map<int, std::vector<int>> counts(const std::string& path) {
  std::map<int, std::vector<int>> by_task;
  std::istringstream in(read_file(path));
  int task, n;
  while (in >> task >> n) by_task[task].push_back(n);
  return by_task;
}

// "" if `numbers` is 1, 2, ..., k; otherwise where it goes wrong.
std::string consecutive(const std::vector<int>& numbers) {
  for (size_t i = 0; i < numbers.size(); ++i) {
    if (numbers[i] != static_cast<int>(i) + 1) {
      return "at line " + std::to_string(i) + ": " + std::to_string(numbers[i]) + " after " +
             (i == 0 ? std::string("nothing") : std::to_string(numbers[i - 1]));
    }
  }
  return "";
}

int last_count(const std::string& path, int task) {
  auto c = counts(path);
  return c[task].empty() ? 0 : c[task].back();
}

// Our children, zombies included: a failed restore must leave none.
std::set<pid_t> own_children() {
  std::set<pid_t> pids;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(task.path() / "children");
    for (pid_t p; in >> p;) pids.insert(p);
  }
  return pids;
}

std::string status_field(pid_t pid, const std::string& field) {
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::string v = line.substr(field.size() + 1);
      return v.substr(v.find_first_not_of(" \t"));
    }
  }
  return "";
}

// CRIU reads a task's limits with prlimit(), which for another user's task
// needs CAP_SYS_RESOURCE; some containers drop it even for root. The jobs run
// as nobody where CRIU may dump them, else as root.
bool has_cap_sys_resource() {
  std::istringstream in(status_field(getpid(), "CapEff"));
  unsigned long long caps = 0;
  in >> std::hex >> caps;
  return (caps >> 24) & 1ULL;  // CAP_SYS_RESOURCE
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (cgroups, PID namespaces, CRIU)";
    auto h = CgroupHierarchy::detect();
    if (!h.is_ok()) GTEST_SKIP() << "no usable cgroup file system: " << h.status().message();
    auto criu = probe_criu("");
    if (!criu.is_ok()) {
      const char* skip = getenv("HPCQ_SKIP_CRIU_TESTS");
      if (skip != nullptr && std::string(skip) == "1") {
        GTEST_SKIP() << "HPCQ_SKIP_CRIU_TESTS=1: " << criu.status().message();
      }
      FAIL() << "CRIU is not usable here: " << criu.status().message()
             << " (run .ci/install-criu, or set HPCQ_SKIP_CRIU_TESTS=1 to skip)";
    }
    // Installed and checked, but on some kernels no dump finishes, and in
    // a chroot no job's mount namespace can be dumped: the tests that dump
    // skip there (SKIP_UNLESS_DUMPS), saying why.
    dumps_ = criu_trial_dump(*criu);
    if (!dumps_.is_ok() && dumps_.message().find(kTrialDumpVerdict) == std::string::npos) {
      FAIL() << dumps_.message();  // no verdict on CRIU: the trial could not be made
    }
    char tmpl[] = "/tmp/hpcq-checkpoint-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    fs::permissions(tmp_, fs::perms(01777));
    cpus_ = allowed_cpus();
    a_ = make_executor("a");
    b_ = make_executor("b");
    ASSERT_TRUE(a_ && b_);
  }

  void TearDown() override {
    a_.reset();
    b_.reset();
    if (!tmp_.empty()) {
      std::error_code ec;
      fs::remove_all(tmp_, ec);
    }
  }

  std::unique_ptr<ProcessExecutor> make_executor(const std::string& name,
                                                 const std::string& criu_path = "") {
    ExecutorConfig config;
    config.instance = "ckpt-" + std::to_string(getpid()) + "-" + name;
    config.state_dir = tmp_ + "/state-" + name;
    config.job_shell_path = HPCQ_JOB_SHELL;
    config.kill_grace = kUsPerSecond;
    config.criu_path = criu_path;
    auto e = ProcessExecutor::create(config);
    EXPECT_TRUE(e.is_ok()) << e.status().to_string();
    return e.is_ok() ? std::move(e).value() : nullptr;
  }

  // `tasks` tasks counting every 100 ms into <tmp>/out-<id>; task i on
  // cpus[i % size], the job's cpuset `cpus`.
  JobLaunch counter(JobId id, int tasks, const std::vector<int>& cpus) {
    JobLaunch l;
    l.id = id;
    if (has_cap_sys_resource()) {
      l.user = "nobody";
      l.uid = 65534;
      l.gid = 65534;
    } else {
      l.user = "root";
    }
    l.argv = {"sh", "-c",
              "i=0; while :; do i=$((i+1)); echo \"$HPCQ_LOCAL_TASK $i\"; sleep 0.1; done"};
    l.env = {{"HPCQ_JOB_ID", std::to_string(id)}, {"PATH", "/usr/bin:/bin"}};
    l.cwd = tmp_;
    l.stdout_path = tmp_ + "/out-" + std::to_string(id);
    l.stderr_path = l.stdout_path;
    l.hostfile = "node0 slots=" + std::to_string(tasks) + "\n";
    for (int t = 0; t < tasks; ++t) {
      l.tasks.push_back({t, {cpus[static_cast<size_t>(t) % cpus.size()]}, std::to_string(t), {}});
    }
    l.host_cpus = cpus;
    l.host_mems = {0};
    return l;
  }

  // Waits until every task of the job has counted to at least `n`.
  bool wait_count(const std::string& out, int tasks, int n) {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      bool all = true;
      for (int t = 0; t < tasks; ++t) all = all && last_count(out, t) >= n;
      if (all) return true;
      poll(nullptr, 0, 50);
    }
    return false;
  }

  std::optional<JobExit> wait_exit(ProcessExecutor& e, JobId id) {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      std::vector<pollfd> fds;
      for (int fd : e.wait_fds()) fds.push_back({fd, POLLIN, 0});
      poll(fds.data(), fds.size(), 100);
      for (const JobExit& x : e.reap()) {
        if (x.id == id) return x;
      }
    }
    return std::nullopt;
  }

  // The job's processes, from its cgroups.
  std::set<pid_t> job_pids(const ProcessExecutor& e, JobId id) {
    std::set<pid_t> pids;
    for (const std::string& dir : e.cgroup_dirs(id)) {
      std::istringstream in(read_file(dir + "/cgroup.procs"));
      for (pid_t p; in >> p;) pids.insert(p);
    }
    return pids;
  }

  std::string tmp_;
  std::vector<int> cpus_;
  std::unique_ptr<ProcessExecutor> a_, b_;
  Status dumps_;  // criu_trial_dump()'s answer
};

// Under HPCQ_REQUIRE_CHECKPOINT=1 (.ci/run, where its own trial dump
// worked) a test that would skip fails instead.
#define SKIP_UNLESS_DUMPS()                                                         \
  if (!dumps_.is_ok()) {                                                            \
    const char* required = std::getenv("HPCQ_REQUIRE_CHECKPOINT");                  \
    if (required != nullptr && std::string(required) == "1") {                      \
      FAIL() << "checkpointing is required here (HPCQ_REQUIRE_CHECKPOINT=1), but: " \
             << dumps_.message();                                                   \
    }                                                                               \
    GTEST_SKIP() << dumps_.message();                                               \
  }

// criu_trial_dump() with stand-ins for criu: one that hangs (the kernel's
// fault, as far as the trial can tell) and one that fails (a reason of
// CRIU's); the answer is kept, so the hanging one is not waited for twice.
// Root and cgroups, not CRIU, are needed: the trial makes its process as
// jobs are made.
TEST(CriuTrialDumpTest, ADumpThatHangsOrFailsMeansTheNodeCannotCheckpoint) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (PID and mount namespaces, cgroups)";
  if (auto h = CgroupHierarchy::detect(); !h.is_ok()) {
    GTEST_SKIP() << "no usable cgroup file system: " << h.status().message();
  }
  // The cache as outside CI (.ci/run sets HPCQ_CRIU_TRIAL_CACHE=off); put back below.
  const char* cache_setting = std::getenv("HPCQ_CRIU_TRIAL_CACHE");
  const std::string saved_cache_setting = cache_setting ? cache_setting : "";
  unsetenv("HPCQ_CRIU_TRIAL_CACHE");
  char tmpl[] = "/tmp/hpcq-criu-trial-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto script = [&](const std::string& name, const std::string& body) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(path, fs::perms::owner_all);
    return CriuInfo{path, "4.1.1"};
  };
  const CriuInfo hangs = script("hangs", "exec sleep 30");
  auto start = std::chrono::steady_clock::now();
  Status verdict = criu_trial_dump(hangs, std::chrono::seconds(1));
  EXPECT_EQ(verdict.code(), Code::kFailedPrecondition);
  EXPECT_NE(verdict.message().find(kKernelCannotDump), std::string::npos) << verdict.message();
  EXPECT_NE(verdict.message().find("hung for 1 s"), std::string::npos) << verdict.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  start = std::chrono::steady_clock::now();
  EXPECT_EQ(criu_trial_dump(hangs, std::chrono::seconds(10)).message(), verdict.message());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "not kept";
  // Under HPCQ_CRIU_TRIAL_CACHE=off a kept "cannot dump" is not believed: tried
  // again, twice (a hang is tried once more before it counts).
  setenv("HPCQ_CRIU_TRIAL_CACHE", "off", 1);
  start = std::chrono::steady_clock::now();
  EXPECT_NE(criu_trial_dump(hangs, std::chrono::seconds(1)).message().find("hung for 1 s"),
            std::string::npos);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(2)) << "not tried";
  if (saved_cache_setting.empty()) {
    unsetenv("HPCQ_CRIU_TRIAL_CACHE");
  } else {
    setenv("HPCQ_CRIU_TRIAL_CACHE", saved_cache_setting.c_str(), 1);
  }

  const CriuInfo fails = script("fails", "echo 'cannot seize the task' >&2; exit 1");
  verdict = criu_trial_dump(fails, std::chrono::seconds(10));
  EXPECT_EQ(verdict.code(), Code::kFailedPrecondition);
  EXPECT_NE(verdict.message().find(std::string("failed ") + kTrialDumpVerdict +
                                   ": cannot seize the task"),
            std::string::npos)
      << verdict.message();
  fs::remove_all(dir);
}

// criu_dump() with stand-ins for criu that fail the first `failures` times
// with `error` in their log (no root needed): a seize that timed out is
// tried again, up to 3 times in all; any other failure is not.
TEST(CriuDumpTest, OnlyASeizeTimeoutIsTriedAgain) {
  char tmpl[] = "/tmp/hpcq-criu-dump-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  int stand_ins = 0;
  auto attempts_until = [&](int failures, const std::string& error) {
    const std::string images = dir + "/images-" + std::to_string(++stand_ins);
    fs::create_directories(images);
    const std::string path = images + "/criu";
    std::ofstream(path) << "#!/bin/sh\n"
                        << "while [ $# -gt 0 ]; do [ \"$1\" = --work-dir ] && dir=$2; shift; done\n"
                        << "n=$(($(cat \"$dir/attempts\" 2>/dev/null || echo 0) + 1))\n"
                        << "echo $n > \"$dir/attempts\"\n"
                        << "[ $n -gt " << failures << " ] && exit 0\n"
                        << "echo '(00.100000) Error (criu/cr-dump.c:1467): " << error
                        << "' > \"$dir/dump.log\"\n"
                        << "exit 1\n";
    fs::permissions(path, fs::perms::owner_all);
    CriuDump dump;
    dump.root = 1;
    dump.image_dir = images;
    dump.timeout = std::chrono::seconds(10);
    Status s = criu_dump(CriuInfo{path, "4.1.1"}, dump);
    int attempts = 0;
    std::ifstream(images + "/attempts") >> attempts;
    return std::make_pair(s, attempts);
  };
  const std::string timeout = "Timeout reached. Try to interrupt: 0";
  auto [once, tries] = attempts_until(1, timeout);
  EXPECT_TRUE(once.is_ok()) << once.to_string();
  EXPECT_EQ(tries, 2);
  auto [always, all_tries] = attempts_until(5, timeout);
  EXPECT_EQ(always.code(), Code::kInternal);
  EXPECT_NE(always.message().find(timeout), std::string::npos) << always.message();
  EXPECT_EQ(all_tries, 3);
  auto [other, other_tries] = attempts_until(1, "Unable to dump a task");
  EXPECT_EQ(other.code(), Code::kInternal);
  EXPECT_NE(other.message().find("Unable to dump a task"), std::string::npos) << other.message();
  EXPECT_EQ(other_tries, 1);
  fs::remove_all(dir);
}

TEST_F(CheckpointTest, NodeIsCheckpointCapable) {
  SKIP_UNLESS_DUMPS();
  EXPECT_TRUE(a_->checkpoint_capability().is_ok()) << a_->checkpoint_capability().to_string();
}

// Where the root directory is not its mount namespace's root (a chroot, as
// in a fresh Debian root made with debootstrap) CRIU cannot dump a job's
// mount namespace ("The root task has another root than mntns"), though it
// dumps a bare process there: the trial, made as jobs are, must fail there
// with CRIU's reason, and the node must not say it can checkpoint. This
// binary runs DISABLED_TrialFailsAndTheNodeCannotCheckpoint again in such a
// root: a mount namespace of its own, / bound (recursively) onto a directory
// and chroot'ed into.
TEST_F(CheckpointTest, InAChrootTheTrialFailsWithCriusReason) {
  SKIP_UNLESS_DUMPS();  // so a job can be dumped on this root
  const std::string root = tmp_ + "/chroot";
  ASSERT_TRUE(fs::create_directory(root));
  std::string exe = fs::read_symlink("/proc/self/exe");
  std::string filter =
      "--gtest_filter=CriuTrialInAChroot.DISABLED_TrialFailsAndTheNodeCannotCheckpoint";
  std::string also_disabled = "--gtest_also_run_disabled_tests";
  char* argv[] = {exe.data(), filter.data(), also_disabled.data(), nullptr};
  const pid_t child = fork();
  if (child == 0) {  // async-signal-safe calls only: this process may have threads
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("/", root.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
        chroot(root.c_str()) != 0 || chdir("/") != 0) {
      _exit(126);
    }
    execv(argv[0], argv);
    _exit(127);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_NE(WEXITSTATUS(status), 126) << "could not make the chroot";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "in the chroot: see its output above";
}

// Only InAChrootTheTrialFailsWithCriusReason runs this, in its chroot.
TEST(CriuTrialInAChroot, DISABLED_TrialFailsAndTheNodeCannotCheckpoint) {
  auto criu = probe_criu("");
  ASSERT_TRUE(criu.is_ok()) << criu.status().message();
  const Status trial = criu_trial_dump(*criu);
  EXPECT_EQ(trial.code(), Code::kFailedPrecondition) << trial.to_string();
  EXPECT_NE(trial.message().find(kTrialDumpVerdict), std::string::npos) << trial.message();
  EXPECT_NE(trial.message().find("another root than mntns"), std::string::npos) << trial.message();
  char tmpl[] = "/tmp/hpcq-checkpoint-chroot-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  ExecutorConfig config;
  config.instance = "ckpt-chroot-" + std::to_string(getpid());
  config.state_dir = std::string(tmpl) + "/state";
  config.job_shell_path = HPCQ_JOB_SHELL;
  {
    auto e = ProcessExecutor::create(config);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    const Status capable = (*e)->checkpoint_capability();
    EXPECT_EQ(capable.code(), Code::kFailedPrecondition) << capable.to_string();
    EXPECT_NE(capable.message().find("another root than mntns"), std::string::npos)
        << capable.message();
  }
  fs::remove_all(tmpl);
}

TEST_F(CheckpointTest, WithoutCriuJobsRunButCheckpointsFailWithTheReason) {
  auto e = make_executor("nocriu", "/nonexistent/criu");
  ASSERT_TRUE(e);
  Status capable = e->checkpoint_capability();
  EXPECT_EQ(capable.code(), Code::kFailedPrecondition);
  EXPECT_NE(capable.message().find("cannot checkpoint"), std::string::npos) << capable.message();
  EXPECT_NE(capable.message().find("/nonexistent/criu"), std::string::npos) << capable.message();
  JobLaunch l = counter(10, 1, {cpus_[0]});
  ASSERT_TRUE(e->launch(l, now_us()).is_ok());
  ASSERT_TRUE(wait_count(l.stdout_path, 1, 2));
  auto r = checkpoint_and_wait(*e, 10, tmp_ + "/img-nocriu", CheckpointThen::kStop);
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("job 10"), std::string::npos) << r.status().message();
  // Untouched: it counts on.
  const int before = last_count(l.stdout_path, 0);
  EXPECT_TRUE(wait_count(l.stdout_path, 1, before + 3));
  EXPECT_EQ(e->running(), std::vector<JobId>{10});
}

TEST_F(CheckpointTest, DumpAndContinueKeepsCounting) {
  SKIP_UNLESS_DUMPS();
  JobLaunch l = counter(1, 1, {cpus_[0]});
  ASSERT_TRUE(a_->launch(l, now_us()).is_ok());
  ASSERT_TRUE(wait_count(l.stdout_path, 1, 5));
  const std::string images = tmp_ + "/img-1";
  auto r = checkpoint_and_wait(*a_, 1, images, CheckpointThen::kContinue);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_FALSE(r->stopped);
  EXPECT_EQ(r->image_dir, images);
  EXPECT_GT(r->dump_seconds, 0.0);
  EXPECT_GT(r->image_bytes, 0U);
  EXPECT_TRUE(fs::exists(images + "/inventory.img"));
  EXPECT_TRUE(fs::exists(images + "/hpcq-checkpoint.json"));
  EXPECT_EQ(a_->running(), std::vector<JobId>{1});

  const int at_dump = last_count(l.stdout_path, 0);
  ASSERT_TRUE(wait_count(l.stdout_path, 1, at_dump + 5));
  EXPECT_EQ(consecutive(counts(l.stdout_path)[0]), "");
  // A second checkpoint into the same directory would clobber the first.
  EXPECT_EQ(checkpoint_and_wait(*a_, 1, images, CheckpointThen::kContinue).status().code(),
            Code::kAlreadyExists);

  ASSERT_TRUE(a_->cancel(1).is_ok());
  auto x = wait_exit(*a_, 1);
  ASSERT_TRUE(x.has_value());
  EXPECT_EQ(x->kind, ExitKind::kCancelled);
}

TEST_F(CheckpointTest, BeginCheckpointAndBeginRestoreReturnBeforeCriuIsDone) {
  SKIP_UNLESS_DUMPS();
  JobLaunch l = counter(3, 1, {cpus_[0]});
  ASSERT_TRUE(a_->launch(l, now_us()).is_ok());
  ASSERT_TRUE(wait_count(l.stdout_path, 1, 5));
  ASSERT_TRUE(a_->begin_checkpoint(3, tmp_ + "/img-3", CheckpointThen::kStop).is_ok());
  // A dump takes CRIU a tenth of a second at least: had the call waited for
  // it, its outcome would be here already.
  EXPECT_TRUE(a_->finished_checkpoints().empty());
  EXPECT_EQ(a_->begin_checkpoint(3, tmp_ + "/img-3b", CheckpointThen::kContinue).code(),
            Code::kFailedPrecondition);                        // one at a time
  EXPECT_EQ(a_->cancel(3).code(), Code::kFailedPrecondition);  // later
  std::vector<CheckpointOutcome> outcomes;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (outcomes.empty() && Clock::now() < deadline) {
    std::vector<pollfd> fds;
    for (int fd : a_->wait_fds()) fds.push_back({fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 100);
    // The dump kills the tree: that is no end of the job for reap().
    EXPECT_TRUE(a_->reap().empty());
    outcomes = a_->finished_checkpoints();
  }
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].id, 3u);
  ASSERT_TRUE(outcomes[0].status.is_ok()) << outcomes[0].status.to_string();
  EXPECT_TRUE(outcomes[0].result.stopped);
  EXPECT_TRUE(a_->running().empty());
  EXPECT_TRUE(fs::exists(tmp_ + "/img-3/hpcq-checkpoint.json"));

  // Its restore does not wait for CRIU either.
  ASSERT_TRUE(b_->begin_restore(l, tmp_ + "/img-3", now_us()).is_ok());
  EXPECT_TRUE(b_->finished_restores().empty());
  EXPECT_TRUE(b_->running().empty());  // not until it is done
  EXPECT_EQ(b_->begin_restore(l, tmp_ + "/img-3", now_us()).code(), Code::kAlreadyExists);
  std::vector<RestoreOutcome> restored;
  const auto until = Clock::now() + std::chrono::seconds(30);
  while (restored.empty() && Clock::now() < until) {
    std::vector<pollfd> fds;
    for (int fd : b_->wait_fds()) fds.push_back({fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 100);
    restored = b_->finished_restores();
  }
  ASSERT_EQ(restored.size(), 1u);
  ASSERT_TRUE(restored[0].status.is_ok()) << restored[0].status.to_string();
  EXPECT_EQ(b_->running(), std::vector<JobId>{3});
  const int at = last_count(l.stdout_path, 0);
  EXPECT_TRUE(wait_count(l.stdout_path, 1, at + 3));
  ASSERT_TRUE(b_->cancel(3).is_ok());
  ASSERT_TRUE(wait_exit(*b_, 3).has_value());
}

TEST_F(CheckpointTest, StoppedJobIsRestoredByAnotherExecutorOnNewCoresAndCountsOn) {
  SKIP_UNLESS_DUMPS();
  const int c0 = cpus_[0];
  const int c1 = cpus_.size() > 1 ? cpus_[1] : cpus_[0];
  // Two tasks, both on c0; restored with task 0 on c1 and task 1 on c0.
  JobLaunch l = counter(2, 2, {c0});
  ASSERT_TRUE(a_->launch(l, now_us()).is_ok());
  ASSERT_TRUE(wait_count(l.stdout_path, 2, 5));
  const std::vector<std::string> old_cgroups = a_->cgroup_dirs(2);
  const std::string images = tmp_ + "/img-2";
  auto r = checkpoint_and_wait(*a_, 2, images, CheckpointThen::kStop);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->stopped);
  // Gone from A, silently: no exit is reported for a job that moves.
  EXPECT_TRUE(a_->running().empty());
  EXPECT_TRUE(a_->reap().empty());
  for (const std::string& d : old_cgroups) EXPECT_FALSE(fs::exists(d)) << d;
  const std::string at_dump = read_file(l.stdout_path);
  poll(nullptr, 0, 400);
  EXPECT_EQ(read_file(l.stdout_path), at_dump) << "the stopped job still writes";

  JobLaunch moved = l;
  moved.host_cpus = c0 == c1 ? std::vector<int>{c0} : std::vector<int>{c0, c1};
  moved.tasks[0].host_cpus = {c1};
  moved.tasks[1].host_cpus = {c0};
  moved.hostfile = "node1 slots=2\n";
  Status s = restore_and_wait(*b_, moved, images, now_us());
  ASSERT_TRUE(s.is_ok()) << s.to_string() << "\n" << read_file(images + "/restore.log");
  EXPECT_EQ(b_->running(), std::vector<JobId>{2});
  EXPECT_FALSE(b_->wait_fds().empty());

  // In B's cgroups with B's cpuset, each task on its new core.
  const std::vector<std::string> new_cgroups = b_->cgroup_dirs(2);
  ASSERT_FALSE(new_cgroups.empty());
  EXPECT_NE(new_cgroups, old_cgroups);
  std::map<std::string, std::string> cpus_of_task;
  for (pid_t pid : job_pids(*b_, 2)) {
    if (read_file("/proc/" + std::to_string(pid) + "/comm") != "sh\n") continue;
    std::string env = read_file("/proc/" + std::to_string(pid) + "/environ");
    size_t at = env.find("HPCQ_LOCAL_TASK=");
    if (at == std::string::npos) continue;
    cpus_of_task[env.substr(at + 16, 1)] = status_field(pid, "Cpus_allowed_list");
  }
  EXPECT_EQ(cpus_of_task["0"], std::to_string(c1));
  EXPECT_EQ(cpus_of_task["1"], std::to_string(c0));

  // It counts on from where it was: no gap, no restart from 1.
  const int dumped = std::min(last_count(l.stdout_path, 0), last_count(l.stdout_path, 1));
  ASSERT_TRUE(wait_count(l.stdout_path, 2, dumped + 5)) << read_file(l.stdout_path);
  auto c = counts(l.stdout_path);
  EXPECT_EQ(consecutive(c[0]), "") << read_file(l.stdout_path);
  EXPECT_EQ(consecutive(c[1]), "") << read_file(l.stdout_path);

  ASSERT_TRUE(b_->cancel(2).is_ok());
  auto x = wait_exit(*b_, 2);
  ASSERT_TRUE(x.has_value());
  EXPECT_EQ(x->kind, ExitKind::kCancelled);
  for (const std::string& d : new_cgroups) EXPECT_FALSE(fs::exists(d)) << d;
}

// Another user's job is checkpointed only where a trial dump of an
// unprivileged process works (CRIU without CAP_SYS_RESOURCE cannot read its
// rlimits); elsewhere it is refused before CRIU starts, saying so, and the
// job counts on untouched.
TEST_F(CheckpointTest, AnotherUsersJobOnlyWhereTheUnprivilegedTrialWorks) {
  SKIP_UNLESS_DUMPS();
  JobLaunch l = counter(11, 1, {cpus_[0]});
  l.user = "nobody";
  l.uid = 65534;
  l.gid = 65534;
  ASSERT_TRUE(a_->launch(l, now_us()).is_ok());
  ASSERT_TRUE(wait_count(l.stdout_path, 1, 2));
  const Status others = a_->checkpoint_of_other_users();
  EXPECT_EQ(others.is_ok(), has_cap_sys_resource()) << others.message();
  const std::string images = tmp_ + "/img-11";
  auto r = checkpoint_and_wait(*a_, 11, images, CheckpointThen::kContinue);
  if (others.is_ok()) {
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  } else {
    EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
    EXPECT_NE(r.status().message().find("can checkpoint only root's jobs"), std::string::npos)
        << r.status().message();
    EXPECT_FALSE(fs::exists(images + "/inventory.img"));
  }
  const int before = last_count(l.stdout_path, 0);
  EXPECT_TRUE(wait_count(l.stdout_path, 1, before + 2)) << "it no longer counts";
  ASSERT_TRUE(a_->cancel(11).is_ok());
}

TEST_F(CheckpointTest, CheckpointOfAnUnknownJobFails) {
  SKIP_UNLESS_DUMPS();
  auto r = checkpoint_and_wait(*a_, 99, tmp_ + "/img-99", CheckpointThen::kStop);
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("job 99"), std::string::npos);
  EXPECT_FALSE(fs::exists(tmp_ + "/img-99/hpcq-checkpoint.json"));
}

TEST_F(CheckpointTest, RestoreFromAMissingDirFailsAndLeavesNothing) {
  SKIP_UNLESS_DUMPS();
  const auto children = own_children();
  Status s = restore_and_wait(*b_, counter(3, 1, {cpus_[0]}), tmp_ + "/no-such-dir", now_us());
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("not restored"), std::string::npos) << s.message();
  EXPECT_TRUE(b_->running().empty());
  EXPECT_TRUE(b_->cgroup_dirs(3).empty());
  EXPECT_EQ(own_children(), children);
}

TEST_F(CheckpointTest, FailedRestoresLeaveNothingRunningAndAGoodOneStillWorks) {
  SKIP_UNLESS_DUMPS();
  JobLaunch l = counter(4, 1, {cpus_[0]});
  ASSERT_TRUE(a_->launch(l, now_us()).is_ok());
  ASSERT_TRUE(wait_count(l.stdout_path, 1, 3));
  const std::string images = tmp_ + "/img-4";
  auto r = checkpoint_and_wait(*a_, 4, images, CheckpointThen::kStop);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const std::string dumped_out = read_file(l.stdout_path);
  const auto children = own_children();
  const std::string job_dir = tmp_ + "/state-a/jobs/4";

  // The shell's log (which it holds open) grew since the dump: CRIU refuses
  // the file (its size) after it has created the tree. Nothing may be left.
  const std::string shell_log = images + "/job-dir/shell.log";
  const std::string log_at_dump = read_file(shell_log);
  { std::ofstream(shell_log, std::ios::app) << "written after the dump\n"; }
  Status s = restore_and_wait(*b_, l, images, now_us());
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("job 4 not restored"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("size"), std::string::npos) << s.message();
  EXPECT_TRUE(b_->running().empty());
  EXPECT_EQ(own_children(), children);
  EXPECT_FALSE(fs::exists(job_dir));
  poll(nullptr, 0, 300);
  EXPECT_EQ(read_file(l.stdout_path), dumped_out) << "a failed restore still runs";
  { std::ofstream(shell_log, std::ios::trunc) << log_at_dump; }

  // Corrupt images: the tasks' core images cut short. (A memory image cut
  // short is no test: CRIU 4.1.1 then restores tasks that spin, and only
  // the executor's CRIU timeout ends it.)
  const std::string bad = tmp_ + "/img-4-bad";
  fs::copy(images, bad, fs::copy_options::recursive);
  bool cut = false;
  for (const auto& f : fs::directory_iterator(bad)) {
    if (f.path().filename().string().rfind("core-", 0) == 0) {
      fs::resize_file(f.path(), 3);
      cut = true;
    }
  }
  ASSERT_TRUE(cut);
  s = restore_and_wait(*b_, l, bad, now_us());
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("job 4 not restored"), std::string::npos) << s.message();
  EXPECT_TRUE(b_->running().empty());
  EXPECT_EQ(own_children(), children);
  EXPECT_FALSE(fs::exists(job_dir));

  // The intact images still restore, and the job counts on.
  s = restore_and_wait(*b_, l, images, now_us());
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  const int dumped = last_count(l.stdout_path, 0);
  ASSERT_TRUE(wait_count(l.stdout_path, 1, dumped + 3));
  EXPECT_EQ(consecutive(counts(l.stdout_path)[0]), "") << read_file(l.stdout_path);
  // Restoring it twice is refused: it would run twice.
  EXPECT_EQ(restore_and_wait(*b_, l, images, now_us()).code(), Code::kAlreadyExists);
  ASSERT_TRUE(b_->cancel(4).is_ok());
  ASSERT_TRUE(wait_exit(*b_, 4).has_value());
}

}  // namespace
}  // namespace hpcq::agent
