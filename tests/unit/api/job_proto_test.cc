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

// sbatch's -H and its SLURM_* environment reach hpcqd.
TEST(JobProto, SbatchsHoldAndSlurmEnvironmentCross) {
  job::JobSpec spec;
  spec.argv = {"true"};
  spec.hold = true;
  spec.slurm_environment = true;
  auto back = from_proto(to_proto(spec));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_TRUE(back->hold);
  EXPECT_TRUE(back->slurm_environment);
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
  c.clear_action();  // an older record: the word alone
  c.set_then("later");
  auto checkpoint = from_proto(c);
  ASSERT_FALSE(checkpoint.is_ok());
  EXPECT_NE(checkpoint.status().message().find("later"), std::string::npos);
  for (const char* field : {"kind", "outcome", "by"}) {
    v1::ResizeRecord r = to_proto(a_resize());
    r.clear_resize_kind();
    if (std::string(field) == "kind") r.set_kind("grow");
    if (std::string(field) == "outcome") r.set_outcome("maybe");
    if (std::string(field) == "by") r.set_by("nobody");
    EXPECT_FALSE(from_proto(r).is_ok()) << field;
  }
}

// The API's enums, with the words older clients send beside them.
TEST(JobProto, ChoicesAreTypedAndOlderClientsWordsStillRead) {
  // A checkpoint's "then": the enum, else the word, else continue.
  EXPECT_EQ(checkpoint_then_of(v1::CHECKPOINT_STOP, "").value(), job::CheckpointThen::kStop);
  EXPECT_EQ(checkpoint_then_of(v1::CHECKPOINT_STOP, "requeue").value(), job::CheckpointThen::kStop);
  EXPECT_EQ(checkpoint_then_of(v1::CHECKPOINT_THEN_UNSPECIFIED, "requeue").value(),
            job::CheckpointThen::kRequeue);
  EXPECT_EQ(checkpoint_then_of(v1::CHECKPOINT_THEN_UNSPECIFIED, "").value(),
            job::CheckpointThen::kContinue);
  EXPECT_FALSE(checkpoint_then_of(v1::CHECKPOINT_THEN_UNSPECIFIED, "later").is_ok());
  EXPECT_FALSE(checkpoint_then_of(static_cast<v1::CheckpointThen>(9), "").is_ok());
  // Records carry both.
  v1::CheckpointRecord c = to_proto(a_checkpoint());
  EXPECT_EQ(c.action(), v1::CHECKPOINT_REQUEUE);
  EXPECT_EQ(c.then(), "requeue");
  v1::ResizeRecord r = to_proto(a_resize());
  EXPECT_EQ(r.resize_kind(), v1::RESIZE_SHRINK);
  r.clear_kind();  // a newer client's record: the enum alone
  EXPECT_EQ(from_proto(r)->kind, job::ResizeKind::kShrink);

  // A spec's layout: typed fields over the words, per field.
  job::JobSpec spec;
  spec.request.node_distribution = resource::Distribution::kCyclic;
  spec.request.cpu_bind = resource::CpuBind::kThreads;
  v1::JobSpec p = to_proto(spec);
  EXPECT_EQ(p.node_distribution(), v1::DISTRIBUTION_CYCLIC);
  EXPECT_EQ(p.core_distribution(), v1::DISTRIBUTION_BLOCK);
  EXPECT_EQ(p.cpu_bind_type(), v1::CPU_BIND_THREADS);
  EXPECT_EQ(p.distribution(), "cyclic");
  EXPECT_EQ(p.cpu_bind(), "threads");
  resource::ResourceRequest layout;
  ASSERT_TRUE(read_layout(p, layout).is_ok());
  EXPECT_EQ(layout.node_distribution, resource::Distribution::kCyclic);
  EXPECT_EQ(layout.cpu_bind, resource::CpuBind::kThreads);
  v1::JobSpec words;  // an older client: words only
  words.set_distribution("block:cyclic");
  words.set_cpu_bind("none");
  ASSERT_TRUE(read_layout(words, layout = {}).is_ok());
  EXPECT_EQ(layout.node_distribution, resource::Distribution::kBlock);
  EXPECT_EQ(layout.core_distribution, resource::Distribution::kCyclic);
  EXPECT_EQ(layout.cpu_bind, resource::CpuBind::kNone);
  words.set_cpu_bind_type(v1::CPU_BIND_CORES);  // the enum wins
  ASSERT_TRUE(read_layout(words, layout = {}).is_ok());
  EXPECT_EQ(layout.cpu_bind, resource::CpuBind::kCores);
  v1::JobSpec unknown;
  unknown.set_node_distribution(static_cast<v1::Distribution>(5));
  auto refused = read_layout(unknown, layout = {});
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.message(), "node_distribution: unknown value 5");
}

}  // namespace
}  // namespace hpcq::api
