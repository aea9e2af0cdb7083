#include "agent/executor/shell_channel.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

namespace hpcq::agent {
namespace {

// A channel over a socketpair: `shell` is the job shell's end.
struct Pair {
  Pair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), 0);
    channel.fd = fds[0];
    channel.open = true;
    shell = fds[1];
    channel.pmi_nodes = 2;
    channel.pmi_node_ranks = {1, 3};
  }
  ~Pair() {
    channel.close();
    if (shell >= 0) close(shell);
  }
  void from_shell(const std::string& frame) {
    ASSERT_EQ(::send(shell, frame.data(), frame.size(), 0), static_cast<ssize_t>(frame.size()));
  }
  void read(std::size_t max_kvs_bytes = 1 << 20) {
    channel.read({7, 2, max_kvs_bytes, output, events});
  }
  ShellChannel channel;
  int shell = -1;
  std::vector<TaskOutput> output;
  std::vector<PmiEvent> events;
};

TEST(ShellChannel, OutputFramesBecomeTaskOutput) {
  Pair p;
  p.from_shell(encode_output_frame(3, true, "oops\n"));
  p.read();
  ASSERT_EQ(p.output.size(), 1u);
  EXPECT_EQ(p.output[0].id, 7u);
  EXPECT_EQ(p.output[0].step, 2u);
  EXPECT_EQ(p.output[0].rank, 3);
  EXPECT_TRUE(p.output[0].is_stderr);
  EXPECT_EQ(p.output[0].data, "oops\n");
}

TEST(ShellChannel, AFenceIsOneEventOnceItsLastChunkCame) {
  Pair p;
  p.from_shell(encode_output_frame(FenceFrame{4, false, "a=1\n", false}));
  p.read();
  EXPECT_TRUE(p.events.empty());
  p.from_shell(encode_output_frame(FenceFrame{4, true, "b=2\n", false}));
  p.read();
  ASSERT_EQ(p.events.size(), 1u);
  const PmiEvent& fence = p.events[0];
  EXPECT_EQ(fence.kind, PmiEvent::Kind::kFence);
  EXPECT_EQ(fence.seq, 4u);
  EXPECT_EQ(fence.nodes, 2);
  EXPECT_EQ(fence.world, (std::vector<std::uint32_t>{1, 3}));
  EXPECT_EQ(fence.data, "a=1\nb=2\n");
}

TEST(ShellChannel, AFencePastTheLimitFailsTheWorld) {
  Pair p;
  p.from_shell(encode_output_frame(FenceFrame{0, true, std::string(64, 'k'), false}));
  p.read(/*max_kvs_bytes=*/16);
  ASSERT_EQ(p.events.size(), 1u);
  EXPECT_EQ(p.events[0].kind, PmiEvent::Kind::kFailure);
  EXPECT_NE(p.events[0].data.find("passed the limit of 16 bytes"), std::string::npos);
}

TEST(ShellChannel, ModexRequestsAndAnswersAndFailures) {
  Pair p;
  ModexFrame request;
  request.kind = ModexFrame::Kind::kRequest;
  request.tag = 9;
  request.rank = 5;
  request.node = 3;
  p.from_shell(encode_output_frame(request));
  for (const ModexFrame& frame : split_modex(11, 0, std::string(kOutputFrameData + 10, 'd'))) {
    p.from_shell(encode_output_frame(frame));
  }
  p.from_shell(encode_failure_frame(6, 1234, "task 1: exited with code 6"));
  p.read();
  ASSERT_EQ(p.events.size(), 3u);
  EXPECT_EQ(p.events[0].kind, PmiEvent::Kind::kModexRequest);
  EXPECT_EQ(p.events[0].rank, 5u);
  EXPECT_EQ(p.events[0].node, 3u);
  EXPECT_EQ(p.events[1].kind, PmiEvent::Kind::kModexData);
  EXPECT_EQ(p.events[1].tag, 11u);
  EXPECT_EQ(p.events[1].data.size(), kOutputFrameData + 10);
  EXPECT_EQ(p.events[2].kind, PmiEvent::Kind::kFailure);
  EXPECT_EQ(p.events[2].code, 6);
  EXPECT_EQ(p.events[2].seen_at, 1234);
}

TEST(ShellChannel, FramesForTheShellGoInOrderAndTheChannelClosesWithIt) {
  Pair p;
  EXPECT_TRUE(p.channel.takes_frames());
  TaskInput input;
  input.data = "hello";
  p.channel.send(encode_input_frame(input));
  p.channel.send(encode_input_frame(FenceFrame{1, true, "x=1\n", false}));
  char buf[256];
  ssize_t n = recv(p.shell, buf, sizeof buf, 0);
  ASSERT_GT(n, 0);
  auto first = decode_input_frame(std::string_view(buf, static_cast<std::size_t>(n)));
  ASSERT_TRUE(first.is_ok());
  EXPECT_EQ(first->data, "hello");
  n = recv(p.shell, buf, sizeof buf, 0);
  auto second = decode_input_frame(std::string_view(buf, static_cast<std::size_t>(n)));
  ASSERT_TRUE(second.is_ok() && second->fence);
  close(p.shell);
  p.shell = -1;
  p.read();
  EXPECT_FALSE(p.channel.takes_frames());
}

}  // namespace
}  // namespace hpcq::agent
