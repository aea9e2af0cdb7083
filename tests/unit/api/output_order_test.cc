#include "lib/api/output_order.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hpcq::api {
namespace {

using Clock = OutputOrder::Clock;
using std::chrono::seconds;

std::string text(const std::vector<OutputOrder::Piece>& pieces) {
  std::string s;
  for (const auto& p : pieces) {
    s += std::to_string(p.rank) + (p.is_stderr ? "e" : "o") + ":";
    if (p.lost_before > 0) {  // the range lost: bytes [A, B] of the stream
      s += "[lost " + std::to_string(p.offset - p.lost_before) + "-" +
           std::to_string(p.offset - 1) + "]";
    }
    s += p.data + ";";
  }
  return s;
}

TEST(OutputOrderTest, PrintsEachByteOnceInOrder) {
  OutputOrder order(seconds(1));
  const auto t0 = Clock::now();
  EXPECT_EQ(text(order.add(0, 0, false, 0, "abc", t0)), "0o:abc;");
  EXPECT_EQ(text(order.add(0, 1, false, 0, "x", t0)), "1o:x;");      // another task
  EXPECT_EQ(text(order.add(0, 0, true, 0, "err", t0)), "0e:err;");   // another stream
  EXPECT_EQ(text(order.add(0, 0, false, 0, "abc", t0)), "");         // again (reconnected)
  EXPECT_EQ(text(order.add(0, 0, false, 1, "bcde", t0)), "0o:de;");  // partly again
  EXPECT_EQ(text(order.add(1, 0, false, 0, "requeued", t0)), "0o:requeued;");  // another attempt
}

TEST(OutputOrderTest, WhatComesAfterAGapWaitsForIt) {
  OutputOrder order(seconds(1));
  const auto t0 = Clock::now();
  EXPECT_EQ(text(order.add(0, 0, false, 0, "ab", t0)), "0o:ab;");
  EXPECT_EQ(text(order.add(0, 0, false, 5, "fg", t0)), "");
  EXPECT_EQ(text(order.add(0, 0, false, 7, "h", t0)), "");
  EXPECT_EQ(text(order.give_up(t0)), "");  // not waited long enough
  EXPECT_EQ(text(order.add(0, 0, false, 2, "cde", t0)), "0o:cde;0o:fg;0o:h;");
}

TEST(OutputOrderTest, AGapNotFilledInTimeIsGivenUpAsLost) {
  OutputOrder order(seconds(1));
  const auto t0 = Clock::now();
  order.add(0, 0, false, 0, "ab", t0);
  order.add(0, 0, false, 5, "fg", t0);
  order.add(0, 0, false, 9, "j", t0 + seconds(1));
  EXPECT_EQ(text(order.give_up(t0 + seconds(1))), "0o:[lost 2-4]fg;");  // the next gap waits anew
  EXPECT_EQ(text(order.add(0, 0, false, 2, "cde", t0)), "");            // too late
  EXPECT_EQ(text(order.give_up(t0 + seconds(1), /*all=*/true)), "0o:[lost 7-8]j;");
}

TEST(OutputOrderTest, EachPieceSaysWhereItStarts) {
  OutputOrder order(seconds(1));
  const auto t0 = Clock::now();
  std::vector<std::uint64_t> offsets;
  for (const auto& p : order.add(0, 0, false, 0, "ab", t0)) offsets.push_back(p.offset);
  order.add(0, 0, false, 4, "ef", t0);
  for (const auto& p : order.add(0, 0, false, 1, "bcd", t0)) offsets.push_back(p.offset);
  EXPECT_EQ(offsets, (std::vector<std::uint64_t>{0, 2, 4}));
}

TEST(OutputOrderTest, AStreamStartsWhereItsFirstChunkDoes) {
  OutputOrder order(seconds(1));
  const auto t0 = Clock::now();
  EXPECT_EQ(text(order.add(0, 0, false, 100, "late", t0)), "0o:late;");
  EXPECT_EQ(text(order.add(0, 0, false, 0, "early", t0)), "");
}

}  // namespace
}  // namespace hpcq::api
