// Real jobs: real cgroups, a real PID namespace, real setuid. Needs root and a
// cgroup file system; waits on wait_fds()/reap() with generous deadlines and
// asserts nothing about how long things take.
#include "agent/executor/process_executor.h"
#include "agent/executor/leader_lease.h"
#include "tests/unit/agent/executor_fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#ifndef HPCQ_JOB_SHELL
#error "HPCQ_JOB_SHELL must name the hpcq-job-shell binary"
#endif

namespace hpcq::agent {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using namespace fixture;  // now_us, read_file, allowed_cpus, checkpoint_and_wait, ...

class ProcessExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (cgroups, PID namespaces, setuid)";
    auto h = CgroupHierarchy::detect();
    if (!h.is_ok()) GTEST_SKIP() << "no usable cgroup file system: " << h.status().message();
    char tmpl[] = "/tmp/hpcq-executor-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    // Job users write their output here and traverse to their script.
    fs::permissions(tmp_, fs::perms(01777));
    cpus_ = allowed_cpus();
    config_.instance = "test-" + std::to_string(getpid());
    config_.state_dir = tmp_ + "/state";
    config_.job_shell_path = HPCQ_JOB_SHELL;
    config_.kill_grace = kUsPerSecond;
    // Every job watches a lease, as under an agent: one good for an hour
    // unless a test says otherwise.
    fs::create_directories(config_.state_dir);
    config_.leader_lease = config_.state_dir + "/leader-lease";
    auto lease = LeaseFile::open(config_.leader_lease);
    ASSERT_TRUE(lease.is_ok()) << lease.status().to_string();
    lease_.emplace(std::move(lease).value());
    ASSERT_TRUE(lease_->write(boot_clock_us() + 3600 * kUsPerSecond).is_ok());
    auto e = ProcessExecutor::create(config_);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    executor_ = std::move(e).value();
  }

  void TearDown() override {
    executor_.reset();
    if (!tmp_.empty()) {
      std::error_code ec;
      fs::remove_all(tmp_, ec);
    }
  }

  // One task on the first allowed CPU, output to <tmp>/out-<id>.
  JobLaunch job(JobId id, std::vector<std::string> argv) {
    JobLaunch l;
    l.id = id;
    l.user = "root";
    l.argv = std::move(argv);
    l.env = {{"HPCQ_JOB_ID", std::to_string(id)}, {"PATH", "/usr/bin:/bin"}};
    l.cwd = tmp_;
    l.stdout_path = tmp_ + "/out-" + std::to_string(id);
    l.stderr_path = l.stdout_path;
    l.hostfile = "node0 slots=1\n";
    l.tasks = {{0, {cpus_[0]}, "0", {}}};
    l.host_cpus = cpus_;
    l.host_mems = {0};
    return l;
  }

  // Waits for the job's exit the way the agent does: poll the wait fds, check
  // time limits, reap. Generous deadline; nothing is asserted about timing.
  std::optional<JobExit> wait_exit(JobId id) {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      std::vector<pollfd> fds;
      for (int fd : executor_->wait_fds()) fds.push_back({fd, POLLIN, 0});
      poll(fds.data(), fds.size(), 100);
      executor_->check_timeouts(now_us());
      for (const JobExit& e : executor_->reap()) {
        if (e.id == id) return e;
      }
    }
    return std::nullopt;
  }

  // Polls the job's cgroups until at least `n` processes are in them.
  std::vector<pid_t> wait_pids(JobId id, size_t n) {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    std::set<pid_t> pids;
    while (Clock::now() < deadline && pids.size() < n) {
      pids.clear();
      for (const std::string& dir : executor_->cgroup_dirs(id)) {
        std::istringstream in(read_file(dir + "/cgroup.procs"));
        for (pid_t p; in >> p;) pids.insert(p);
      }
      if (pids.size() < n) poll(nullptr, 0, 20);
    }
    return {pids.begin(), pids.end()};
  }

  std::string tmp_;
  std::vector<int> cpus_;
  ExecutorConfig config_;
  std::optional<LeaseFile> lease_;
  std::unique_ptr<ProcessExecutor> executor_;
};

