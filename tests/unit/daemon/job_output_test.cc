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
  const std::uint64_t reader = output.add_reader(1, 0);
  writer.append(1, 0, 0, false, "123");
  auto taken = output.read(1, 0, 0, false, milliseconds(0), reader);
  (void)output.read(1, 0, taken.next, false, milliseconds(0), reader);  // it has "123"
  writer.append(1, 0, 0, false, "456");  // over 4 bytes: "123", taken, goes
  auto batch = output.read(1, 0, 0, false, milliseconds(0));
  EXPECT_EQ(batch.dropped, 3u);
  EXPECT_EQ(text_of(batch), "0:456;");
}

// What no reader has taken stays past bytes_per_job (credit bounds it): a
// reader that comes late, or is slow, still gets every byte.
TEST(JobOutput, WhatNoReaderHasTakenIsKept) {
  JobOutput output(4, 4);
  Writer writer(output);
  writer.append(1, 0, 0, false, "123");
  writer.append(1, 0, 0, false, "456");
  auto batch = output.read(1, 0, 0, false, milliseconds(0));
  EXPECT_EQ(batch.dropped, 0u);
  EXPECT_EQ(text_of(batch), "0:123;0:456;");
}

}  // namespace
}  // namespace hpcq::daemon

namespace hpcq::daemon {
namespace {

constexpr std::uint64_t kWindow = JobOutput::kMinStreamWindow;

std::string credits(const std::vector<JobOutput::Credit>& all) {
  std::string text;
  for (const auto& c : all) {
    text += std::to_string(c.id) + "." + std::to_string(c.step) + "@" + std::to_string(c.node) +
            "/" + std::to_string(c.rank) + (c.is_stderr ? "e" : "o") + ":" +
            std::to_string(c.granted) + "," + std::to_string(c.consumed) + ";";
  }
  return text;
}

// Appends `bytes` of stream (rank, stderr) from node `node` at `offset`.
void send(JobOutput& output, int rank, bool is_stderr, std::uint64_t offset, std::size_t bytes,
          std::uint32_t node = 3) {
  JobOutput::Source s = Writer::source(rank, is_stderr, offset);
  s.node = node;
  output.append(1, 0, s, std::string(bytes, 'x'));
}

TEST(JobOutputCredit, AStreamIsGrantedItsWindowPastWhatItsReadersTook) {
  JobOutput output(kWindow, 4);  // one stream: its window is the job's
  send(output, 0, false, 0, 10);
  // The initial credit (what the shell starts with) is the window here:
  // nothing more until readers take some.
  EXPECT_EQ(credits(output.take_credit()), "");
  const std::uint64_t reader = output.add_reader(1, 0);
  auto batch = output.read(1, 0, 0, false, milliseconds(0), reader);
  EXPECT_EQ(credits(output.take_credit()), "");  // has taken nothing yet
  (void)output.read(1, 0, batch.next, false, milliseconds(0), reader);
  // Less than a quarter of the window is free: not worth a message yet.
  EXPECT_EQ(credits(output.take_credit()), "");
  send(output, 0, false, 10, kWindow - 10);  // the stream has used its credit: it waits,
  EXPECT_EQ(credits(output.take_credit()),   // so what is free is granted at once
            "1.0@3/0o:" + std::to_string(kWindow + 10) + ",10;");
  batch = output.read(1, 0, batch.next, false, milliseconds(0), reader);
  (void)output.read(1, 0, batch.next, false, milliseconds(0), reader);
  EXPECT_EQ(credits(output.take_credit()),
            "1.0@3/0o:" + std::to_string(2 * kWindow) + "," + std::to_string(kWindow) + ";");
}

TEST(JobOutputCredit, TheSlowestReaderHoldsTheGrantsBack) {
  JobOutput output(kWindow, 4);
  send(output, 0, false, 0, kWindow);
  send(output, 1, false, 0, kWindow);  // both have used their credit
  EXPECT_EQ(credits(output.take_credit()), "");
  const std::uint64_t fast = output.add_reader(1, 0), slow = output.add_reader(1, 0);
  auto all = output.read(1, 0, 0, false, milliseconds(0), fast);
  (void)output.read(1, 0, all.next, false, milliseconds(0), fast);
  EXPECT_EQ(credits(output.take_credit()), "");  // `slow` has taken nothing
  auto first = output.read(1, 0, 0, false, milliseconds(0), slow);
  (void)output.read(1, 0, kWindow, false, milliseconds(0), slow);  // rank 0's only
  EXPECT_EQ(credits(output.take_credit()),
            "1.0@3/0o:" + std::to_string(2 * kWindow) + "," + std::to_string(kWindow) + ";");
  output.remove_reader(1, 0, slow);  // gone: `fast` is the pace now
  EXPECT_EQ(credits(output.take_credit()),
            "1.0@3/1o:" + std::to_string(2 * kWindow) + "," + std::to_string(kWindow) + ";");
  (void)first;
}

TEST(JobOutputCredit, WithoutReadersTheGrantsStandStill) {
  JobOutput output(kWindow, 4);
  send(output, 0, false, 0, kWindow);
  EXPECT_EQ(credits(output.take_credit()), "");
  output.credit_again();  // it waits: its grant is repeated, not raised
  EXPECT_EQ(credits(output.take_credit()), "1.0@3/0o:" + std::to_string(kWindow) + ",0;");
  output.end(1, 0);
  output.credit_again();  // ended: nothing more
  EXPECT_EQ(credits(output.take_credit()), "");
}

TEST(JobOutputCredit, AStreamFirstSeenPastItsStartIsGrantedAtOnce) {
  // A restarted hpcqd: the agent sends again what it kept, from offset 1000.
  JobOutput output(kWindow, 4);
  send(output, 0, true, 1000, 10, 5);
  EXPECT_EQ(credits(output.take_credit()), "1.0@5/0e:" + std::to_string(1000 + kWindow) + ",1000;");
}

TEST(JobOutputCredit, TheCallbackSaysOnceThatGrantsWait) {
  JobOutput output(kWindow, 4);
  int calls = 0;
  output.on_credit_due([&] { ++calls; });
  send(output, 0, true, 1000, 10);
  send(output, 1, true, 1000, 10);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(output.take_credit().size(), 2u);
  send(output, 2, true, 1000, 10);
  EXPECT_EQ(calls, 2);
}

TEST(JobOutputCredit, AnAgentPastItsCreditIsCutAndTheReaderTold) {
  // Past 4 * bytes_per_job + a window per stream, what nobody took goes.
  JobOutput output(kWindow, 4);
  const std::uint64_t cap = 4 * kWindow + kWindow;
  for (std::uint64_t at = 0; at <= cap; at += kWindow) send(output, 0, false, at, kWindow);
  auto batch = output.read(1, 0, 0, false, milliseconds(0));
  EXPECT_EQ(batch.dropped, kWindow);
  // The dropped bytes count as taken: the stream is not held back by them.
  auto c = output.take_credit();
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c.back().consumed, kWindow);
}

TEST(JobOutputCredit, AReadReturnsAtMostABatchAndTheEndOnlyAfterAll) {
  JobOutput output(8 << 20, 4);
  for (int i = 0; i < 3; ++i) send(output, 0, false, i * (600 << 10), 600 << 10);
  output.end(1, 0);
  auto first = output.read(1, 0, 0, false, milliseconds(0));
  EXPECT_EQ(first.chunks.size(), 1u);  // two would pass kMaxBatchBytes
  EXPECT_FALSE(first.ended);
  auto second = output.read(1, 0, first.next, false, milliseconds(0));
  auto third = output.read(1, 0, second.next, false, milliseconds(0));
  EXPECT_EQ(third.chunks.size(), 1u);
  EXPECT_TRUE(third.ended);
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
