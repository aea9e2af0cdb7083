#include "lib/job/records.h"

#include <gtest/gtest.h>

namespace hpcq::job {
namespace {

TEST(Records, CheckpointThenRoundTripsThroughItsWord) {
  for (CheckpointThen then :
       {CheckpointThen::kContinue, CheckpointThen::kRequeue, CheckpointThen::kStop}) {
    EXPECT_EQ(parse_checkpoint_then(checkpoint_then_name(then)), then);
  }
  EXPECT_STREQ(checkpoint_then_name(CheckpointThen::kRequeue), "requeue");
  EXPECT_EQ(parse_checkpoint_then("later"), std::nullopt);
  EXPECT_EQ(parse_checkpoint_then(""), std::nullopt);
  EXPECT_EQ(parse_checkpoint_then("Continue"), std::nullopt);
}

}  // namespace
}  // namespace hpcq::job
