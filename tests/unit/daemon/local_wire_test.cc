// The local wire's framing (lib/api/local_wire.h) over a real socket pair.
#include "lib/api/local_wire.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace hpcq::api::local_wire {
namespace {

struct SocketPair {
  int a = -1, b = -1;
  SocketPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    a = fds[0];
    b = fds[1];
  }
  ~SocketPair() {
    if (a >= 0) ::close(a);
    if (b >= 0) ::close(b);
  }
};

TEST(LocalWireTest, HeaderIsBigEndianLength) {
  EXPECT_EQ(frame_header(0x01020304), std::string("\x01\x02\x03\x04", 4));
  EXPECT_EQ(frame_size(frame_header(0xfffffff0u)), 0xfffffff0u);
  EXPECT_EQ(frame_size(frame_header(0)), 0u);
}

TEST(LocalWireTest, FramesCrossASocketWhole) {
  SocketPair pair;
  const std::string big(3 << 20, 'x');  // more than a socket buffer: the reader drains it
  std::thread writer([&] {
    EXPECT_TRUE(write_frame(pair.a, "hello").is_ok());
    EXPECT_TRUE(write_frame(pair.a, "").is_ok());
    EXPECT_TRUE(write_frame(pair.a, big).is_ok());
  });
  EXPECT_EQ(*read_frame(pair.b, 1 << 30, 5000), "hello");
  EXPECT_EQ(*read_frame(pair.b, 1 << 30, 5000), "");
  EXPECT_EQ(*read_frame(pair.b, 1 << 30, 5000), big);
  writer.join();
}

TEST(LocalWireTest, AFrameOverTheLimitIsRefusedUnread) {
  SocketPair pair;
  ASSERT_TRUE(write_frame(pair.a, std::string(100, 'y')).is_ok());
  auto frame = read_frame(pair.b, 99, 5000);
  ASSERT_FALSE(frame.is_ok());
  EXPECT_EQ(frame.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(frame.status().message(), "100 bytes, over the limit of 99");
  EXPECT_EQ(*read_exactly(pair.b, 100, 5000), std::string(100, 'y'));  // still there
}

TEST(LocalWireTest, AnEndOrASilenceMidFrameIsUnavailable) {
  SocketPair pair;
  ASSERT_TRUE(write_all(pair.a, frame_header(10) + "abc").is_ok());
  auto silent = read_frame(pair.b, 100, 50);
  ASSERT_FALSE(silent.is_ok());
  EXPECT_EQ(silent.status().code(), Code::kUnavailable);
  ::close(pair.a);
  pair.a = -1;
  auto ended = read_exactly(pair.b, 1, 5000);
  ASSERT_FALSE(ended.is_ok());
  EXPECT_EQ(ended.status().code(), Code::kUnavailable);
}

TEST(LocalWireTest, WritingToAGonePeerFailsWithoutASignal) {
  SocketPair pair;
  ::close(pair.b);
  pair.b = -1;
  EXPECT_EQ(write_frame(pair.a, "x").code(), Code::kUnavailable);  // EPIPE, not SIGPIPE
}

TEST(LocalWireTest, CallsAndReplies) {
  local::Call call;
  call.set_method("GetJob");
  call.set_request("\x08\x07");
  auto parsed = parse_call(call.SerializeAsString());
  ASSERT_TRUE(parsed.is_ok());
  EXPECT_EQ(parsed->method(), "GetJob");
  EXPECT_EQ(parse_call("\x0a\xff").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parse_call("").status().message(), "local wire: the call names no method");

  local::Reply ok = make_reply(Status::ok(), "payload", true);
  EXPECT_TRUE(reply_status(ok).is_ok());
  EXPECT_EQ(ok.payload(), "payload");
  local::Reply failed = make_reply(not_found("no job 9"), "ignored", true);
  EXPECT_EQ(failed.payload(), "");
  EXPECT_EQ(reply_status(failed).code(), Code::kNotFound);
  EXPECT_EQ(reply_status(failed).message(), "no job 9");
  local::Reply unknown;
  unknown.set_code(999);
  unknown.set_message("?");
  EXPECT_EQ(reply_status(unknown).code(), Code::kInternal);
}

}  // namespace
}  // namespace hpcq::api::local_wire
