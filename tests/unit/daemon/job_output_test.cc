// JobOutput: offsets, the per-job cap, readers from the start or from now,
// ends, and the ended jobs kept.
#include "daemon/job_output.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

namespace hpcq::daemon {
namespace {

using std::chrono::milliseconds;

std::string text_of(const JobOutput::Batch& batch) {
  std::string text;
  for (const auto& c : batch.chunks) text += std::to_string(c.rank) + ":" + c.data + ";";
  return text;
}

TEST(JobOutput, ReadsFromAnOffsetInOrder) {
  JobOutput output(1 << 20, 4);
  output.append(1, 0, 0, false, "a");
  output.append(1, 0, 1, true, "bc");
  auto all = output.read(1, 0, 0, false, milliseconds(0));
  EXPECT_EQ(text_of(all), "0:a;1:bc;");
  EXPECT_TRUE(all.chunks[1].is_stderr);
  EXPECT_EQ(all.next, 3u);
  EXPECT_FALSE(all.ended);
  output.append(1, 0, 0, false, "d");
  auto more = output.read(1, 0, all.next, false, milliseconds(0));
  EXPECT_EQ(text_of(more), "0:d;");
  EXPECT_EQ(more.chunks[0].offset, 3u);
}

TEST(JobOutput, FromNowSkipsWhatCameBefore) {
  JobOutput output(1 << 20, 4);
  output.append(1, 0, 0, false, "old");
  auto now = output.read(1, 0, 0, true, milliseconds(0));
  EXPECT_TRUE(now.chunks.empty());
  EXPECT_EQ(now.next, 3u);
}

TEST(JobOutput, ACappedJobSaysWhatWasDropped) {
  JobOutput output(4, 4);
  output.append(1, 0, 0, false, "123");
  output.append(1, 0, 0, false, "456");  // over 4 bytes: "123" goes
  auto batch = output.read(1, 0, 0, false, milliseconds(0));
  EXPECT_EQ(batch.dropped, 3u);
  EXPECT_EQ(text_of(batch), "0:456;");
}

TEST(JobOutput, AReaderWakesForOutputAndForTheEnd) {
  JobOutput output(1 << 20, 4);
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    output.append(1, 0, 2, false, "x");
    output.end(1, 0);
  });
  auto first = output.read(1, 0, 0, false, milliseconds(5000));
  EXPECT_FALSE(first.chunks.empty());
  writer.join();
  auto last = output.read(1, 0, first.next, false, milliseconds(5000));
  EXPECT_TRUE(last.ended);
  output.append(1, 0, 0, false, "late");  // after the end: dropped
  EXPECT_TRUE(output.read(1, 0, last.next, false, milliseconds(0)).chunks.empty());
}

TEST(JobOutput, OnlyTheLastEndedJobsAreKept) {
  JobOutput output(1 << 20, 2);
  for (JobId id = 1; id <= 3; ++id) {
    output.append(id, 0, 0, false, "out");
    output.end(id, 0);
  }
  EXPECT_TRUE(output.read(1, 0, 0, false, milliseconds(0)).chunks.empty());  // forgotten
  EXPECT_EQ(text_of(output.read(3, 0, 0, false, milliseconds(0))), "0:out;");
}

TEST(JobOutput, EachStepIsAStreamOfItsOwn) {
  JobOutput output(1 << 20, 4);
  output.append(1, 0, 0, false, "job");
  output.append(1, 2, 0, false, "step");
  output.end(1, 2);
  EXPECT_EQ(text_of(output.read(1, 2, 0, false, milliseconds(0))), "0:step;");
  EXPECT_TRUE(output.read(1, 2, 0, false, milliseconds(0)).ended);
  EXPECT_FALSE(output.read(1, 0, 0, false, milliseconds(0)).ended);
}

TEST(JobOutput, ShutdownWakesReaders) {
  JobOutput output(1 << 20, 2);
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
