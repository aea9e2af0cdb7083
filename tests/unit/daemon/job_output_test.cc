// JobOutput: offsets, the per-job cap, readers from the start or from now,
// ends, and the ended jobs kept.
#include "daemon/job_output.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace hpcq::daemon {
namespace {

using std::chrono::milliseconds;

// Appends as one agent does: each task stream's offsets counted.
class Writer {
 public:
  explicit Writer(JobOutput& output) : output_(output) {}
  void append(JobId id, std::uint32_t step, int rank, bool is_stderr, const std::string& data) {
    std::uint64_t& offset = offsets_[{id, step, rank, is_stderr}];
    output_.append(id, step, source(rank, is_stderr, offset), data);
    offset += data.size();
  }
  static JobOutput::Source source(int rank, bool is_stderr, std::uint64_t offset,
                                  std::uint64_t incarnation = 7) {
    JobOutput::Source s;
    s.incarnation = incarnation;
    s.rank = rank;
    s.is_stderr = is_stderr;
    s.offset = offset;
    return s;
  }

 private:
  JobOutput& output_;
  std::map<std::tuple<JobId, std::uint32_t, int, bool>, std::uint64_t> offsets_;
};

std::string text_of(const JobOutput::Batch& batch) {
  std::string text;
  for (const auto& c : batch.chunks) text += std::to_string(c.rank) + ":" + c.data + ";";
  return text;
}

TEST(JobOutput, ReadsFromAnOffsetInOrder) {
  JobOutput output(1 << 20, 4);
  Writer writer(output);
  writer.append(1, 0, 0, false, "a");
  writer.append(1, 0, 1, true, "bc");
  auto all = output.read(1, 0, 0, false, milliseconds(0));
  EXPECT_EQ(text_of(all), "0:a;1:bc;");
  EXPECT_TRUE(all.chunks[1].is_stderr);
  EXPECT_EQ(all.next, 3u);
  EXPECT_FALSE(all.ended);
  writer.append(1, 0, 0, false, "d");
  auto more = output.read(1, 0, all.next, false, milliseconds(0));
  EXPECT_EQ(text_of(more), "0:d;");
  EXPECT_EQ(more.chunks[0].offset, 3u);
}

TEST(JobOutput, FromNowSkipsWhatCameBefore) {
  JobOutput output(1 << 20, 4);
  Writer writer(output);
  writer.append(1, 0, 0, false, "old");
  auto now = output.read(1, 0, 0, true, milliseconds(0));
  EXPECT_TRUE(now.chunks.empty());
  EXPECT_EQ(now.next, 3u);
}

TEST(JobOutput, ACappedJobSaysWhatWasDropped) {
  JobOutput output(4, 4);
  Writer writer(output);
  writer.append(1, 0, 0, false, "123");
  writer.append(1, 0, 0, false, "456");  // over 4 bytes: "123" goes
  auto batch = output.read(1, 0, 0, false, milliseconds(0));
  EXPECT_EQ(batch.dropped, 3u);
  EXPECT_EQ(text_of(batch), "0:456;");
}

TEST(JobOutput, AReaderWakesForOutputAndForTheEnd) {
  JobOutput output(1 << 20, 4);
  Writer writer(output);
  std::thread agent([&] {
    std::this_thread::sleep_for(milliseconds(50));
    writer.append(1, 0, 2, false, "x");
    output.end(1, 0);
  });
  auto first = output.read(1, 0, 0, false, milliseconds(5000));
  EXPECT_FALSE(first.chunks.empty());
  agent.join();
  auto last = output.read(1, 0, first.next, false, milliseconds(5000));
  EXPECT_TRUE(last.ended);
  writer.append(1, 0, 0, false, "late");  // after the end: dropped
  EXPECT_TRUE(output.read(1, 0, last.next, false, milliseconds(0)).chunks.empty());
}

TEST(JobOutput, OnlyTheLastEndedJobsAreKept) {
  JobOutput output(1 << 20, 2);
  Writer writer(output);
  for (JobId id = 1; id <= 3; ++id) {
    writer.append(id, 0, 0, false, "out");
    output.end(id, 0);
  }
  EXPECT_TRUE(output.read(1, 0, 0, false, milliseconds(0)).chunks.empty());  // forgotten
  EXPECT_EQ(text_of(output.read(3, 0, 0, false, milliseconds(0))), "0:out;");
}

TEST(JobOutput, EachStepIsAStreamOfItsOwn) {
  JobOutput output(1 << 20, 4);
  Writer writer(output);
  writer.append(1, 0, 0, false, "job");
  writer.append(1, 2, 0, false, "step");
  output.end(1, 2);
  EXPECT_EQ(text_of(output.read(1, 2, 0, false, milliseconds(0))), "0:step;");
  EXPECT_TRUE(output.read(1, 2, 0, false, milliseconds(0)).ended);
  EXPECT_FALSE(output.read(1, 0, 0, false, milliseconds(0)).ended);
}

TEST(JobOutput, ShutdownWakesReaders) {
  JobOutput output(1 << 20, 2);
  Writer writer(output);
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(50));
    output.shutdown();
  });
  auto batch = output.read(1, 0, 0, false, milliseconds(5000));
  stopper.join();
  EXPECT_TRUE(batch.shut_down);
}

}  // namespace
}  // namespace hpcq::daemon

