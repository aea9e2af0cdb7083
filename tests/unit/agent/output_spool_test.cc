#include "agent/output_spool.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace hpcq::agent {
namespace {

class OutputSpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hpcq-output-spool-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string dir() const { return root_ + "/output"; }

  std::string root_;
};

OutputLog::Chunk chunk(JobId id, std::uint32_t step, int rank, std::uint64_t offset,
                       std::string data) {
  OutputLog::Chunk c;
  c.id = id;
  c.attempt = 2;
  c.step = step;
  c.rank = rank;
  c.is_stderr = rank % 2 == 1;
  c.offset = offset;
  c.incarnation = 77;
  c.data = std::move(data);
  return c;
}

std::vector<std::string> described(const std::vector<OutputLog::Chunk>& chunks) {
  std::vector<std::string> out;
  for (const auto& c : chunks) {
    out.push_back(std::to_string(c.id) + "." + std::to_string(c.step) + "/" +
                  std::to_string(c.rank) + (c.is_stderr ? "e" : "o") + "@" +
                  std::to_string(c.offset) + "#" + std::to_string(c.attempt) + "/" +
                  std::to_string(c.incarnation) + ":" + c.data);
  }
  return out;
}

TEST_F(OutputSpoolTest, TheNextAgentFindsTheChunksOfTheRunsItTakesBack) {
  {
    OutputSpool spool(dir());
    EXPECT_FALSE(spool.append(chunk(1, 0, 0, 0, "hello ")));
    EXPECT_FALSE(spool.append(chunk(1, 0, 1, 0, "oops")));
    EXPECT_FALSE(spool.append(chunk(1, 0, 0, 6, "world")));
    EXPECT_FALSE(spool.append(chunk(1, 3, 0, 0, "step")));
    EXPECT_FALSE(spool.append(chunk(2, 0, 0, 0, "ended")));
  }
  OutputSpool next(dir());
  EXPECT_EQ(described(next.take({{1, 0}, {1, 3}})),
            (std::vector<std::string>{"1.0/0o@0#2/77:hello ", "1.0/1e@0#2/77:oops",
                                      "1.0/0o@6#2/77:world", "1.3/0o@0#2/77:step"}));
  // Job 2 was not taken back: its file is gone.
  EXPECT_FALSE(std::filesystem::exists(dir() + "/2.0"));
  next.forget(1, 3);
  EXPECT_FALSE(std::filesystem::exists(dir() + "/1.3"));
  EXPECT_TRUE(std::filesystem::exists(dir() + "/1.0"));
  next.forget(1, 0);
  EXPECT_TRUE(std::filesystem::is_empty(dir()));
}

TEST_F(OutputSpoolTest, ATornTailIsCutOffAndAppendsGoOnAfterTheWholeRecords) {
  {
    OutputSpool spool(dir());
    spool.append(chunk(1, 0, 0, 0, "whole"));
    spool.append(chunk(1, 0, 0, 5, "torn away"));
  }
  const auto size = std::filesystem::file_size(dir() + "/1.0");
  std::filesystem::resize_file(dir() + "/1.0", size - 3);
  {
    OutputSpool next(dir());
    EXPECT_EQ(described(next.take({{1, 0}})), (std::vector<std::string>{"1.0/0o@0#2/77:whole"}));
    next.append(chunk(1, 0, 0, 5, "again"));
  }
  OutputSpool third(dir());
  EXPECT_EQ(described(third.take({{1, 0}})),
            (std::vector<std::string>{"1.0/0o@0#2/77:whole", "1.0/0o@5#2/77:again"}));
}

TEST_F(OutputSpoolTest, PastItsBoundAFileIsRewrittenWithWhatIsKept) {
  OutputSpool spool(dir());
  const std::string big(64 << 10, 'x');
  bool full = false;
  std::uint64_t offset = 0;
  while (!full) {
    full = spool.append(chunk(1, 0, 0, offset, big));
    offset += big.size();
  }
  EXPECT_GT(std::filesystem::file_size(dir() + "/1.0"), OutputSpool::kCompactBytes);
  spool.rewrite({1, 0}, {chunk(1, 0, 0, offset - 4, "tail")});
  EXPECT_FALSE(spool.append(chunk(1, 0, 0, offset, "more")));
  OutputSpool next(dir());
  const auto left = described(next.take({{1, 0}}));
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[1], "1.0/0o@" + std::to_string(offset) + "#2/77:more");
}

TEST_F(OutputSpoolTest, FilesThatAreNotRunsAreRemoved) {
  std::filesystem::create_directories(dir());
  std::ofstream(dir() + "/stray") << "x";
  std::ofstream(dir() + "/99999999999999999999999999.1") << "x";
  OutputSpool spool(dir());
  EXPECT_TRUE(spool.take({{1, 0}}).empty());
  EXPECT_TRUE(std::filesystem::is_empty(dir()));
}

}  // namespace
}  // namespace hpcq::agent
