#include "lib/sim/swf.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <string>

namespace hpcq::sim {
namespace {

// Two header lines, five data rows: one good, one dropped for -1 run time,
// one using requested processors and time, one dropped for -1 allocated
// processors, one with a 0 s runtime and no requested time.
constexpr const char* kTrace =
    "; Version: 2.2\n"
    ";  MaxProcs: 8\n"
    "1 0 5 100 4 90.50 -1 -1 200 -1 1 7 1 1 1 -1 -1 -1\n"
    "2 10 -1 -1 2 -1 -1 -1 50 -1 0 7 1 1 1 -1 -1 -1\n"
    "\n"
    "3 20 0 30 2 -1 -1 6 60 -1 1 8 1 1 2 -1 -1 -1\n"
    "4 25 0 30 -1 -1 -1 6 60 -1 1 8 1 1 2 -1 -1 -1\n"
    "5\t30 0 0 1 -1 -1 -1 -1 -1 1 9 1 1 1 -1 -1 -1\r\n";

TEST(SwfTest, ParsesJobsWithBlockAHandling) {
  auto trace = parse_swf(kTrace, "t.swf");
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(trace->rows, 5u);
  EXPECT_EQ(trace->dropped, 2u);
  ASSERT_EQ(trace->header.size(), 2u);
  EXPECT_EQ(trace->header[0], " Version: 2.2");
  ASSERT_EQ(trace->jobs.size(), 3u);

  const SwfJob& a = trace->jobs[0];
  EXPECT_EQ(a.id, 1);
  EXPECT_EQ(a.submit_s, 0);
  EXPECT_EQ(a.runtime_s, 100);
  EXPECT_EQ(a.size, 4);  // requested processors -1: the allocated ones
  EXPECT_EQ(a.requested_s, 200);
  EXPECT_EQ(a.user, 7);
  EXPECT_EQ(a.line, 3);

  const SwfJob& b = trace->jobs[1];
  EXPECT_EQ(b.id, 3);
  EXPECT_EQ(b.size, 6);  // requested processors win over allocated
  EXPECT_EQ(b.requested_s, 60);
  EXPECT_EQ(b.queue, 2);
  EXPECT_EQ(b.partition, -1);
  EXPECT_EQ(swf_queue_name(b), "q2");
  EXPECT_EQ(b.line, 6);

  const SwfJob& c = trace->jobs[2];
  EXPECT_EQ(c.id, 5);
  EXPECT_EQ(c.runtime_s, 0);
  EXPECT_EQ(c.requested_s, 0);  // no request: the runtime
  EXPECT_EQ(c.line, 8);
}

TEST(SwfTest, QueueNameFromQueueAndPartition) {
  auto trace = parse_swf(
      "1 0 0 10 1 -1 -1 1 10 -1 1 1 1 1 3 4 -1 -1\n"
      "2 0 0 10 1 -1 -1 1 10 -1 1 1 1 1 -1 4 -1 -1\n"
      "3 0 0 10 1 -1 -1 1 10 -1 1 1 1 1 -1 -1 -1 -1\n"
      "4 0 0 10 1 -1 -1 1 10 -1 1 1 1 1 0 -1 -1 -1\n",
      "q.swf");
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  ASSERT_EQ(trace->jobs.size(), 4u);
  EXPECT_EQ(trace->jobs[0].partition, 4);
  EXPECT_EQ(swf_queue_name(trace->jobs[0]), "q3.p4");
  EXPECT_EQ(swf_queue_name(trace->jobs[1]), "p4");
  EXPECT_EQ(swf_queue_name(trace->jobs[2]), "");
  EXPECT_EQ(swf_queue_name(trace->jobs[3]), "q0");
}

TEST(SwfTest, MalformedLinesNameFileLineAndField) {
  const struct {
    const char* text;
    const char* message;
  } cases[] = {
      {"1 0 5 x 4 -1 -1 -1 200 -1 1 7 1 1 1 -1 -1 -1\n",
       "t.swf:1: field 4 (run time): bad value 'x'"},
      {"; h\n1 0 5 10 4 -1 -1 -1 200 -1 1 7 1 1 1 -1 -1\n", "t.swf:2: 17 fields, SWF has 18"},
      {"1 0 5 10 4 -1 -1 -1 200 -1 1 7 1 1 1 -1 -1 -1 3\n", "t.swf:1: 19 fields, SWF has 18"},
      {"1 0 5 10 4 -1 -1 -1 -5 -1 1 7 1 1 1 -1 -1 -1\n",
       "t.swf:1: field 9 (requested time): bad value '-5'"},
      {"1 0.5 5 10 4 -1 -1 -1 20 -1 1 7 1 1 1 -1 -1 -1\n",
       "t.swf:1: field 2 (submit time): bad value '0.5'"},
      {"1 0 5 10 4 -1 -1 -1 20 -1 1 7 1 1 1 -1 -1 1e400\n",
       "t.swf:1: field 18 (think time after preceding job): bad value '1e400'"},
      // A binary line is shown escaped, not echoed raw to the terminal.
      {"1 0 5 \x1b[2J\xff 4 -1 -1 -1 20 -1 1 7 1 1 1 -1 -1 -1\n",
       "t.swf:1: field 4 (run time): bad value '\\x1b[2J\\xff'"},
  };
  for (const auto& c : cases) {
    auto trace = parse_swf(c.text, "t.swf");
    ASSERT_FALSE(trace.is_ok()) << c.text;
    EXPECT_EQ(trace.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(trace.status().message(), c.message);
  }
}

class SwfFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/hpcq_swf_testXXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    for (const char* name : {"/t.swf", "/t.swf.gz", "/bad.swf.gz"}) {
      std::remove((dir_ + name).c_str());
    }
    rmdir(dir_.c_str());
  }
  std::string dir_;
};

TEST_F(SwfFileTest, ReadsPlainAndGzipAlike) {
  const std::string plain = dir_ + "/t.swf";
  std::FILE* f = std::fopen(plain.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(kTrace, f);
  std::fclose(f);
  const std::string gz = dir_ + "/t.swf.gz";
  gzFile g = gzopen(gz.c_str(), "wb");
  ASSERT_NE(g, nullptr);
  ASSERT_GT(gzputs(g, kTrace), 0);
  ASSERT_EQ(gzclose(g), Z_OK);

  auto a = read_swf(plain);
  auto b = read_swf(gz);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  ASSERT_EQ(a->jobs.size(), 3u);
  ASSERT_EQ(b->jobs.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(a->jobs[i].id, b->jobs[i].id);
    EXPECT_EQ(a->jobs[i].size, b->jobs[i].size);
  }
}

TEST_F(SwfFileTest, GzipErrorsNameTheFile) {
  const std::string gz = dir_ + "/bad.swf.gz";
  gzFile g = gzopen(gz.c_str(), "wb");
  ASSERT_NE(g, nullptr);
  gzputs(g, "1 0 5 10 4 -1 -1 -1 200 -1 1 7 1 1 1 -1 -1 -1\n2 1 2 3\n");
  ASSERT_EQ(gzclose(g), Z_OK);
  auto trace = read_swf(gz);
  ASSERT_FALSE(trace.is_ok());
  EXPECT_EQ(trace.status().message(), gz + ":2: 4 fields, SWF has 18");

  auto missing = read_swf(dir_ + "/none.swf");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(missing.status().message(), "cannot open " + dir_ + "/none.swf");
}

}  // namespace
}  // namespace hpcq::sim
