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
    if (p.lost_before > 0) s += "[lost " + std::to_string(p.lost_before) + "]";
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
  EXPECT_EQ(text(order.give_up(t0 + seconds(1))), "0o:[lost 3]fg;");  // the next gap waits anew
  EXPECT_EQ(text(order.add(0, 0, false, 2, "cde", t0)), "");          // too late
  EXPECT_EQ(text(order.give_up(t0 + seconds(1), /*all=*/true)), "0o:[lost 2]j;");
}

TEST(OutputOrderTest, AStreamStartsWhereItsFirstChunkDoes) {
  OutputOrder order(seconds(1));
  const auto t0 = Clock::now();
  EXPECT_EQ(text(order.add(0, 0, false, 100, "late", t0)), "0o:late;");
  EXPECT_EQ(text(order.add(0, 0, false, 0, "early", t0)), "");
}

}  // namespace
}  // namespace hpcq::api