TEST_F(ProcessExecutorTest, TwoTasksSeeTheirRankCpusAndHostfile) {
  JobLaunch l =
      job(1, {"sh", "-c",
              "echo rank=$HPCQ_TASK_RANK local=$HPCQ_LOCAL_TASK cpus=$HPCQ_CPUS "
              "job=$HPCQ_JOB_ID allowed=$(grep Cpus_allowed_list /proc/self/status | "
              "cut -f2) hostfile=$(cat $HPCQ_HOSTFILE) pwd=$(pwd) var=$HPCQ_TEST_TASK_VAR"});
  const int second = cpus_.size() > 1 ? cpus_[1] : cpus_[0];
  l.tasks = {{10, {cpus_[0]}, "4", {{"HPCQ_TEST_TASK_VAR", "ten"}}}, {11, {second}, "5", {}}};
  l.hostfile = "node0 slots=2";
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  EXPECT_EQ(executor_->running(), std::vector<JobId>{1});
  std::vector<std::string> dirs = executor_->cgroup_dirs(1);
  ASSERT_FALSE(dirs.empty());

  auto e = wait_exit(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kCompleted) << e->reason;
  EXPECT_EQ(e->exit_code, 0);
  EXPECT_EQ(e->reason, "");

  const std::string out = read_file(l.stdout_path);
  // A task's own environment (CUDA_VISIBLE_DEVICES, ...) reaches that task only.
  EXPECT_NE(out.find("rank=10 local=0 cpus=4 job=1 allowed=" + std::to_string(cpus_[0]) +
                     " hostfile=node0 slots=2 pwd=" + tmp_ + " var=ten\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("rank=11 local=1 cpus=5 job=1 allowed=" + std::to_string(second) +
                     " hostfile=node0 slots=2 pwd=" + tmp_ + " var=\n"),
            std::string::npos)
      << out;
  // Reported only once everything is gone.
  for (const std::string& d : dirs) EXPECT_FALSE(fs::exists(d)) << d;
  EXPECT_FALSE(fs::exists(config_.state_dir + "/jobs/1"));
  EXPECT_TRUE(executor_->running().empty());
  EXPECT_TRUE(executor_->wait_fds().empty());
}

TEST_F(ProcessExecutorTest, TasksRunInANewPidNamespaceUnderTheShell) {
  // $PPID of a task is the shell, PID 1 of the namespace; the task is PID 2.
  JobLaunch l = job(2, {"sh", "-c", "echo pid=$$ ppid=$PPID"});
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  auto e = wait_exit(2);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kCompleted) << e->reason;
  EXPECT_NE(read_file(l.stdout_path).find("pid=2 ppid=1"), std::string::npos)
      << read_file(l.stdout_path);
}

TEST_F(ProcessExecutorTest, ExitCodeIsPropagated) {
  ASSERT_TRUE(executor_->launch(job(3, {"sh", "-c", "exit 3"}), now_us()).is_ok());
  auto e = wait_exit(3);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kFailed);
  EXPECT_EQ(e->exit_code, 3);
  EXPECT_EQ(e->reason, "task 0: exited with code 3");
}

TEST_F(ProcessExecutorTest, TaskKilledBySignalCountsAs128PlusSignal) {
  ASSERT_TRUE(executor_->launch(job(4, {"sh", "-c", "kill -9 $$"}), now_us()).is_ok());
  auto e = wait_exit(4);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kFailed);
  EXPECT_EQ(e->exit_code, 137);
  EXPECT_EQ(e->reason, "task 0: killed by signal 9 (SIGKILL)");
}

