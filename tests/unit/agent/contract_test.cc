#include "shell/contract.h"

#include <gtest/gtest.h>

namespace hpcq::agent {
namespace {

TEST(JobLaunchTest, BytesThatAreNotUtf8RoundTrip) {
  JobLaunch l;
  l.argv = {"/bin/echo", "caf\xe9"};
  l.script = "# \xff\n";
  l.env = {{"X", "\xe9"}};
  l.cwd = "/tmp/\xe9";
  l.stdout_path = "/tmp/o\xff";
  l.stderr_path = "/tmp/e\xff";
  l.tasks = {{0, {0}, "0", {{"Y", "\xfe"}}, 0, {}, ""}};
  l.workers = {{0, 0, {0}, {0}, 0, {}, {}, ""}};
  auto back = decode_launch(encode_launch(l));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->argv, l.argv);
  EXPECT_EQ(back->script, l.script);
  EXPECT_EQ(back->env, l.env);
  EXPECT_EQ(back->cwd, l.cwd);
  EXPECT_EQ(back->stdout_path, l.stdout_path);
  EXPECT_EQ(back->stderr_path, l.stderr_path);
  EXPECT_EQ(back->tasks.at(0).env, l.tasks.at(0).env);
}

TEST(JobLaunchTest, LaunchRoundTrips) {
  JobLaunch l;
  l.id = 42;
  l.uid = 1000;
  l.gid = 100;
  l.user = "alice";
  l.home = "/home/alice";
  l.groups = {100, 27, 1001};
  l.argv = {"sh", "-c", "echo \"$X\""};
  l.script = "#!/bin/sh\necho hi\n";
  l.env = {{"HPCQ_JOB_ID", "42"}, {"X", "a b"}};
  l.cwd = "/home/alice";
  l.stdout_path = "/tmp/o";
  l.stderr_path = "/tmp/e";
  l.hostfile = "n1 slots=2\n";
  l.tasks = {{3, {0, 1}, "0-1", {{"CUDA_VISIBLE_DEVICES", "1"}}, 0, {1}, "/cg/job-42/gpus-1"},
             {4, {2}, "2", {}, 1, {}, ""}};
  l.workers = {{7, 1, {0, 1}, {0}, 1ULL << 32, {"/cg/a/worker-7"}, {}, ""},
               {8, 1, {2}, {0}, 1ULL << 31, {}, {"runc", "run"}, "/j/oci/worker-8/results.json"}};
  l.image = "/images/busybox";
  l.host_cpus = {0, 1, 2};
  l.host_mems = {0};
  l.memory_limit_bytes = 1ULL << 33;
  l.time_limit_s = 60;

  auto back = decode_launch(encode_launch(l));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->id, 42u);
  EXPECT_EQ(back->uid, 1000u);
  EXPECT_EQ(back->gid, 100u);
  EXPECT_EQ(back->user, "alice");
  EXPECT_EQ(back->home, "/home/alice");
  EXPECT_EQ(back->groups, l.groups);
  EXPECT_EQ(back->argv, l.argv);
  EXPECT_EQ(back->script, l.script);
  EXPECT_EQ(back->env, l.env);
  EXPECT_EQ(back->cwd, l.cwd);
  EXPECT_EQ(back->stdout_path, "/tmp/o");
  EXPECT_EQ(back->stderr_path, "/tmp/e");
  EXPECT_EQ(back->hostfile, l.hostfile);
  ASSERT_EQ(back->tasks.size(), 2u);
  EXPECT_EQ(back->tasks[1].rank, 4);
  EXPECT_EQ(back->tasks[0].host_cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(back->tasks[0].logical_cpus, "0-1");
  EXPECT_EQ(back->tasks[0].env.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_TRUE(back->tasks[1].env.empty());
  EXPECT_EQ(back->tasks[1].worker, 1);
  EXPECT_EQ(back->tasks[0].gpus, (std::vector<int>{1}));
  EXPECT_EQ(back->tasks[0].device_cgroup, "/cg/job-42/gpus-1");
  EXPECT_TRUE(back->tasks[1].gpus.empty());
  EXPECT_TRUE(back->tasks[1].device_cgroup.empty());
  ASSERT_EQ(back->workers.size(), 2u);
  EXPECT_EQ(back->workers[0].id, 7);
  EXPECT_EQ(back->workers[0].group, 1);
  EXPECT_EQ(back->workers[0].host_cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(back->workers[0].memory_limit_bytes, 1ULL << 32);
  EXPECT_EQ(back->workers[0].cgroup_dirs, (std::vector<std::string>{"/cg/a/worker-7"}));
  EXPECT_EQ(back->workers[1].command, (std::vector<std::string>{"runc", "run"}));
  EXPECT_EQ(back->workers[1].results, "/j/oci/worker-8/results.json");
  EXPECT_EQ(back->image, "/images/busybox");
  EXPECT_EQ(back->host_cpus, l.host_cpus);
  EXPECT_EQ(back->host_mems, l.host_mems);
  EXPECT_EQ(back->memory_limit_bytes, 1ULL << 33);
  EXPECT_EQ(back->time_limit_s, 60);
}

TEST(JobLaunchTest, OutputFramesRoundTrip) {
  const std::string data("line\n\0\xff", 7);
  auto frame = decode_output_frame(encode_output_frame(70000, true, data));
  ASSERT_TRUE(frame.is_ok()) << frame.status().message();
  EXPECT_EQ(frame->rank, 70000);
  EXPECT_TRUE(frame->is_stderr);
  EXPECT_EQ(frame->data, data);
  EXPECT_FALSE(decode_output_frame("abc").is_ok());
  EXPECT_FALSE(decode_output_frame(std::string("\0\0\0\0\3", 5)).is_ok());
}

TEST(JobLaunchTest, FenceFramesRoundTripBothWaysInChunks) {
  const std::string data(kOutputFrameData + 10, 'k');
  const auto frames = split_fence(7, data);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_FALSE(frames[0].last);
  EXPECT_TRUE(frames[1].last);
  auto up = decode_output_frame(encode_output_frame(frames[1]));
  ASSERT_TRUE(up.is_ok() && up->fence) << up.status().message();
  EXPECT_EQ(up->fence->seq, 7u);
  EXPECT_TRUE(up->fence->last);
  EXPECT_EQ(up->fence->data, std::string(10, 'k'));
  auto down = decode_input_frame(encode_input_frame(FenceFrame{9, false, "keys"}));
  ASSERT_TRUE(down.is_ok() && down->fence) << down.status().message();
  EXPECT_EQ(down->fence->seq, 9u);
  EXPECT_FALSE(down->fence->last);
  EXPECT_EQ(down->fence->data, "keys");
  EXPECT_FALSE(down->fence->failed);
  // A fence that failed: why, in one frame.
  auto failed = decode_input_frame(encode_input_frame(FenceFrame{3, true, "too big", true}));
  ASSERT_TRUE(failed.is_ok() && failed->fence) << failed.status().message();
  EXPECT_TRUE(failed->fence->failed && failed->fence->last);
  EXPECT_EQ(failed->fence->seq, 3u);
  EXPECT_EQ(failed->fence->data, "too big");
  auto input = decode_input_frame(encode_input_frame(TaskInput{"abc", true, 0, 0, {}, {}}));
  ASSERT_TRUE(input.is_ok());
  EXPECT_FALSE(input->fence);
  EXPECT_EQ(input->data, "abc");
  EXPECT_EQ(split_fence(1, "").size(), 1u);  // an empty contribution is one frame
}

TEST(JobLaunchTest, ModexFramesRoundTripBothWays) {
  ModexFrame request;
  request.tag = 0x1234'0000'0005ull;  // the agent's tag: the asker's rank in the high half
  request.rank = 11;
  request.node = 3;
  auto up = decode_output_frame(encode_output_frame(request));
  ASSERT_TRUE(up.is_ok() && up->modex) << up.status().message();
  EXPECT_EQ(up->modex->kind, ModexFrame::Kind::kRequest);
  EXPECT_EQ(up->modex->tag, request.tag);
  EXPECT_EQ(up->modex->rank, 11u);
  EXPECT_EQ(up->modex->node, 3u);
  EXPECT_FALSE(up->fence);
  // An answer larger than a frame: split, each chunk with the tag and status.
  const auto answer = split_modex(5, -46, std::string(kOutputFrameData + 3, 'd'));
  ASSERT_EQ(answer.size(), 2u);
  EXPECT_FALSE(answer[0].last);
  auto down = decode_input_frame(encode_input_frame(answer[1]));
  ASSERT_TRUE(down.is_ok() && down->modex) << down.status().message();
  EXPECT_EQ(down->modex->kind, ModexFrame::Kind::kData);
  EXPECT_TRUE(down->modex->last);
  EXPECT_EQ(down->modex->tag, 5u);
  EXPECT_EQ(down->modex->status, -46);
  EXPECT_EQ(down->modex->data, "ddd");
  EXPECT_EQ(split_modex(1, 0, "").size(), 1u);  // no data is one frame
  // Short or unknown headers are refused, not read past.
  std::string bad = encode_output_frame(request);
  EXPECT_FALSE(decode_output_frame(bad.substr(0, bad.size() - 1)).is_ok());
  bad[5] = 9;
  EXPECT_FALSE(decode_output_frame(bad).is_ok());
  EXPECT_FALSE(decode_input_frame(std::string(1, 16)).is_ok());
}

TEST(JobLaunchTest, FailureFramesCarryTheCodeAndWhy) {
  auto frame = decode_output_frame(
      encode_failure_frame(9, 1'795'000'000'123'456, "task 2: called MPI_Abort"));
  ASSERT_TRUE(frame.is_ok() && frame->failure_code) << frame.status().message();
  EXPECT_EQ(*frame->failure_code, 9);
  EXPECT_EQ(frame->failure_seen_at, 1'795'000'000'123'456);
  EXPECT_EQ(frame->data, "task 2: called MPI_Abort");
  // A shell from before the time was sent: not known.
  std::string old = encode_output_frame(0, false, "9\nx");
  old[4] = 4;
  frame = decode_output_frame(old);
  ASSERT_TRUE(frame.is_ok() && frame->failure_code) << frame.status().message();
  EXPECT_EQ(frame->failure_seen_at, 0);
  EXPECT_EQ(frame->data, "x");
  std::string bad = encode_failure_frame(9, 5, "x");
  bad[5] = 'z';
  EXPECT_FALSE(decode_output_frame(bad).is_ok());
  bad = encode_failure_frame(9, 5, "x");
  bad[7] = '-';
  EXPECT_FALSE(decode_output_frame(bad).is_ok());
  EXPECT_FALSE(decode_output_frame(std::string("\0\0\0\0\4", 5)).is_ok());
}

TEST(JobLaunchTest, PmiWorldRoundTripsAndOpensAChannelOnlyAcrossNodes) {
  JobLaunch l;
  l.id = 4;
  l.pmi.kvsname = "hpcq_4_0";
  l.pmi.size = 8;
  l.pmi.nodes = 2;
  l.pmi.process_mapping = "(vector,(0,2,4))";
  l.pmi.max_kvs_bytes = 123456;
  EXPECT_FALSE(l.has_channel());  // not from the start: when its tasks first fence
  EXPECT_TRUE(l.channel_on_demand());
  auto back = decode_launch(encode_launch(l));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->pmi.kvsname, "hpcq_4_0");
  EXPECT_EQ(back->pmi.size, 8);
  EXPECT_EQ(back->pmi.nodes, 2);
  EXPECT_EQ(back->pmi.process_mapping, "(vector,(0,2,4))");
  EXPECT_EQ(back->pmi.max_kvs_bytes, 123456);
  l.pmi.nodes = 1;
  EXPECT_FALSE(l.channel_on_demand());  // a one-node world fences in the shell
  l.pmi.nodes = 2;
  l.forward_output = true;
  EXPECT_TRUE(l.has_channel());  // hpcq run's channel serves the fences too
  EXPECT_FALSE(l.channel_on_demand());
  JobLaunch none;
  EXPECT_TRUE(decode_launch(encode_launch(none))->pmi.kvsname.empty());
}

TEST(JobLaunchTest, PmixWorldCarriesItsLayoutAndRefusesOneOffItsNodes) {
  JobLaunch l;
  l.pmi.api = "pmix";
  l.pmi.kvsname = "hpcq_5_0";
  l.pmi.size = 3;
  l.pmi.nodes = 2;
  l.pmi.node_names = {"node1", "node2"};
  l.pmi.node = 1;
  l.pmi.node_of_rank = {0, 0, 1};
  l.pmi.node_ranks = {3, 7};
  auto back = decode_launch(encode_launch(l));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->pmi.api, "pmix");
  EXPECT_EQ(back->pmi.node_names, l.pmi.node_names);
  EXPECT_EQ(back->pmi.node, 1);
  EXPECT_EQ(back->pmi.node_of_rank, l.pmi.node_of_rank);
  EXPECT_EQ(back->pmi.node_ranks, l.pmi.node_ranks);
  auto refused = [](JobLaunch bad) { return decode_launch(encode_launch(bad)).status().message(); };
  JobLaunch off = l;
  off.pmi.node_of_rank = {0, 2, 1};  // no third node
  EXPECT_EQ(refused(off), "launch.json: a PMI world whose ranks or node are off its nodes");
  off = l;
  off.pmi.node_of_rank = {0, 1};  // a rank without a node
  EXPECT_EQ(refused(off), "launch.json: a PMI world whose ranks or node are off its nodes");
  off = l;
  off.pmi.node_ranks = {3};  // a node without an overlay rank
  EXPECT_EQ(refused(off), "launch.json: a PMI world whose ranks or node are off its nodes");
  off = l;
  off.pmi.node = 2;
  EXPECT_EQ(refused(off), "launch.json: a PMI world whose ranks or node are off its nodes");
  off = l;
  off.pmi.api = "pmi2";
  EXPECT_EQ(refused(off), "launch.json: unknown MPI interface 'pmi2'");
}

TEST(JobLaunchTest, MpichHostfileHasNoSlotsWord) {
  EXPECT_EQ(mpich_hostfile("node1 slots=4\nnode2 slots=2\n"), "node1:4\nnode2:2\n");
  EXPECT_EQ(mpich_hostfile("node1 slots=1"), "node1:1\n");
  EXPECT_EQ(mpich_hostfile(""), "");
}

TEST(JobLaunchTest, BatchAndForwardedOutputRoundTrip) {
  JobLaunch l;
  l.id = 3;
  l.batch = true;
  l.forward_output = true;
  auto back = decode_launch(encode_launch(l));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_TRUE(back->batch);
  EXPECT_TRUE(back->forward_output);
}

TEST(JobLaunchTest, MalformedLaunchIsAnErrorNotAnException) {
  EXPECT_EQ(decode_launch("not json").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(decode_launch("[1]").status().code(), Code::kInvalidArgument);
  auto missing = decode_launch(R"({"id": 1})");
  EXPECT_EQ(missing.status().code(), Code::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("launch.json"), std::string::npos);
  JobLaunch l;
  std::string text = encode_launch(l);
  text.replace(text.find("\"uid\": 0"), 8, "\"uid\": \"x\"");
  EXPECT_EQ(decode_launch(text).status().code(), Code::kInvalidArgument);
}

TEST(JobLaunchTest, TaskNamingAMissingWorkerIsRefused) {
  JobLaunch l;
  l.tasks = {{0, {0}, "0", {}, 0, {}, ""}};
  EXPECT_EQ(decode_launch(encode_launch(l)).status().code(), Code::kInvalidArgument);
  ensure_workers(l);  // the node's whole part becomes worker 0
  ASSERT_EQ(l.workers.size(), 1u);
  EXPECT_TRUE(decode_launch(encode_launch(l)).is_ok());
}

TEST(JobLaunchTest, ResultsRoundTrip) {
  ShellResults r;
  r.exit_code = 137;
  r.tasks = {{0, 0, 0, 0, ""}, {1, 1, 137, 9, ""}, {2, 2, 127, 0, "chdir /x: No such file"}};
  auto back = decode_results(encode_results(r));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->exit_code, 137);
  ASSERT_EQ(back->tasks.size(), 3u);
  EXPECT_EQ(back->tasks[1].signal, 9);
  EXPECT_EQ(back->tasks[2].error, "chdir /x: No such file");
  EXPECT_EQ(decode_results("{}").status().code(), Code::kInvalidArgument);
}

TEST(JobLaunchTest, JobCodeIsZeroOrTheHighestTaskCode) {
  EXPECT_EQ(job_exit_code({}), 0);
  EXPECT_EQ(job_exit_code({{0, 0, 0, 0, ""}, {1, 1, 0, 0, ""}}), 0);
  EXPECT_EQ(job_exit_code({{0, 0, 3, 0, ""}, {1, 1, 137, 9, ""}, {2, 2, 1, 0, ""}}), 137);
}

TEST(JobLaunchTest, ReasonNamesTheDecidingTask) {
  ShellResults ok;
  ok.tasks = {{0, 0, 0, 0, ""}};
  EXPECT_EQ(describe_results(ok), "");

  ShellResults failed;
  failed.tasks = {{0, 0, 1, 0, ""}, {5, 1, 3, 0, ""}};
  EXPECT_EQ(describe_results(failed), "task 5: exited with code 3");

  ShellResults killed;
  killed.tasks = {{0, 0, 137, 9, ""}};
  EXPECT_EQ(describe_results(killed), "task 0: killed by signal 9 (SIGKILL)");

  // A task that could not start explains the failure better than exit codes.
  ShellResults start_failure;
  start_failure.tasks = {{0, 0, 200, 0, ""},
                         {1, 1, 127, 0, "chdir /nope: No such file or directory"}};
  EXPECT_EQ(describe_results(start_failure), "task 1: chdir /nope: No such file or directory");

  // The ranks the shell ended after another failed neither decide the code
  // nor name the failure.
  ShellResults world;
  world.tasks = {{0, 0, 137, 9, ""}, {1, 1, 5, 0, ""}};
  world.tasks[0].ended_by_shell = true;
  EXPECT_EQ(job_exit_code(world.tasks), 5);
  EXPECT_EQ(describe_results(world), "task 1: exited with code 5");
}

TEST(JobLaunchTest, JobFilesLiveInTheJobDirectory) {
  JobFiles f("/var/lib/hpcq/jobs/7");
  EXPECT_EQ(f.launch, "/var/lib/hpcq/jobs/7/launch.json");
  EXPECT_EQ(f.script, "/var/lib/hpcq/jobs/7/script");
  EXPECT_EQ(f.hostfile, "/var/lib/hpcq/jobs/7/hostfile");
  EXPECT_EQ(f.results, "/var/lib/hpcq/jobs/7/results.json");
}

}  // namespace
}  // namespace hpcq::agent
