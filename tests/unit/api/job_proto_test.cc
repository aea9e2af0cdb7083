#include "lib/api/job_proto.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <string>

namespace hpcq::api {
namespace {

job::CheckpointRecord a_checkpoint() {
  job::CheckpointRecord r;
  r.time_us = 1'700'000'000'000'000;
  r.then = job::CheckpointThen::kRequeue;
  r.nodes = {"node1", "node2"};
  r.image = "/var/lib/hpcq/checkpoints/job-7/2-0";
  r.image_bytes = 5'000'000'000ULL;
  r.dump_seconds = 1.25;
  r.outcome = "ok";
  r.restored = true;
  r.periodic = true;
  r.to = {"node3", "node4"};
  r.preempted = true;
  r.preempted_for = 9;
  return r;
}

job::ResizeRecord a_resize() {
  job::ResizeRecord r;
  r.time_us = 10;
  r.from = 3;
  r.to = 2;
  r.kind = job::ResizeKind::kShrink;
  r.outcome = job::ResizeOutcome::kDeclined;
  r.reason = "the application said no";
  r.by = job::ResizeBy::kDrain;
  r.answered_us = 20;
  r.answer_seconds = 0.5;
  r.nodes = {"node1", "node2", "node3"};
  return r;
}

TEST(JobProto, RecordsRoundTripThroughTheirMessages) {
  EXPECT_EQ(from_proto(to_proto(a_checkpoint())).value(), a_checkpoint());
  EXPECT_EQ(from_proto(to_proto(a_resize())).value(), a_resize());
  job::Placement p{{"node1"}, 5, 9, "/ckpt/1-0", "requeued: preempted"};
  EXPECT_EQ(from_proto(to_proto(p)), p);
  // A checkpoint in flight has no outcome; a resize in flight neither.
  job::ResizeRecord in_flight = a_resize();
  in_flight.outcome = job::ResizeOutcome::kNone;
  EXPECT_EQ(to_proto(in_flight).outcome(), "");
  EXPECT_EQ(from_proto(to_proto(in_flight)).value(), in_flight);
}

// The store keeps these records as the messages' protobuf JSON; the words
// in it are the ones the API has always used.
TEST(JobProto, RecordsKeepTheirStoredWords) {
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(to_proto(a_resize()), &json).ok());
  EXPECT_NE(json.find(R"("kind":"shrink")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("outcome":"declined")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("by":"drain")"), std::string::npos) << json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(to_proto(a_checkpoint()), &json).ok());
  EXPECT_NE(json.find(R"("then":"requeue")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("preemptedFor":"9")"), std::string::npos) << json;

  // A record an older leader wrote reads back.
  v1::ResizeRecord old;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  R"({"timeUs":"1","from":1,"to":2,"kind":"expand","outcome":"timed_out",)"
                  R"("by":"scheduler","answeredUs":"3","nodes":["a","b"]})",
                  &old)
                  .ok());
  auto typed = from_proto(old);
  ASSERT_TRUE(typed.is_ok());
  EXPECT_EQ(typed->kind, job::ResizeKind::kExpand);
  EXPECT_EQ(typed->outcome, job::ResizeOutcome::kTimedOut);
  EXPECT_EQ(typed->by, job::ResizeBy::kScheduler);
}

TEST(JobProto, UnknownWordsAreRefusedWithTheirName) {
  v1::CheckpointRecord c = to_proto(a_checkpoint());
  c.set_then("later");
  auto checkpoint = from_proto(c);
  ASSERT_FALSE(checkpoint.is_ok());
  EXPECT_NE(checkpoint.status().message().find("later"), std::string::npos);
  for (const char* field : {"kind", "outcome", "by"}) {
    v1::ResizeRecord r = to_proto(a_resize());
    if (std::string(field) == "kind") r.set_kind("grow");
    if (std::string(field) == "outcome") r.set_outcome("maybe");
    if (std::string(field) == "by") r.set_by("nobody");
    EXPECT_FALSE(from_proto(r).is_ok()) << field;
  }
}

}  // namespace
}  // namespace hpcq::api
