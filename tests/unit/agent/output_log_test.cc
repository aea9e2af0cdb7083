#include "agent/output_log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hpcq::agent {
namespace {

OutputLog::Chunk chunk(JobId id, std::uint32_t attempt, std::uint32_t step, int rank,
                       std::string data, bool is_stderr = false) {
  OutputLog::Chunk c;
  c.id = id;
  c.attempt = attempt;
  c.step = step;
  c.rank = rank;
  c.is_stderr = is_stderr;
  c.data = std::move(data);
  return c;
}

std::vector<std::string> kept_data(const OutputLog& log) {
  std::vector<std::string> out;
  for (const auto& c : log.kept()) {
    out.push_back(std::to_string(c.id) + "." + std::to_string(c.step) + "/" +
                  std::to_string(c.rank) + (c.is_stderr ? "e" : "o") + "@" +
                  std::to_string(c.offset) + ":" + c.data);
  }
  return out;
}

TEST(OutputLogTest, EachStreamCountsItsOwnOffsets) {
  OutputLog log(1024);
  EXPECT_EQ(log.add(chunk(1, 0, 0, 0, "abc")).offset, 0u);
  EXPECT_EQ(log.add(chunk(1, 0, 0, 0, "de")).offset, 3u);
  EXPECT_EQ(log.add(chunk(1, 0, 0, 1, "x")).offset, 0u);        // another rank
  EXPECT_EQ(log.add(chunk(1, 0, 0, 0, "e", true)).offset, 0u);  // stderr
  EXPECT_EQ(log.add(chunk(1, 0, 2, 0, "s")).offset, 0u);        // a step
  EXPECT_EQ(log.add(chunk(1, 0, 0, 0, "f")).offset, 5u);
  EXPECT_EQ(kept_data(log), (std::vector<std::string>{"1.0/0o@0:abc", "1.0/0o@3:de", "1.0/0o@5:f",
                                                      "1.0/0e@0:e", "1.0/1o@0:x", "1.2/0o@0:s"}));
  EXPECT_EQ(log.bytes_kept(), 9u);
}

TEST(OutputLogTest, KeepsTheLastBytesOfEachStreamAndAlwaysTheNewestChunk) {
  OutputLog log(4);
  log.add(chunk(1, 0, 0, 0, "ab"));
  log.credit(1, 0, 0, 0, false, 0, 100, 0);  // the leader's readers have all there will be
  log.add(chunk(1, 0, 0, 0, "cd"));
  log.add(chunk(1, 0, 0, 0, "e"));  // 5 bytes: "ab" goes
  EXPECT_EQ(kept_data(log), (std::vector<std::string>{"1.0/0o@2:cd", "1.0/0o@4:e"}));
  log.add(chunk(1, 0, 0, 0, "0123456789"));  // larger than the budget alone
  EXPECT_EQ(kept_data(log), (std::vector<std::string>{"1.0/0o@5:0123456789"}));
  EXPECT_EQ(log.bytes_kept(), 10u);
}

// What the leader's readers have not taken is kept past the budget, to be
// sent again should the way change; once taken, only the budget stays.
TEST(OutputLogTest, KeepsWhatNoReaderHasTaken) {
  OutputLog log(4);
  log.add(chunk(1, 0, 0, 0, "ab"));
  log.add(chunk(1, 0, 0, 0, "cd"));
  log.add(chunk(1, 0, 0, 0, "ef"));
  EXPECT_EQ(kept_data(log).size(), 3u);
  log.credit(1, 0, 0, 0, false, 0, 3, 0);  // taken up to "c": "ab" may go
  EXPECT_EQ(kept_data(log), (std::vector<std::string>{"1.0/0o@2:cd", "1.0/0o@4:ef"}));
  log.credit(1, 0, 0, 0, false, 0, 6, 0);  // all taken: the budget's last bytes stay
  EXPECT_EQ(kept_data(log), (std::vector<std::string>{"1.0/0o@2:cd", "1.0/0o@4:ef"}));
  log.add(chunk(1, 0, 0, 0, "g"));
  EXPECT_EQ(kept_data(log), (std::vector<std::string>{"1.0/0o@4:ef", "1.0/0o@6:g"}));
}

// Credit from the leader is absolute; the shell is told what it adds to
// what it was allowed, starting from its initial credit; copies add nothing.
TEST(OutputLogTest, CreditIsWhatTheGrantAdds) {
  OutputLog log(1024);
  log.add(chunk(1, 0, 0, 0, "abc"));
  EXPECT_EQ(log.credit(1, 0, 0, 0, false, 50, 0, 64), 0u);    // within the initial credit
  EXPECT_EQ(log.credit(1, 0, 0, 0, false, 100, 0, 64), 36u);  // past it
  EXPECT_EQ(log.credit(1, 0, 0, 0, false, 100, 3, 64), 0u);   // a copy
  EXPECT_EQ(log.credit(1, 0, 0, 0, false, 90, 3, 64), 0u);    // an older one, late
  EXPECT_EQ(log.credit(1, 0, 0, 0, false, 150, 3, 64), 50u);
  EXPECT_EQ(log.credit(1, 0, 0, 0, true, 150, 3, 64), 0u);   // a stream not here
  EXPECT_EQ(log.credit(1, 1, 0, 0, false, 500, 3, 64), 0u);  // another attempt's
}

TEST(OutputLogTest, AnotherAttemptStartsItsStreamsAgain) {
  OutputLog log(1024);
  log.add(chunk(1, 0, 0, 0, "old"));
  EXPECT_EQ(log.add(chunk(1, 1, 0, 0, "new")).offset, 0u);
  EXPECT_EQ(kept_data(log), (std::vector<std::string>{"1.0/0o@0:new"}));
  EXPECT_EQ(log.bytes_kept(), 3u);
}

TEST(OutputLogTest, AnAcknowledgedEndForgetsItsStreams) {
  OutputLog log(1024);
  log.add(chunk(1, 0, 0, 0, "job"));
  log.add(chunk(1, 0, 2, 0, "step2"));
  log.add(chunk(1, 0, 3, 1, "step3"));
  log.add(chunk(2, 0, 0, 0, "other"));
  log.forget(1, 0, 2);  // step 2's end
  EXPECT_EQ(kept_data(log),
            (std::vector<std::string>{"1.0/0o@0:job", "1.3/1o@0:step3", "2.0/0o@0:other"}));
  log.forget(1, 1, 0);  // another attempt's end: not this one's
  EXPECT_EQ(kept_data(log).size(), 3u);
  log.forget(1, 0, 0);  // the job's end: its steps too
  EXPECT_EQ(kept_data(log), (std::vector<std::string>{"2.0/0o@0:other"}));
  EXPECT_EQ(log.bytes_kept(), 5u);
}

TEST(OutputLogTest, AStreamTakenOverGoesOnInItsFirstNumberersName) {
  OutputLog log(1024);
  OutputLog::Chunk left = chunk(1, 0, 0, 0, "abc");
  left.offset = 40;
  left.incarnation = 7;  // the previous agent's
  log.restore(left);
  log.restore(left);  // a copy
  OutputLog::Chunk next = chunk(1, 0, 0, 0, "de");
  next.incarnation = 9;  // this agent's
  const OutputLog::Chunk& numbered = log.add(std::move(next));
  EXPECT_EQ(numbered.offset, 43u);
  EXPECT_EQ(numbered.incarnation, 7u);
  EXPECT_EQ(kept_data(log), (std::vector<std::string>{"1.0/0o@40:abc", "1.0/0o@43:de"}));
  // A stream this agent begins is numbered in its own name.
  OutputLog::Chunk fresh = chunk(1, 0, 0, 1, "x");
  fresh.incarnation = 9;
  EXPECT_EQ(log.add(std::move(fresh)).incarnation, 9u);
  // The shell was let send what the previous agent read (43): a grant adds the rest.
  EXPECT_EQ(log.credit(1, 0, 0, 0, false, /*granted=*/100, /*consumed=*/0, /*initial=*/10), 57u);
}

TEST(OutputLogTest, AnOpenedStreamTakesCreditBeforeItsFirstChunk) {
  OutputLog log(1024);
  EXPECT_EQ(log.credit(1, 0, 2, 3, true, 100, 0, 10), 0u);  // not kept: none
  log.open_stream(1, 0, 2, 3, true);
  EXPECT_EQ(log.credit(1, 0, 2, 3, true, 100, 0, 10), 90u);
  log.add(chunk(1, 0, 2, 3, "after", true));
  EXPECT_EQ(kept_data(log), (std::vector<std::string>{"1.2/3e@0:after"}));
  EXPECT_EQ(log.kept(1, 2).size(), 1u);
  EXPECT_TRUE(log.kept(1, 0).empty());
}

}  // namespace
}  // namespace hpcq::agent