TEST_F(ProcessExecutorTest, HighestTaskCodeWins) {
  JobLaunch l = job(5, {"sh", "-c", "exit $((HPCQ_TASK_RANK + 1))"});
  l.tasks = {{0, {cpus_[0]}, "0", {}}, {1, {cpus_[0]}, "0", {}}, {2, {cpus_[0]}, "0", {}}};
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  auto e = wait_exit(5);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->exit_code, 3);
  EXPECT_EQ(e->reason, "task 2: exited with code 3");
}

TEST_F(ProcessExecutorTest, CancelKillsTheWholeTreeAndRemovesCgroups) {
  JobLaunch l = job(6, {"sh", "-c", "sh -c 'sleep 1000; true' & sleep 1000; wait"});
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  std::vector<std::string> dirs = executor_->cgroup_dirs(6);
  // job shell, outer sh, inner sh, two sleeps
  std::vector<pid_t> pids = wait_pids(6, 5);
  ASSERT_EQ(pids.size(), 5u);

  ASSERT_TRUE(executor_->cancel(6).is_ok());
  auto e = wait_exit(6);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kCancelled);
  EXPECT_EQ(e->exit_code, 137);
  for (pid_t p : pids) {
    EXPECT_EQ(kill(p, 0), -1) << "pid " << p << " survived";
    EXPECT_EQ(errno, ESRCH);
  }
  for (const std::string& d : dirs) EXPECT_FALSE(fs::exists(d)) << d;
  EXPECT_EQ(executor_->cancel(6).code(), Code::kNotFound);
}

TEST_F(ProcessExecutorTest, CancelAfterTheEndIsRefusedAndTheJobKeepsItsOutcome) {
  ASSERT_TRUE(executor_->launch(job(16, {"true"}), now_us()).is_ok());
  // The shell's pidfd, then the pipe on which it says its tasks started.
  std::vector<int> fds = executor_->wait_fds();
  ASSERT_EQ(fds.size(), 2u);
  pollfd p{fds[0], POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 20'000), 1);  // the shell has ended, not yet reaped
  Status refused = executor_->cancel(16);
  EXPECT_EQ(refused.code(), Code::kFailedPrecondition);
  EXPECT_EQ(refused.message(), "job 16 already ended");
  EXPECT_EQ(executor_->wait_fds(), fds);  // still there until reap()
  auto e = wait_exit(16);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kCompleted);
}

// A task opens its output file before it execs, and the shell says its
// tasks are started once all have exec'd: a FIFO nobody reads yet holds
// that word back as long as the test likes (a stalled file system would
// too). launch() runs on the agent's loop and does not wait for it.
TEST_F(ProcessExecutorTest, LaunchDoesNotWaitForTheTasksToStart) {
  const std::string fifo = tmp_ + "/out-fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  JobLaunch l = job(50, {"sleep", "1000"});
  l.stdout_path = l.stderr_path = fifo;
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  EXPECT_TRUE(executor_->take_started().empty()) << "started before its task could open stdout";
  // Held until the shell forwards signals to a task that has exec'd: a
  // namespace's init drops what comes before its handlers.
  ASSERT_TRUE(executor_->signal(50, SIGUSR1).is_ok());
  Fd reader(open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_GE(reader.get(), 0);
  std::vector<LaunchStarted> started;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (started.empty() && Clock::now() < deadline) {
    std::vector<pollfd> fds;
    for (int fd : executor_->wait_fds()) fds.push_back({fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 100);
    started = executor_->take_started();
  }
  ASSERT_EQ(started.size(), 1u) << "the shell never said its task started";
  EXPECT_EQ(started[0].id, 50u);
  EXPECT_EQ(started[0].step, 0u);
  auto e = wait_exit(50);  // sleep has SIGUSR1's default action: it ends
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kFailed);
  EXPECT_EQ(e->exit_code, 128 + SIGUSR1);
  EXPECT_TRUE(executor_->take_started().empty());  // named once
}

TEST_F(ProcessExecutorTest, ACancelBeforeTheTasksStartedEndsTheJob) {
  const std::string fifo = tmp_ + "/out-fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  JobLaunch l = job(51, {"sleep", "1000"});
  l.stdout_path = l.stderr_path = fifo;
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  ASSERT_TRUE(executor_->take_started().empty());
  ASSERT_TRUE(executor_->cancel(51).is_ok());
  auto e = wait_exit(51);
  ASSERT_TRUE(e.has_value()) << "the job outlived its cancel";
  EXPECT_EQ(e->kind, ExitKind::kCancelled);
  // Its start (that its tasks will never start) comes with its end, for
  // the agent to report in that order.
  auto started = executor_->take_started();
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].id, 51u);
}

