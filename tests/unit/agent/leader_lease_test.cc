// The lease's file format and its renewal (leader_lease.h); the shell's
// watch of it is in process_executor_test (real jobs).
#include "agent/executor/leader_lease.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace hpcq::agent {
namespace {

TEST(LeaderLeaseTest, FileBytesCarryTheDeadlineTwice) {
  const std::string bytes = encode_lease(1234567890123);
  ASSERT_EQ(bytes.size(), kLeaseFileBytes);
  EXPECT_EQ(decode_lease(bytes), 1234567890123);
  std::string torn = bytes;
  torn[12] = static_cast<char>(torn[12] ^ 1);  // the second copy half-written
  EXPECT_EQ(decode_lease(torn), std::nullopt);
  EXPECT_EQ(decode_lease(""), 0);  // no deadline yet: expired
  EXPECT_EQ(decode_lease(bytes.substr(0, 8)), 0);
}

TEST(LeaderLeaseTest, AnAnswerRenewsFromWhenTheAnsweredMessageWasSent) {
  LeaderLease lease(4'000'000);
  EXPECT_TRUE(lease.expired(1));  // none granted yet
  EXPECT_TRUE(lease.renew(10'000'000));
  EXPECT_EQ(lease.deadline(), 14'000'000);
  EXPECT_FALSE(lease.expired(13'999'999));
  EXPECT_TRUE(lease.expired(14'000'000));
  // A late answer to an older heartbeat does not shorten it.
  EXPECT_FALSE(lease.renew(9'500'000));
  EXPECT_EQ(lease.deadline(), 14'000'000);
  EXPECT_FALSE(lease.renew(0));  // no send time (an older agent's message)
  EXPECT_TRUE(lease.renew(10'500'000));
  EXPECT_EQ(lease.deadline(), 14'500'000);
}

TEST(LeaderLeaseTest, TheFileStartsExpiredAndIsWrittenInPlace) {
  char tmpl[] = "/tmp/hpcq-lease-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/leader-lease";
  auto read = [&] {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  {
    auto file = LeaseFile::open(path);
    ASSERT_TRUE(file.is_ok()) << file.status().to_string();
    EXPECT_EQ(decode_lease(read()), 0);
    ASSERT_TRUE(file->write(77).is_ok());
    EXPECT_EQ(decode_lease(read()), 77);
  }
  // An agent that restarts keeps its predecessor's lease until renewed.
  auto again = LeaseFile::open(path);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(decode_lease(read()), 77);
  std::filesystem::remove_all(tmpl);
}

TEST(LeaderLeaseTest, TheBootClockRuns) {
  const TimeUs a = boot_clock_us();
  EXPECT_GT(a, 0);
  EXPECT_GE(boot_clock_us(), a);
}

}  // namespace
}  // namespace hpcq::agent
