#include "cli/client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lib/api/local_wire.h"

namespace hpcq::cli {
namespace {

namespace wire = api::local_wire;
using Clock = std::chrono::steady_clock;

// A listening unix socket in a fresh directory.
class Listener {
 public:
  explicit Listener(const std::string& dir, const std::string& name) : path_(dir + "/" + name) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
  }
  ~Listener() { ::close(fd_); }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// A fake hpcqd: accepts calls on `listener` and lets `answer` say what to
// do with each (its number from 0): reply (true) or close unanswered.
class FakeHpcqd {
 public:
  using Answer = std::function<bool(int n, const local::Call& call)>;
  FakeHpcqd(const Listener& listener, Answer answer)
      : answer_(std::move(answer)), path_(listener.path()) {
    thread_ = std::thread([this, fd = listener.fd()] {
      for (int n = 0;; ++n) {
        const int conn = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (conn < 0 || stop_) {
          if (conn >= 0) ::close(conn);
          return;
        }
        auto call = wire::read_call(conn, 1 << 20, 5000, nullptr);
        if (call.is_ok()) {
          std::lock_guard lock(mutex_);
          calls_.push_back(*call);
        }
        if (call.is_ok() && answer_(n, *call)) {
          v1::Job job;
          job.set_id(42);
          v1::SubmitResponse made;
          made.set_id(7);
          const std::string payload =
              call->method() == "Submit" ? made.SerializeAsString() : job.SerializeAsString();
          (void)wire::write_frame(
              conn, wire::make_reply(Status::ok(), payload, true).SerializeAsString());
        }
        ::close(conn);
      }
    });
  }
  ~FakeHpcqd() {
    stop_ = true;
    // Wakes the accept.
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    thread_.join();
    ::close(fd);
  }
  std::vector<local::Call> calls() {
    std::lock_guard lock(mutex_);
    return calls_;
  }

 private:
  Answer answer_;
  const std::string path_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<local::Call> calls_;
  std::thread thread_;
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/hpcq-client-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    ::setenv("HPCQ_RETRY_S", "5", 1);
    ::setenv("HPCQ_MESSAGE_TIMEOUT_S", "0.3", 1);
  }
  void TearDown() override {
    ::unsetenv("HPCQ_RETRY_S");
    ::unsetenv("HPCQ_MESSAGE_TIMEOUT_S");
    std::system(("rm -rf " + dir_).c_str());
  }
  static double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
  std::string dir_;
};

TEST_F(ClientTest, AFrozenCandidateIsPassedOverAndThenTriedLast) {
  // The first candidate takes connections but never answers (a SIGSTOPped
  // leader: the kernel queues them); the second leads.
  Listener frozen(dir_, "frozen.sock");
  Listener leader(dir_, "leader.sock");
  FakeHpcqd hpcqd(leader, [](int, const local::Call&) { return true; });
  Client client(frozen.path() + ":" + leader.path());
  v1::GetJobRequest request;
  request.set_id(42);
  v1::Job job;
  auto start = Clock::now();
  ASSERT_TRUE(client.call("GetJob", request, &job).is_ok());
  EXPECT_EQ(job.id(), 42u);
  EXPECT_LT(seconds_since(start), 2.0);  // one try's 0.3 s, then the leader
  // The next call goes to the leader first.
  start = Clock::now();
  ASSERT_TRUE(client.call("GetJob", request, &job).is_ok());
  EXPECT_LT(seconds_since(start), 0.25);
  EXPECT_EQ(hpcqd.calls().size(), 2u);
}

TEST_F(ClientTest, NoCandidateAnsweringEndsAfterTheRetryTimeWithOneLine) {
  ::setenv("HPCQ_RETRY_S", "0.5", 1);
  Client client(dir_ + "/nobody.sock");
  v1::GetJobRequest request;
  v1::Job job;
  const auto start = Clock::now();
  Status s = client.call("GetJob", request, &job);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_GE(seconds_since(start), 0.3);
  EXPECT_LT(seconds_since(start), 3.0);
  EXPECT_NE(s.message().find("HPCQ_RETRY_S"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
}

TEST_F(ClientTest, ARequestThatMayNotBeRepeatedIsNotSentTwice) {
  // hpcqd takes a Signal and goes before answering: the signal may have
  // been sent, so the command says so rather than sending it again.
  Listener leader(dir_, "leader.sock");
  FakeHpcqd hpcqd(leader, [](int, const local::Call&) { return false; });
  Client client(leader.path());
  v1::SignalRequest request;
  v1::SignalResponse response;
  EXPECT_EQ(client.call("Signal", request, &response).code(), Code::kUnavailable);
  EXPECT_EQ(hpcqd.calls().size(), 1u);
}

TEST_F(ClientTest, ASubmissionAskedAgainCarriesTheSameKey) {
  // The first try is taken and not answered (a leader killed after its
  // commit, before its answer); the second is answered.
  Listener leader(dir_, "leader.sock");
  FakeHpcqd hpcqd(leader, [](int n, const local::Call&) { return n > 0; });
  Client client(leader.path());
  v1::SubmitRequest request;
  request.mutable_spec()->set_name("x");
  v1::SubmitResponse response;
  ASSERT_TRUE(client.submit(request, &response).is_ok());
  EXPECT_EQ(response.id(), 7u);
  const std::vector<local::Call> calls = hpcqd.calls();
  ASSERT_EQ(calls.size(), 2u);
  v1::SubmitRequest first, second;
  ASSERT_TRUE(first.ParseFromString(calls[0].request()));
  ASSERT_TRUE(second.ParseFromString(calls[1].request()));
  EXPECT_EQ(first.submission_key().size(), 32u);
  EXPECT_EQ(first.submission_key(), second.submission_key());
  EXPECT_EQ(second.spec().name(), "x");
}

TEST_F(ClientTest, SubmissionKeysAreRandomHex) {
  auto a = new_submission_key();
  auto b = new_submission_key();
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->size(), 32u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(*a, *b);
}

TEST_F(ClientTest, ABadRetryTimeIsNamed) {
  ::setenv("HPCQ_RETRY_S", "soon", 1);
  Client client(dir_ + "/nobody.sock");
  v1::GetJobRequest request;
  v1::Job job;
  Status s = client.call("GetJob", request, &job);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("HPCQ_RETRY_S"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace hpcq::cli