TEST_F(ProcessExecutorTest, TimeLimitSendsTermAndReportsTimeout) {
  JobLaunch l = job(7, {"sleep", "100"});
  l.time_limit_s = 1;
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  auto e = wait_exit(7);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kTimeout);
  EXPECT_EQ(e->exit_code, 128 + SIGTERM);  // sleep died of the forwarded SIGTERM
  EXPECT_EQ(e->reason, "time limit of 1 s reached");
}

TEST_F(ProcessExecutorTest, TimeLimitKillsWhatIgnoresTerm) {
  // The ignored SIGTERM is inherited by sleep: only the SIGKILL ends the job.
  JobLaunch l = job(8, {"sh", "-c", "trap '' TERM; sleep 100"});
  l.time_limit_s = 1;
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  auto e = wait_exit(8);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kTimeout);
  EXPECT_EQ(e->exit_code, 128 + SIGKILL);
  EXPECT_EQ(e->reason, "time limit of 1 s reached (killed after the grace period)");
}

TEST_F(ProcessExecutorTest, TasksRunAsTheJobUser) {
  if (getpwnam("hpcqtest") == nullptr) {
    ASSERT_EQ(system("useradd --no-create-home --shell /usr/sbin/nologin hpcqtest"), 0);
  }
  passwd* pw = getpwnam("hpcqtest");
  ASSERT_NE(pw, nullptr);
  JobLaunch l = job(9, {"sh", "-c", "echo uid=$(id -u) gid=$(id -g) user=$USER"});
  l.uid = pw->pw_uid;
  l.gid = pw->pw_gid;
  l.user = "hpcqtest";
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  auto e = wait_exit(9);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kCompleted) << e->reason;
  EXPECT_EQ(read_file(l.stdout_path), "uid=" + std::to_string(pw->pw_uid) + " gid=" +
                                          std::to_string(pw->pw_gid) + " user=hpcqtest\n");
  struct stat st {};
  ASSERT_EQ(stat(l.stdout_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, pw->pw_uid);  // opened as the user, not as root
}

TEST_F(ProcessExecutorTest, OutputFileTheUserMayNotWriteFailsTheTask) {
  if (getpwnam("hpcqtest") == nullptr) {
    ASSERT_EQ(system("useradd --no-create-home --shell /usr/sbin/nologin hpcqtest"), 0);
  }
  passwd* pw = getpwnam("hpcqtest");
  ASSERT_NE(pw, nullptr);
  fs::create_directory(tmp_ + "/root-only");
  fs::permissions(tmp_ + "/root-only", fs::perms(0700));
  JobLaunch l = job(10, {"true"});
  l.uid = pw->pw_uid;
  l.gid = pw->pw_gid;
  l.user = "hpcqtest";
  l.stdout_path = tmp_ + "/root-only/out";
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  auto e = wait_exit(10);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kFailed);
  EXPECT_EQ(e->exit_code, 127);
  EXPECT_EQ(e->reason, "task 0: open stdout " + l.stdout_path + ": Permission denied");
  EXPECT_FALSE(fs::exists(l.stdout_path));
}

TEST_F(ProcessExecutorTest, MemoryLimitIsWrittenToTheCgroup) {
  JobLaunch l = job(11, {"sleep", "1000"});
  l.memory_limit_bytes = 256ULL << 20;
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  std::string limit;
  for (const std::string& dir : executor_->cgroup_dirs(11)) {
    for (const char* file : {"/memory.limit_in_bytes", "/memory.max"}) {
      if (fs::exists(dir + file)) limit = read_file(dir + file);
    }
  }
  EXPECT_EQ(limit, std::to_string(256ULL << 20) + "\n");
  ASSERT_TRUE(executor_->cancel(11).is_ok());
  auto e = wait_exit(11);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kCancelled);
}