namespace hpcq::daemon {
namespace {

TEST(JobOutput, ACopySentAgainAfterTheTreeHealedIsSkipped) {
  JobOutput output(1 << 20, 4);
  using S = Writer;
  output.append(1, 0, S::source(0, false, 0), "abc");
  output.append(1, 0, S::source(1, false, 0), "x");
  output.append(1, 0, S::source(0, false, 0), "abc");   // all had
  output.append(1, 0, S::source(0, false, 1), "bcde");  // "de" is new
  output.append(1, 0, S::source(0, true, 0), "err");    // another stream of the task
  output.append(1, 0, S::source(1, false, 0), "xy");    // "y" is new
  EXPECT_EQ(text_of(output.read(1, 0, 0, false, milliseconds(0))), "0:abc;1:x;0:de;0:err;1:y;");
}

TEST(JobOutput, WhatFillsAGapIsTakenWhenItComes) {
  JobOutput output(1 << 20, 4);
  using S = Writer;
  output.append(1, 0, S::source(0, false, 0), "abc");
  output.append(1, 0, S::source(0, false, 6), "ghi");         // "def" lost on the way
  output.append(1, 0, S::source(0, false, 10), "k");          // and "j"
  output.append(1, 0, S::source(0, false, 0), "abcdefghij");  // sent again: "def", "j"
  output.append(1, 0, S::source(0, false, 2), "cdefghijk");   // all had
  auto batch = output.read(1, 0, 0, false, milliseconds(0));
  EXPECT_EQ(text_of(batch), "0:abc;0:ghi;0:k;0:def;0:j;");
  std::vector<std::uint64_t> offsets;
  for (const auto& c : batch.chunks) offsets.push_back(c.stream_offset);
  EXPECT_EQ(offsets, (std::vector<std::uint64_t>{0, 6, 10, 3, 9}));
  output.append(1, 0, S::source(0, false, 11), "l");
  EXPECT_EQ(output.read(1, 0, batch.next, false, milliseconds(0)).chunks.at(0).stream_offset, 11u);
}

TEST(JobOutput, AnAgentThatRestartedOrAnotherAttemptCountsAnew) {
  JobOutput output(1 << 20, 4);
  using S = Writer;
  output.append(1, 0, S::source(0, false, 0, 7), "before");
  output.append(1, 0, S::source(0, false, 0, 8), "after");  // the agent restarted
  JobOutput::Source next = S::source(0, false, 0, 8);
  next.attempt = 1;
  output.append(1, 0, next, "requeued");
  EXPECT_EQ(text_of(output.read(1, 0, 0, false, milliseconds(0))), "0:before;0:after;0:requeued;");
}

}  // namespace
}  // namespace hpcq::daemon
