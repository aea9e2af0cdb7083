// The job shell's PMI-1 server (agent/executor/pmi.h), as MPICH's client
// speaks to it: the lines below are the ones libmpich sends.
#include "agent/executor/pmi.h"

#include <gtest/gtest.h>

namespace hpcq::agent::pmi {
namespace {

std::vector<std::string> lines_to(const std::vector<Reply>& replies, std::size_t client) {
  std::vector<std::string> lines;
  for (const Reply& r : replies) {
    if (r.client == client) lines.push_back(r.line);
  }
  return lines;
}

World world(int size, int nodes) {
  World w;
  w.kvsname = "hpcq_7_0";
  w.size = size;
  w.nodes = nodes;
  w.preset["PMI_process_mapping"] = "(vector,(0,2,2))";
  return w;
}

TEST(Pmi, AnswersTheStartOfMpichsInit) {
  Server server(world(4, 2), {0, 1});
  EXPECT_EQ(server.on_line(0, "cmd=init pmi_version=1 pmi_subversion=1")[0].line,
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n");
  EXPECT_TRUE(server.in_use());
  EXPECT_EQ(server.on_line(0, "cmd=get_maxes")[0].line,
            "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024\n");
  EXPECT_EQ(server.on_line(0, "cmd=get_my_kvsname")[0].line,
            "cmd=my_kvsname rc=0 kvsname=hpcq_7_0\n");
  EXPECT_EQ(server.on_line(0, "cmd=get_universe_size")[0].line, "cmd=universe_size rc=0 size=4\n");
  EXPECT_EQ(server.on_line(0, "cmd=get_appnum")[0].line, "cmd=appnum rc=0 appnum=0\n");
  EXPECT_EQ(server.on_line(0, "cmd=get kvsname=hpcq_7_0 key=PMI_process_mapping")[0].line,
            "cmd=get_result rc=0 value=(vector,(0,2,2)) msg=success\n");
  EXPECT_EQ(server.on_line(1, "cmd=init pmi_version=2 pmi_subversion=0")[0].line,
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1\n");
}

TEST(Pmi, AFenceAcrossNodesWaitsForEveryLocalRankThenForTheOtherNodes) {
  Server server(world(4, 2), {0, 1});
  for (std::size_t c : {0u, 1u}) server.on_line(c, "cmd=init pmi_version=1 pmi_subversion=1");
  EXPECT_EQ(server.on_line(0, "cmd=put kvsname=hpcq_7_0 key=card-0 value=tcp://a=1")[0].line,
            "cmd=put_result rc=0 msg=success\n");
  server.on_line(1, "cmd=put kvsname=hpcq_7_0 key=card-1 value=b");
  EXPECT_TRUE(server.on_line(0, "cmd=barrier_in").empty());
  EXPECT_FALSE(server.fence_pending());  // rank 1 has not entered yet
  EXPECT_TRUE(server.on_line(1, "cmd=barrier_in").empty());
  ASSERT_TRUE(server.fence_pending());
  EXPECT_EQ(server.fence_seq(), 0u);
  EXPECT_EQ(server.take_fence(), "card-0=tcp://a=1\ncard-1=b\n");
  EXPECT_FALSE(server.fence_pending());
  // The other node's keys, and a stale answer that is ignored.
  EXPECT_TRUE(server.fence_done(5, {{"card-2", "c"}}).empty());
  auto released = server.fence_done(0, {{"card-0", "tcp://a=1"}, {"card-2", "c"}, {"card-3", "d"}});
  EXPECT_EQ(lines_to(released, 0), std::vector<std::string>{"cmd=barrier_out rc=0\n"});
  EXPECT_EQ(lines_to(released, 1), std::vector<std::string>{"cmd=barrier_out rc=0\n"});
  EXPECT_EQ(server.fence_seq(), 1u);
  EXPECT_EQ(server.on_line(1, "cmd=get kvsname=hpcq_7_0 key=card-3")[0].line,
            "cmd=get_result rc=0 value=d msg=success\n");
  EXPECT_EQ(server.on_line(1, "cmd=get kvsname=hpcq_7_0 key=card-9")[0].line,
            "cmd=get_result rc=-1 value=unknown msg=key_card-9_not_found\n");
  EXPECT_EQ(server.on_line(0, "cmd=finalize")[0].line, "cmd=finalize_ack rc=0\n");
}

TEST(Pmi, AWorldOnOneNodeFencesHere) {
  Server server(world(2, 1), {0, 1});
  for (std::size_t c : {0u, 1u}) server.on_line(c, "cmd=init pmi_version=1 pmi_subversion=1");
  server.on_line(0, "cmd=barrier_in");
  auto released = server.on_line(1, "cmd=barrier_in");
  EXPECT_EQ(released.size(), 2u);
  EXPECT_FALSE(server.fence_pending());
}

TEST(Pmi, ARankGoneBeforeFinalizeBreaksTheWorldAndFailsTheBarrier) {
  Server server(world(2, 1), {0, 1});
  for (std::size_t c : {0u, 1u}) server.on_line(c, "cmd=init pmi_version=1 pmi_subversion=1");
  EXPECT_TRUE(server.on_line(0, "cmd=barrier_in").empty());
  std::vector<Reply> replies;
  EXPECT_TRUE(server.on_client_gone(1, replies));
  EXPECT_EQ(lines_to(replies, 0),
            std::vector<std::string>{"cmd=barrier_out rc=-1 msg=a_rank_of_the_job_has_ended\n"});
}

TEST(Pmi, ARankGoneBeforeInitBreaksAWorldThatOthersBegan) {
  // Gone while another waits in the barrier: the world misses it.
  Server waiting(world(2, 1), {0, 1});
  waiting.on_line(0, "cmd=init pmi_version=1 pmi_subversion=1");
  EXPECT_TRUE(waiting.on_line(0, "cmd=barrier_in").empty());
  std::vector<Reply> replies;
  EXPECT_TRUE(waiting.on_client_gone(1, replies));
  EXPECT_EQ(waiting.broken_by(), std::optional<std::size_t>(1));
  EXPECT_EQ(lines_to(replies, 0),
            std::vector<std::string>{"cmd=barrier_out rc=-1 msg=a_rank_of_the_job_has_ended\n"});
  // Gone before anyone began: nothing breaks (a program that uses no PMI)...
  Server early(world(2, 1), {0, 1});
  replies.clear();
  EXPECT_FALSE(early.on_client_gone(1, replies));
  EXPECT_FALSE(early.broken_by());
  // ...until another begins.
  early.on_line(0, "cmd=init pmi_version=1 pmi_subversion=1");
  EXPECT_EQ(early.broken_by(), std::optional<std::size_t>(1));
}

TEST(Pmi, AbortRecordsTheFirstRankAndCode) {
  Server server(world(4, 2), {2, 3});
  server.on_line(1, "cmd=abort exitcode=17");
  server.on_line(0, "cmd=abort exitcode=3");
  ASSERT_TRUE(server.abort().has_value());
  EXPECT_EQ(server.abort()->rank, 3);
  EXPECT_EQ(server.abort()->code, 17);
}

TEST(Pmi, WhatHpcqDoesNotServeIsAnsweredWithAnError) {
  Server server(world(1, 1), {0});
  EXPECT_EQ(server.on_line(0, "cmd=publish_name service=s port=p")[0].line,
            "cmd=publish_result rc=-1 msg=hpcq_has_no_name_service\n");
  EXPECT_EQ(server.on_line(0, "cmd=lookup_name service=s")[0].line,
            "cmd=lookup_result rc=-1 msg=hpcq_has_no_name_service\n");
  EXPECT_TRUE(server.on_line(0, "mcmd=spawn").empty());
  EXPECT_TRUE(server.on_line(0, "nprocs=2").empty());
  EXPECT_EQ(server.on_line(0, "endcmd")[0].line,
            "cmd=spawn_result rc=-1 msg=hpcq_does_not_spawn_processes\n");
  EXPECT_EQ(server.on_line(0, "cmd=frobnicate x y")[0].line,
            "cmd=frobnicate_result rc=-1 msg=unknown_command\n");
  EXPECT_EQ(server.on_line(0, "")[0].line, "cmd=unknown_result rc=-1 msg=unknown_command\n");
  EXPECT_EQ(server.on_line(0, "cmd=put kvsname=x key==k value=v")[0].line,
            "cmd=put_result rc=-1 msg=a_key_holds_no_equals_sign\n");
  std::string long_value(kValueMax + 1, 'v');
  EXPECT_EQ(server.on_line(0, "cmd=put kvsname=x key=k value=" + long_value)[0].line,
            "cmd=put_result rc=-1 msg=key_or_value_too_long\n");
}

TEST(Pmi, KvsRoundTripsAndRefusesGarbage) {
  const Kvs kvs{{"a", "1=2"}, {"b", ""}};
  auto back = decode_kvs(encode_kvs(kvs));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, kvs);
  EXPECT_FALSE(decode_kvs("a=1").is_ok());  // unterminated
  EXPECT_FALSE(decode_kvs("novalue\n").is_ok());
  EXPECT_FALSE(decode_kvs("=x\n").is_ok());
}

TEST(Pmi, ProcessMappingDescribesBlockAndCyclicLayouts) {
  EXPECT_EQ(process_mapping({0, 0, 1, 1, 2, 2, 3, 3}), "(vector,(0,4,2))");
  EXPECT_EQ(process_mapping({0, 1, 0, 1}), "(vector,(0,2,1),(0,2,1))");
  EXPECT_EQ(process_mapping({0, 0, 0, 1}), "(vector,(0,1,3),(1,1,1))");
  std::vector<int> scattered;
  for (int i = 0; i < 2000; ++i) scattered.push_back(i % 2 == 0 ? 0 : i % 7);
  EXPECT_EQ(process_mapping(scattered), "");  // longer than a PMI value
}

}  // namespace
}  // namespace hpcq::agent::pmi