// A task the kernel kills at the job's memory limit is named so, not only
// "killed by signal 9".
TEST_F(ProcessExecutorTest, AMemoryLimitKillIsNamed) {
  JobLaunch l = job(13, {"dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"});
  l.memory_limit_bytes = 32ULL << 20;
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  auto e = wait_exit(13);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kFailed);
  EXPECT_EQ(e->exit_code, 137);
  EXPECT_EQ(e->reason.rfind("out of memory: the kernel killed ", 0), 0u) << e->reason;
  EXPECT_NE(e->reason.find("signal 9"), std::string::npos) << e->reason;
}

// A fork bomb stops at the job's pids.max: pids_per_core per CPU of the job.
TEST_F(ProcessExecutorTest, PidsLimitScalesWithTheJobsCpus) {
  JobLaunch l = job(12, {"sleep", "1000"});
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  std::string limit;
  for (const std::string& dir : executor_->cgroup_dirs(12)) {
    if (fs::exists(dir + "/pids.max")) limit = read_file(dir + "/pids.max");
  }
  EXPECT_EQ(limit,
            std::to_string(config_.pids_per_core * static_cast<std::int64_t>(cpus_.size())) + "\n");
  ASSERT_TRUE(executor_->cancel(12).is_ok());
  ASSERT_TRUE(wait_exit(12).has_value());
}

TEST_F(ProcessExecutorTest, BadCwdFailsWithAReason) {
  JobLaunch l = job(12, {"true"});
  l.cwd = "/nonexistent/dir";
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  auto e = wait_exit(12);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kFailed);
  EXPECT_EQ(e->exit_code, 127);
  EXPECT_EQ(e->reason, "task 0: chdir /nonexistent/dir: No such file or directory");
  // The user sees it in the job's stderr too.
  EXPECT_NE(read_file(l.stderr_path).find("chdir /nonexistent/dir"), std::string::npos);
}

TEST_F(ProcessExecutorTest, CommandNotFoundFailsWithAReason) {
  JobLaunch l = job(13, {"/nonexistent/command", "x"});
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  auto e = wait_exit(13);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kFailed);
  EXPECT_EQ(e->exit_code, 127);
  EXPECT_EQ(e->reason, "task 0: exec /nonexistent/command: No such file or directory");
}

TEST_F(ProcessExecutorTest, ScriptRunsWithTheArguments) {
  JobLaunch l = job(14, {"job.sh", "first", "second"});
  l.script = "#!/bin/sh\necho script \"$1\" \"$2\" rank=$HPCQ_TASK_RANK\n";
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  auto e = wait_exit(14);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kCompleted) << e->reason;
  EXPECT_EQ(read_file(l.stdout_path), "script first second rank=0\n");
}

TEST_F(ProcessExecutorTest, SeparateStdoutAndStderr) {
  JobLaunch l = job(15, {"sh", "-c", "echo out; echo err >&2"});
  l.stderr_path = tmp_ + "/err-15";
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  auto e = wait_exit(15);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(read_file(l.stdout_path), "out\n");
  EXPECT_EQ(read_file(l.stderr_path), "err\n");
}

