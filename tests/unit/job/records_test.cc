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

TEST(Records, ResizeWordsRoundTrip) {
  for (ResizeKind kind : {ResizeKind::kShrink, ResizeKind::kExpand}) {
    EXPECT_EQ(parse_resize_kind(resize_kind_name(kind)), kind);
  }
  for (ResizeOutcome outcome :
       {ResizeOutcome::kNone, ResizeOutcome::kAcknowledged, ResizeOutcome::kDeclined,
        ResizeOutcome::kTimedOut, ResizeOutcome::kFailed}) {
    EXPECT_EQ(parse_resize_outcome(resize_outcome_name(outcome)), outcome);
  }
  for (ResizeBy by :
       {ResizeBy::kUser, ResizeBy::kScheduler, ResizeBy::kNodeDown, ResizeBy::kDrain}) {
    EXPECT_EQ(parse_resize_by(resize_by_name(by)), by);
  }
  EXPECT_STREQ(resize_outcome_name(ResizeOutcome::kTimedOut), "timed_out");
  EXPECT_EQ(parse_resize_kind("grow"), std::nullopt);
  EXPECT_EQ(parse_resize_by(""), std::nullopt);
}

}  // namespace
}  // namespace hpcq::job
