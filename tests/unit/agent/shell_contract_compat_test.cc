// The shell contract across builds (tests/data/shell/README.md): a shell
// outlives its agent and an upgraded agent takes it back, so what one build
// wrote (launch.json, results.json, shell.json, the channel's frames) the
// next must read as it was meant; and this build must write the recording
// byte for byte, so that a change does not go unnoticed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "agent/executor/shell_record.h"
#include "shell/contract.h"

namespace hpcq::agent {
namespace {

JobLaunch sample_launch() {
  JobLaunch l;
  l.id = 42;
  l.step = 2;
  l.uid = 1000;
  l.gid = 1000;
  l.user = "alice";
  l.home = "/home/alice";
  l.groups = {1000, 27};
  l.argv = {"/bin/sh", "-c", "echo hi"};
  l.env = {{"HPCQ_JOB_ID", "42"}, {"PATH", "/usr/bin:/bin"}};
  l.cwd = "/home/alice/run";
  l.stdout_path = "/home/alice/run/out";
  l.stderr_path = "/home/alice/run/err";
  l.hostfile = "node1 slots=2\nnode2 slots=2\n";
  l.tmpdir = "/var/lib/hpcq/jobs/42/tmp";
  TaskSpec task;
  task.rank = 1;
  task.host_cpus = {0, 1};
  task.logical_cpus = "0-1";
  task.env = {{"CUDA_VISIBLE_DEVICES", "0"}};
  task.gpus = {0};
  l.tasks = {task};
  WorkerSpec worker;
  worker.host_cpus = {0, 1};
  worker.host_mems = {0};
  worker.memory_limit_bytes = 1 << 30;
  l.workers = {worker};
  l.host_cpus = {0, 1};
  l.host_mems = {0};
  l.memory_limit_bytes = 1 << 30;
  l.time_limit_s = 3600;
  l.forward_output = true;
  l.warn_signal = 10;
  l.warn_seconds = 60;
  l.leader_lease = "/var/lib/hpcq/lease";
  l.pmi.api = "pmi1";
  l.pmi.kvsname = "hpcq-42-2";
  l.pmi.size = 4;
  l.pmi.nodes = 2;
  l.pmi.node_names = {"node1", "node2"};
  l.pmi.node = 0;
  l.pmi.node_of_rank = {0, 0, 1, 1};
  l.pmi.node_ranks = {1, 2};
  return l;
}

ShellResults sample_results() {
  ShellResults r;
  r.exit_code = 139;
  r.cpu_time_us = 1'500'000;
  TaskResult ok;
  ok.rank = 0;
  TaskResult killed;
  killed.rank = 1;
  killed.local = 1;
  killed.exit_code = 139;
  killed.signal = 11;
  TaskResult ended;
  ended.rank = 2;
  ended.local = 2;
  ended.exit_code = 143;
  ended.signal = 15;
  ended.ended_by_shell = true;
  r.tasks = {ok, killed, ended};
  return r;
}

ShellRecord sample_record() {
  ShellRecord s;
  s.pid = 4242;
  s.start_ticks = 123456789;
  s.launched = 1'780'000'000'000'000;
  s.time_limit_s = 7200;
  return s;
}

FenceFrame sample_fence() { return {7, true, "key=value\n", false}; }

ModexFrame sample_modex() {
  ModexFrame m;
  m.kind = ModexFrame::Kind::kData;
  m.tag = (std::uint64_t{3} << 32) | 9;
  m.rank = 5;
  m.node = 2;
  m.status = -46;
  m.data = "blob";
  return m;
}

std::map<std::string, std::string> recordings() {
  TaskInput input;
  input.data = "typed\n";
  input.eof = true;
  input.rows = 24;
  input.cols = 80;
  return {
      {"launch.json", encode_launch(sample_launch())},
      {"results.json", encode_results(sample_results())},
      {"shell.json", encode_shell_record(sample_record())},
      {"output.frame", encode_output_frame(3, true, "hello\n")},
      {"output_fence.frame", encode_output_frame(sample_fence())},
      {"output_modex.frame", encode_output_frame(sample_modex())},
      {"output_failure.frame", encode_failure_frame(5, 1'780'000'000'000'123, "task 3: exited")},
      {"input.frame", encode_input_frame(input)},
      {"input_fence.frame", encode_input_frame(sample_fence())},
      {"input_modex.frame", encode_input_frame(sample_modex())},
  };
}

std::string recorded(const std::string& name) {
  std::ifstream in(std::string(HPCQ_SHELL_DATA_DIR) + "/" + name, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TEST(ShellContract, ThisBuildWritesTheRecording) {
  if (const char* dir = std::getenv("HPCQ_RECORD_SHELL_CONTRACT")) {
    for (const auto& [name, bytes] : recordings()) {
      std::ofstream(std::string(dir) + "/" + name, std::ios::binary) << bytes;
    }
    GTEST_SKIP() << "recorded into " << dir;
  }
  for (const auto& [name, bytes] : recordings()) {
    EXPECT_EQ(recorded(name), bytes) << name << " changed: tests/data/shell/README.md";
  }
}

TEST(ShellContract, TheRecordedFilesReadAsTheyWereMeant) {
  auto launch = decode_launch(recorded("launch.json"));
  ASSERT_TRUE(launch.is_ok()) << launch.status().message();
  EXPECT_EQ(launch->id, 42u);
  EXPECT_EQ(launch->step, 2u);
  EXPECT_EQ(launch->user, "alice");
  EXPECT_EQ(launch->argv, (std::vector<std::string>{"/bin/sh", "-c", "echo hi"}));
  EXPECT_EQ(launch->env.at("HPCQ_JOB_ID"), "42");
  ASSERT_EQ(launch->tasks.size(), 1u);
  EXPECT_EQ(launch->tasks[0].rank, 1);
  EXPECT_EQ(launch->tasks[0].logical_cpus, "0-1");
  EXPECT_EQ(launch->time_limit_s, 3600);
  EXPECT_TRUE(launch->forward_output);
  EXPECT_EQ(launch->leader_lease, "/var/lib/hpcq/lease");
  EXPECT_EQ(launch->pmi.kvsname, "hpcq-42-2");
  EXPECT_EQ(launch->pmi.node_of_rank, (std::vector<int>{0, 0, 1, 1}));

  auto results = decode_results(recorded("results.json"));
  ASSERT_TRUE(results.is_ok()) << results.status().message();
  EXPECT_EQ(results->exit_code, 139);
  ASSERT_EQ(results->tasks.size(), 3u);
  EXPECT_EQ(results->tasks[1].signal, 11);
  EXPECT_TRUE(results->tasks[2].ended_by_shell);
  EXPECT_EQ(describe_results(*results), "task 1: killed by signal 11 (SIGSEGV)");

  auto record = decode_shell_record(recorded("shell.json"));
  ASSERT_TRUE(record.is_ok()) << record.status().message();
  EXPECT_EQ(record->pid, 4242);
  EXPECT_EQ(record->start_ticks, 123456789u);
  EXPECT_EQ(record->time_limit_s, 7200);
}

TEST(ShellContract, TheRecordedFramesReadAsTheyWereMeant) {
  auto output = decode_output_frame(recorded("output.frame"));
  ASSERT_TRUE(output.is_ok());
  EXPECT_EQ(output->rank, 3);
  EXPECT_TRUE(output->is_stderr);
  EXPECT_EQ(output->data, "hello\n");
  auto fence = decode_output_frame(recorded("output_fence.frame"));
  ASSERT_TRUE(fence.is_ok() && fence->fence);
  EXPECT_EQ(fence->fence->seq, 7u);
  EXPECT_EQ(fence->fence->data, "key=value\n");
  auto modex = decode_output_frame(recorded("output_modex.frame"));
  ASSERT_TRUE(modex.is_ok() && modex->modex);
  EXPECT_EQ(modex->modex->tag, (std::uint64_t{3} << 32) | 9);
  EXPECT_EQ(modex->modex->status, -46);
  EXPECT_EQ(modex->modex->data, "blob");
  auto failure = decode_output_frame(recorded("output_failure.frame"));
  ASSERT_TRUE(failure.is_ok() && failure->failure_code);
  EXPECT_EQ(*failure->failure_code, 5);
  EXPECT_EQ(failure->failure_seen_at, 1'780'000'000'000'123);
  EXPECT_EQ(failure->data, "task 3: exited");

  auto input = decode_input_frame(recorded("input.frame"));
  ASSERT_TRUE(input.is_ok());
  EXPECT_EQ(input->data, "typed\n");
  EXPECT_TRUE(input->eof);
  EXPECT_EQ(input->rows, 24u);
  EXPECT_EQ(input->cols, 80u);
  auto input_fence = decode_input_frame(recorded("input_fence.frame"));
  ASSERT_TRUE(input_fence.is_ok() && input_fence->fence);
  EXPECT_EQ(input_fence->fence->seq, 7u);
  auto input_modex = decode_input_frame(recorded("input_modex.frame"));
  ASSERT_TRUE(input_modex.is_ok() && input_modex->modex);
  EXPECT_EQ(input_modex->modex->rank, 5u);
}

}  // namespace
}  // namespace hpcq::agent