TEST_F(ProcessExecutorTest, RejectsBadLaunches) {
  JobLaunch no_tasks = job(20, {"true"});
  no_tasks.tasks.clear();
  EXPECT_EQ(executor_->launch(no_tasks, now_us()).code(), Code::kInvalidArgument);
  JobLaunch no_command = job(21, {});
  EXPECT_EQ(executor_->launch(no_command, now_us()).code(), Code::kInvalidArgument);
  JobLaunch relative = job(22, {"true"});
  relative.stdout_path = "out.txt";
  EXPECT_EQ(executor_->launch(relative, now_us()).code(), Code::kInvalidArgument);
  EXPECT_TRUE(executor_->running().empty());

  ASSERT_TRUE(executor_->launch(job(23, {"sleep", "1000"}), now_us()).is_ok());
  EXPECT_EQ(executor_->launch(job(23, {"true"}), now_us()).code(), Code::kAlreadyExists);
  EXPECT_EQ(executor_->cancel(999).code(), Code::kNotFound);
  ASSERT_TRUE(executor_->cancel(23).is_ok());
  ASSERT_TRUE(wait_exit(23).has_value());
}

TEST_F(ProcessExecutorTest, AJobWhoseLeaseRunsOutIsKilledOnItsNode) {
  // The agent froze or lost the leader: the shell kills the tasks itself,
  // whatever they do with SIGTERM, once the deadline has passed.
  const TimeUs start = boot_clock_us();
  ASSERT_TRUE(lease_->write(start + kUsPerSecond).is_ok());
  JobLaunch l = job(31, {"sh", "-c", "trap '' TERM; sleep 1000 & wait"});
  l.tasks = {{0, {cpus_[0]}, "0", {}}, {1, {cpus_[0]}, "0", {}}};
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  auto e = wait_exit(31);
  ASSERT_TRUE(e.has_value()) << "the tasks outlived their lease";
  EXPECT_GE(boot_clock_us() - start, kUsPerSecond);
  EXPECT_EQ(e->kind, ExitKind::kFailed);
  EXPECT_EQ(e->exit_code, 137);
  EXPECT_EQ(e->reason, std::string("task 0: ") + kLeaseLostError);
}

TEST_F(ProcessExecutorTest, ARenewedLeaseKeepsTheJobRunning) {
  const TimeUs first_deadline = boot_clock_us() + kUsPerSecond / 2;
  ASSERT_TRUE(lease_->write(first_deadline).is_ok());
  ASSERT_TRUE(executor_->launch(job(32, {"sleep", "1000"}), now_us()).is_ok());
  ASSERT_EQ(wait_pids(32, 2).size(), 2u);
  // Renewed before it runs out, as the agent does at each answered heartbeat.
  ASSERT_TRUE(lease_->write(boot_clock_us() + 3600 * kUsPerSecond).is_ok());
  // Until the shell has looked several times past the first deadline.
  while (boot_clock_us() < first_deadline + 5 * kLeaseLookMs * 1000) {
    std::vector<pollfd> fds;
    for (int fd : executor_->wait_fds()) fds.push_back({fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 50);
    ASSERT_TRUE(executor_->reap().empty()) << "the job ended under a renewed lease";
  }
  EXPECT_EQ(wait_pids(32, 2).size(), 2u);
  ASSERT_TRUE(executor_->cancel(32).is_ok());
  auto e = wait_exit(32);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kCancelled) << e->reason;
}

TEST_F(ProcessExecutorTest, ShutdownKillsJobsAndRemovesCgroups) {
  ASSERT_TRUE(executor_->launch(job(30, {"sleep", "1000"}), now_us()).is_ok());
  std::vector<std::string> dirs = executor_->cgroup_dirs(30);
  std::vector<pid_t> pids = wait_pids(30, 2);
  ASSERT_EQ(pids.size(), 2u);
  executor_->shutdown();
  EXPECT_TRUE(executor_->running().empty());
  EXPECT_TRUE(executor_->reap().empty());
  for (pid_t p : pids) EXPECT_EQ(kill(p, 0), -1) << "pid " << p << " survived";
  for (const std::string& d : dirs) EXPECT_FALSE(fs::exists(d)) << d;
}

TEST_F(ProcessExecutorTest, CreateRemovesStaleEmptyCgroupsOfTheSameInstance) {
  auto h = CgroupHierarchy::detect();
  ASSERT_TRUE(h.is_ok());
  auto stale = h->create_job(config_.instance, 77, {});
  ASSERT_TRUE(stale.is_ok()) << stale.status().to_string();
  for (const std::string& d : stale->dirs()) ASSERT_TRUE(fs::exists(d));
  auto again = ProcessExecutor::create(config_);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  for (const std::string& d : stale->dirs()) EXPECT_FALSE(fs::exists(d)) << d;
}

TEST_F(ProcessExecutorTest, ShellThatFailsEarlyIsReportedWithItsLastLogLine) {
  // A stand-in shell that dies before starting any task: launch() must not
  // hang waiting for "started", and the reason comes from the shell's log.
  const std::string broken = tmp_ + "/broken-shell";
  {
    std::ofstream out(broken);
    out << "#!/bin/sh\necho 'hpcq-job-shell: cannot read launch.json' >&2\nexit 125\n";
  }
  fs::permissions(broken, fs::perms(0755));
  ExecutorConfig config = config_;
  config.instance += "-broken";
  config.job_shell_path = broken;
  auto e = ProcessExecutor::create(config);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  executor_ = std::move(e).value();
  ASSERT_TRUE(executor_->launch(job(40, {"true"}), now_us()).is_ok());
  auto exit = wait_exit(40);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->kind, ExitKind::kFailed);
  EXPECT_EQ(exit->exit_code, 125);
  EXPECT_EQ(exit->reason, "hpcq-job-shell: cannot read launch.json");
}

// --mpi pmi1,pmix: a world's tasks get PMI-1's and PMIx's variables from the
// PMIx shell, and PMI-1's alone from a node that has no PMIx shell.
TEST_F(ProcessExecutorTest, BothInterfacesAreOfferedWhereThePmixShellIsPresent) {
  auto world_of_two = [&](JobId id) {
    JobLaunch l = job(id, {"sh", "-c", "echo rank=$PMI_RANK fd=${PMI_FD:+set} pmix=$PMIX_RANK"});
    l.tasks = {{0, {cpus_[0]}, "0", {}}, {1, {cpus_[0]}, "0", {}}};
    l.pmi.api = "pmi1,pmix";
    l.pmi.kvsname = "hpcq_" + std::to_string(id) + "_0";
    l.pmi.size = 2;
    l.pmi.nodes = 1;
    l.pmi.node_names = {"node0"};
    l.pmi.node_of_rank = {0, 0};
    return l;
  };
  ASSERT_TRUE(fs::exists(std::string(HPCQ_JOB_SHELL) + kPmixShellSuffix));
  JobLaunch l = world_of_two(50);
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  auto e = wait_exit(50);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kCompleted) << e->reason;
  std::string out = read_file(l.stdout_path);
  EXPECT_NE(out.find("rank=0 fd=set pmix=0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("rank=1 fd=set pmix=1\n"), std::string::npos) << out;

  const std::string alone = tmp_ + "/shell-without-pmix";
  fs::create_directories(alone);
  fs::copy_file(HPCQ_JOB_SHELL, alone + "/hpcq-job-shell");
  ExecutorConfig config = config_;
  config.instance += "-alone";
  config.job_shell_path = alone + "/hpcq-job-shell";
  executor_.reset();
  auto created = ProcessExecutor::create(config);
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  executor_ = std::move(created).value();
  l = world_of_two(51);
  ASSERT_TRUE(executor_->launch(l, now_us()).is_ok());
  e = wait_exit(51);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitKind::kCompleted) << e->reason;
  out = read_file(l.stdout_path);
  EXPECT_NE(out.find("rank=0 fd=set pmix=\n"), std::string::npos) << out;
  EXPECT_NE(out.find("rank=1 fd=set pmix=\n"), std::string::npos) << out;
}

TEST_F(ProcessExecutorTest, CreateRefusesAMissingShell) {
  ExecutorConfig bad = config_;
  bad.job_shell_path = tmp_ + "/no-such-shell";
  EXPECT_EQ(ProcessExecutor::create(bad).status().code(), Code::kFailedPrecondition);
}

}  // namespace
}  // namespace hpcq::agent
