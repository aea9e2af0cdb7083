// The job shell's PMI server (shell/pmi.h): PMI-1 as MPICH's client
// speaks it (the lines below are the ones libmpich sends), PMI-2 as Slurm's
// libpmi2 does (its length left-aligned, "%-6d") and MPICH's (right-aligned).
#include "shell/pmi.h"

#include <gtest/gtest.h>

namespace hpcq::agent::pmi {
namespace {

std::vector<std::string> lines_to(const std::vector<Reply>& replies, std::size_t client) {
  std::vector<std::string> lines;
  for (const Reply& r : replies) {
    if (r.client == client) lines.push_back(r.text);
  }
  return lines;
}

// A PMI-2 message as Slurm's libpmi2 writes it: its length, left-aligned.
std::string message(const std::string& text) {
  std::string length = std::to_string(text.size());
  length.resize(kLengthWidth, ' ');
  return length + text;
}

// The texts of `replies` to `client`, each a PMI-2 message's pairs after its
// length, which must be right.
std::vector<std::string> messages_to(const std::vector<Reply>& replies, std::size_t client) {
  std::vector<std::string> texts;
  for (const Reply& r : replies) {
    if (r.client != client) continue;
    EXPECT_GE(r.text.size(), kLengthWidth);
    EXPECT_EQ(std::stoul(r.text.substr(0, kLengthWidth)), r.text.size() - kLengthWidth) << r.text;
    texts.push_back(r.text.substr(kLengthWidth));
  }
  return texts;
}

constexpr const char* kInit2 = "cmd=init pmi_version=2 pmi_subversion=0\n";

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
  EXPECT_EQ(server.on_line(0, "cmd=init pmi_version=1 pmi_subversion=1")[0].text,
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n");
  EXPECT_TRUE(server.in_use());
  EXPECT_EQ(server.on_line(0, "cmd=get_maxes")[0].text,
            "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024\n");
  EXPECT_EQ(server.on_line(0, "cmd=get_my_kvsname")[0].text,
            "cmd=my_kvsname rc=0 kvsname=hpcq_7_0\n");
  EXPECT_EQ(server.on_line(0, "cmd=get_universe_size")[0].text, "cmd=universe_size rc=0 size=4\n");
  EXPECT_EQ(server.on_line(0, "cmd=get_appnum")[0].text, "cmd=appnum rc=0 appnum=0\n");
  EXPECT_EQ(server.on_line(0, "cmd=get kvsname=hpcq_7_0 key=PMI_process_mapping")[0].text,
            "cmd=get_result rc=0 value=(vector,(0,2,2)) msg=success\n");
  EXPECT_EQ(server.on_line(1, "cmd=init pmi_version=3 pmi_subversion=0")[0].text,
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1\n");
}

TEST(Pmi, AFenceAcrossNodesWaitsForEveryLocalRankThenForTheOtherNodes) {
  Server server(world(4, 2), {0, 1});
  for (std::size_t c : {0u, 1u}) server.on_line(c, "cmd=init pmi_version=1 pmi_subversion=1");
  EXPECT_EQ(server.on_line(0, "cmd=put kvsname=hpcq_7_0 key=card-0 value=tcp://a=1")[0].text,
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
  EXPECT_EQ(server.on_line(1, "cmd=get kvsname=hpcq_7_0 key=card-3")[0].text,
            "cmd=get_result rc=0 value=d msg=success\n");
  EXPECT_EQ(server.on_line(1, "cmd=get kvsname=hpcq_7_0 key=card-9")[0].text,
            "cmd=get_result rc=-1 value=unknown msg=key_card-9_not_found\n");
  EXPECT_EQ(server.on_line(0, "cmd=finalize")[0].text, "cmd=finalize_ack rc=0\n");
}

// The key space's limit: PMI_process_mapping (37 bytes as "key=value\n")
// and the puts, each counted as its line; a replaced value counts once.
TEST(Pmi, APutPastTheKeySpacesLimitIsRefusedNamingIt) {
  World w = world(4, 2);
  w.max_kvs_bytes = 100;
  Server server(w, {0, 1});
  for (std::size_t c : {0u, 1u}) server.on_line(c, "cmd=init pmi_version=1 pmi_subversion=1");
  const std::string forty(40, 'v');
  EXPECT_EQ(server.on_line(0, "cmd=put kvsname=hpcq_7_0 key=a value=" + forty)[0].text,
            "cmd=put_result rc=0 msg=success\n");  // 80 bytes
  EXPECT_EQ(server.on_line(1, "cmd=put kvsname=hpcq_7_0 key=b value=" + forty)[0].text,
            "cmd=put_result rc=-1 msg=PMI_key_space_of_hpcq_7_0_full:_its_keys_and_values_would_"
            "take_123_bytes,_past_the_limit_of_100_([agent]_pmi_max_kvs_bytes)\n");
  EXPECT_EQ(server.key_space_refusal(),
            "PMI key space of hpcq_7_0 full: its keys and values would take 123 bytes, past the "
            "limit of 100 ([agent] pmi_max_kvs_bytes)");
  // A shorter value for a key frees its room.
  EXPECT_EQ(server.on_line(0, "cmd=put kvsname=hpcq_7_0 key=a value=short")[0].text,
            "cmd=put_result rc=0 msg=success\n");
  EXPECT_EQ(server.on_line(1, "cmd=put kvsname=hpcq_7_0 key=b value=" + forty)[0].text,
            "cmd=put_result rc=0 msg=success\n");
  // The refused put left nothing: the fence carries what was stored.
  server.on_line(0, "cmd=barrier_in");
  server.on_line(1, "cmd=barrier_in");
  EXPECT_EQ(server.take_fence(), "a=short\nb=" + forty + "\n");
}

TEST(Pmi, AFenceThatFailsTellsEveryWaitingRankWhy) {
  Server server(world(4, 2), {0, 1});
  server.on_line(0, "cmd=init pmi_version=1 pmi_subversion=1");
  server.on_bytes(1, std::string(kInit2) + message("cmd=fullinit;pmirank=1;"));
  server.on_line(0, "cmd=barrier_in");
  server.on_bytes(1, message("cmd=kvs-fence;thrid=7;"));
  ASSERT_TRUE(server.fence_pending());
  (void)server.take_fence();
  const auto replies = server.fence_failed("PMI fence 0 of job 7: too big");
  EXPECT_EQ(lines_to(replies, 0),
            std::vector<std::string>{"cmd=barrier_out rc=-1 msg=PMI_fence_0_of_job_7:_too_big\n"});
  EXPECT_EQ(messages_to(replies, 1),
            std::vector<std::string>{
                "cmd=kvs-fence-response;thrid=7;rc=-1;errmsg=PMI fence 0 of job 7: too big;"});
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
  EXPECT_EQ(server.on_line(0, "cmd=publish_name service=s port=p")[0].text,
            "cmd=publish_result rc=-1 msg=hpcq_has_no_name_service\n");
  EXPECT_EQ(server.on_line(0, "cmd=lookup_name service=s")[0].text,
            "cmd=lookup_result rc=-1 msg=hpcq_has_no_name_service\n");
  EXPECT_EQ(server.on_line(0, "cmd=frobnicate x y")[0].text,
            "cmd=frobnicate_result rc=-1 msg=unknown_command\n");
  EXPECT_EQ(server.on_line(0, "")[0].text, "cmd=unknown_result rc=-1 msg=unknown_command\n");
  EXPECT_EQ(server.on_line(0, "cmd=put kvsname=x key==k value=v")[0].text,
            "cmd=put_result rc=-1 msg=a_key_holds_no_equals_sign\n");
  std::string long_value(kValueMax + 1, 'v');
  EXPECT_EQ(server.on_line(0, "cmd=put kvsname=x key=k value=" + long_value)[0].text,
            "cmd=put_result rc=-1 msg=key_or_value_too_long\n");
}

// The whole error message, as PMI-1 words carry it.
std::string spawn_refused_line() {
  std::string words(kSpawnRefused);
  for (char& c : words) {
    if (c == ' ' || c == '=') c = '_';
  }
  return "cmd=spawn_result rc=-1 msg=" + words + "\n";
}

TEST(Pmi, ASpawnIsRefusedOnceItsLastCommandsBlockHasEndedAndKept) {
  Server server(world(4, 2), {2, 3});
  server.on_bytes(1, "cmd=init pmi_version=1 pmi_subversion=1\n");
  EXPECT_FALSE(server.spawn_refused().has_value());
  // MPI_Comm_spawn_multiple of two commands, as MPICH's simple PMI writes
  // it: one block per command, one answer after the last. An argument may
  // hold spaces, '=' and the word endcmd.
  const std::string first =
      "mcmd=spawn\nnprocs=2\nexecname=./worker\ntotspawns=2\nspawnssofar=1\n"
      "arg1=-x a=b endcmd\nargcnt=1\npreput_num=1\npreput_key_0=PARENT_ROOT_PORT_NAME\n"
      "preput_val_0=tag#0$description#n1$\ninfo_num=1\ninfo_key_0=wdir\ninfo_val_0=/tmp\n"
      "endcmd\n";
  EXPECT_TRUE(server.on_bytes(1, first).empty());
  EXPECT_FALSE(server.spawn_refused().has_value());
  const std::string second =
      "mcmd=spawn\nnprocs=1\nexecname=./other\ntotspawns=2\nspawnssofar=2\nargcnt=0\n"
      "preput_num=0\ninfo_num=0\nendcmd\n";
  EXPECT_EQ(lines_to(server.on_bytes(1, second), 1),
            std::vector<std::string>{spawn_refused_line()});
  EXPECT_EQ(server.spawn_refused(), 3);
  // The client reads on as before.
  EXPECT_EQ(server.on_line(1, "cmd=get_appnum")[0].text, "cmd=appnum rc=0 appnum=0\n");
  // A block without the counts (one command) is answered at its end.
  EXPECT_TRUE(server.on_line(0, "mcmd=spawn").empty());
  EXPECT_TRUE(server.on_line(0, "nprocs=1").empty());
  EXPECT_EQ(server.on_line(0, "endcmd")[0].text, spawn_refused_line());
  EXPECT_EQ(server.spawn_refused(), 3);  // the first is kept
}

TEST(Pmi2, AnswersSlurmsLibpmi2FromInitToFinalize) {
  Server server(world(4, 2), {2, 3});
  // The PMI-1 init line and the first PMI-2 message in one read.
  auto replies =
      server.on_bytes(1, std::string(kInit2) + message("cmd=fullinit;pmirank=3;threaded=FALSE;"));
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].text, "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n");
  EXPECT_EQ(messages_to({replies[1]}, 1),
            std::vector<std::string>{"cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;"
                                     "rank=3;size=4;appnum=0;debugged=FALSE;pmiverbose=FALSE;"});
  EXPECT_EQ(replies[1].text.substr(0, kLengthWidth), "113   ");
  EXPECT_TRUE(server.in_use());
  EXPECT_EQ(messages_to(server.on_bytes(1, message("cmd=job-getid;")), 1),
            std::vector<std::string>{"cmd=job-getid-response;rc=0;jobid=hpcq_7_0;"});
  // A message split anywhere, its length right-aligned as MPICH writes it.
  const std::string put = "    41cmd=kvs-put;key=bc-3;value=tcp://n1:5000;";
  EXPECT_TRUE(server.on_bytes(1, put.substr(0, 3)).empty());
  EXPECT_TRUE(server.on_bytes(1, put.substr(3, 20)).empty());
  EXPECT_EQ(messages_to(server.on_bytes(1, put.substr(23)), 1),
            std::vector<std::string>{"cmd=kvs-put-response;rc=0;"});
  EXPECT_EQ(messages_to(server.on_bytes(1, message("cmd=kvs-get;jobid=;srcid=-1;key=bc-3;")), 1),
            std::vector<std::string>{"cmd=kvs-get-response;rc=0;found=TRUE;value=tcp://n1:5000;"});
  EXPECT_EQ(messages_to(server.on_bytes(1, message("cmd=kvs-get;jobid=;srcid=-1;key=nope;")), 1),
            std::vector<std::string>{"cmd=kvs-get-response;rc=0;found=FALSE;"});
  // A threaded client's thrid comes back.
  EXPECT_EQ(messages_to(server.on_bytes(1, message("cmd=finalize;thrid=0x7f00;")), 1),
            std::vector<std::string>{"cmd=finalize-response;thrid=0x7f00;rc=0;"});
  std::vector<Reply> gone;
  EXPECT_FALSE(server.on_client_gone(1, gone));  // finalized: the world is whole
}

TEST(Pmi2, AKvsPutPastTheKeySpacesLimitIsRefusedNamingIt) {
  World w = world(4, 2);
  w.max_kvs_bytes = 50;
  Server server(w, {2, 3});
  server.on_bytes(0, std::string(kInit2) + message("cmd=fullinit;pmirank=2;"));
  EXPECT_EQ(
      messages_to(
          server.on_bytes(0, message("cmd=kvs-put;key=k;value=" + std::string(20, 'v') + ";")), 0),
      std::vector<std::string>{"cmd=kvs-put-response;rc=-1;errmsg=PMI key space of hpcq_7_0 "
                               "full: its keys and values would take 60 bytes, past the "
                               "limit of 50 ([agent] pmi_max_kvs_bytes);"});
  EXPECT_EQ(messages_to(server.on_bytes(0, message("cmd=kvs-put;key=k;value=v;")), 0),
            std::vector<std::string>{"cmd=kvs-put-response;rc=0;"});
}

TEST(Pmi2, EscapesSemicolonsBothWays) {
  EXPECT_EQ(encode_message({{"cmd", "kvs-get-response"}, {"value", "a;b;;"}}),
            "36    cmd=kvs-get-response;value=a;;b;;;;;");
  auto pairs = decode_message("cmd=kvs-put;key=k;value=a;;b;;;;;");
  ASSERT_TRUE(pairs.is_ok());
  EXPECT_EQ(*pairs, (Pairs{{"cmd", "kvs-put"}, {"key", "k"}, {"value", "a;b;;"}}));
  // The last pair's ';' may be missing; a value may be empty.
  pairs = decode_message("cmd=kvs-get;jobid=;key=x");
  ASSERT_TRUE(pairs.is_ok());
  EXPECT_EQ(*pairs, (Pairs{{"cmd", "kvs-get"}, {"jobid", ""}, {"key", "x"}}));
  EXPECT_FALSE(decode_message("cmd=x;novalue;").is_ok());
  EXPECT_FALSE(decode_message("=x;").is_ok());

  Server server(world(2, 1), {0, 1});
  server.on_bytes(0, std::string(kInit2) + message("cmd=fullinit;pmirank=0;threaded=FALSE;"));
  server.on_bytes(0, message("cmd=kvs-put;key=semi;value=x;;y;"));
  EXPECT_EQ(messages_to(server.on_bytes(0, message("cmd=kvs-get;key=semi;")), 0),
            std::vector<std::string>{"cmd=kvs-get-response;rc=0;found=TRUE;value=x;;y;"});
  // The same key as a PMI-1 client reads it: one space, one form.
  server.on_line(1, "cmd=init pmi_version=1 pmi_subversion=1");
  EXPECT_EQ(server.on_line(1, "cmd=get kvsname=hpcq_7_0 key=semi")[0].text,
            "cmd=get_result rc=0 value=x;y msg=success\n");
}

TEST(Pmi2, AFenceMixesAPmi1AndAPmi2ClientInOneKeySpace) {
  Server server(world(4, 2), {0, 1});
  server.on_line(0, "cmd=init pmi_version=1 pmi_subversion=1");
  server.on_bytes(1, std::string(kInit2) + message("cmd=fullinit;pmirank=1;threaded=FALSE;"));
  server.on_line(0, "cmd=put kvsname=hpcq_7_0 key=card-0 value=a");
  server.on_bytes(1, message("cmd=kvs-put;key=card-1;value=b;"));
  EXPECT_TRUE(server.on_bytes(1, message("cmd=kvs-fence;thrid=0x1;")).empty());
  EXPECT_FALSE(server.fence_pending());  // rank 0 has not entered yet
  EXPECT_TRUE(server.on_line(0, "cmd=barrier_in").empty());
  ASSERT_TRUE(server.fence_pending());
  EXPECT_EQ(server.take_fence(), "card-0=a\ncard-1=b\n");
  auto released = server.fence_done(0, {{"card-0", "a"}, {"card-1", "b"}, {"card-2", "c"}});
  EXPECT_EQ(lines_to(released, 0), std::vector<std::string>{"cmd=barrier_out rc=0\n"});
  EXPECT_EQ(messages_to(released, 1),
            std::vector<std::string>{"cmd=kvs-fence-response;thrid=0x1;rc=0;"});
  // Each reads the other's key and the other node's.
  EXPECT_EQ(server.on_line(0, "cmd=get kvsname=hpcq_7_0 key=card-1")[0].text,
            "cmd=get_result rc=0 value=b msg=success\n");
  EXPECT_EQ(messages_to(server.on_bytes(1, message("cmd=kvs-get;key=card-2;")), 1),
            std::vector<std::string>{"cmd=kvs-get-response;rc=0;found=TRUE;value=c;"});
  // A failed fence: each gets its protocol's error.
  server.on_line(0, "cmd=barrier_in");
  server.on_bytes(1, message("cmd=kvs-fence;"));
  server.take_fence();
  auto failed = server.fence_failed();
  EXPECT_EQ(lines_to(failed, 0),
            std::vector<std::string>{"cmd=barrier_out rc=-1 msg=a_rank_of_the_job_has_ended\n"});
  EXPECT_EQ(
      messages_to(failed, 1),
      std::vector<std::string>{"cmd=kvs-fence-response;rc=-1;errmsg=a rank of the job has ended;"});
}

TEST(Pmi2, AWorldOnOneNodeFencesHere) {
  Server server(world(2, 1), {0, 1});
  for (std::size_t c : {0u, 1u}) {
    server.on_bytes(c, std::string(kInit2) + message("cmd=fullinit;threaded=FALSE;"));
  }
  EXPECT_TRUE(server.on_bytes(0, message("cmd=kvs-fence;")).empty());
  auto released = server.on_bytes(1, message("cmd=kvs-fence;"));
  EXPECT_EQ(released.size(), 2u);
  EXPECT_FALSE(server.fence_pending());
}

TEST(Pmi2, GetJobAttrTellsTheMappingAndTheUniverseSize) {
  World w = world(4, 2);
  Server server(w, {0, 1});
  server.on_bytes(0, std::string(kInit2) + message("cmd=fullinit;threaded=FALSE;"));
  auto attr = [&](const std::string& key) {
    return messages_to(server.on_bytes(0, message("cmd=info-getjobattr;key=" + key + ";")), 0);
  };
  EXPECT_EQ(attr("PMI_process_mapping"),
            std::vector<std::string>{
                "cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,2,2));"});
  EXPECT_EQ(attr("universeSize"),
            std::vector<std::string>{"cmd=info-getjobattr-response;rc=0;found=TRUE;value=4;"});
  EXPECT_EQ(attr("PMI_netinfo_of_task"),
            std::vector<std::string>{"cmd=info-getjobattr-response;rc=0;found=FALSE;"});
  // A mapping too long for a value is not told (MPICH then asks otherwise).
  w.preset["PMI_process_mapping"] = "";
  Server unmapped(w, {0});
  unmapped.on_bytes(0, std::string(kInit2));
  EXPECT_EQ(
      messages_to(unmapped.on_bytes(0, message("cmd=info-getjobattr;key=PMI_process_mapping;")), 0),
      std::vector<std::string>{"cmd=info-getjobattr-response;rc=0;found=FALSE;"});
}

TEST(Pmi2, NodeAttributesStayOnTheNodeAndAWaiterGetsThePut) {
  Server server(world(4, 2), {0, 1});
  for (std::size_t c : {0u, 1u}) server.on_bytes(c, std::string(kInit2));
  EXPECT_EQ(messages_to(server.on_bytes(1, message("cmd=info-getnodeattr;key=shm;wait=FALSE;")), 1),
            std::vector<std::string>{"cmd=info-getnodeattr-response;rc=0;found=FALSE;"});
  EXPECT_TRUE(
      server.on_bytes(1, message("cmd=info-getnodeattr;key=shm;wait=TRUE;thrid=t1;")).empty());
  auto replies = server.on_bytes(0, message("cmd=info-putnodeattr;key=shm;value=/dev/shm/x;"));
  EXPECT_EQ(messages_to(replies, 0),
            std::vector<std::string>{"cmd=info-putnodeattr-response;rc=0;"});
  EXPECT_EQ(messages_to(replies, 1),
            std::vector<std::string>{
                "cmd=info-getnodeattr-response;thrid=t1;rc=0;found=TRUE;value=/dev/shm/x;"});
  EXPECT_EQ(
      messages_to(server.on_bytes(1, message("cmd=info-getnodeattr;key=shm;")), 1),
      std::vector<std::string>{"cmd=info-getnodeattr-response;rc=0;found=TRUE;value=/dev/shm/x;"});
  // Not a key of the world: no fence carries it.
  for (std::size_t c : {0u, 1u}) server.on_bytes(c, message("cmd=kvs-fence;"));
  EXPECT_EQ(server.take_fence(), "");
}

TEST(Pmi2, AbortRecordsTheRankWithCodeOneAndItsMessage) {
  Server server(world(4, 2), {2, 3});
  server.on_bytes(0, std::string(kInit2));
  EXPECT_TRUE(server.on_bytes(0, message("cmd=abort;isworld=TRUE;msg=rank 2 gives up;")).empty());
  ASSERT_TRUE(server.abort().has_value());
  EXPECT_EQ(server.abort()->rank, 2);
  EXPECT_EQ(server.abort()->code, 1);
  EXPECT_EQ(server.abort()->message, "rank 2 gives up");
}

TEST(Pmi2, WhatHpcqDoesNotServeIsAnsweredWithAnError) {
  Server server(world(1, 1), {0});
  server.on_bytes(0, std::string(kInit2));
  auto first = [&](const std::string& text) {
    auto texts = messages_to(server.on_bytes(0, message(text)), 0);
    return texts.size() == 1 ? texts[0] : "(" + std::to_string(texts.size()) + " answers)";
  };
  EXPECT_FALSE(server.spawn_refused().has_value());
  EXPECT_EQ(first("cmd=spawn;thrid=7;ncmds=1;preputcount=0;subcmd=a.out;maxprocs=2;argc=0;"),
            "cmd=spawn-response;thrid=7;rc=-1;errmsg=" + std::string(kSpawnRefused) + ";");
  EXPECT_EQ(server.spawn_refused(), 0);
  EXPECT_EQ(first("cmd=name-publish;name=s;port=p;infokeycount=0;"),
            "cmd=name-publish-response;rc=-1;errmsg=hpcq has no name service;");
  EXPECT_EQ(first("cmd=name-lookup;name=s;infokeycount=0;"),
            "cmd=name-lookup-response;rc=-1;errmsg=hpcq has no name service;");
  EXPECT_EQ(first("cmd=job-connect;jobid=x;"),
            "cmd=job-connect-response;rc=-1;errmsg=unknown or unsupported command;");
  EXPECT_EQ(first("cmd=kvs-put;key=a=b;value=v;"),
            "cmd=kvs-put-response;rc=-1;errmsg=a key holds no '=' or newline, a value no newline;");
  EXPECT_EQ(first("cmd=kvs-put;key=k;value=" + std::string(kValueMax + 1, 'v') + ";"),
            "cmd=kvs-put-response;rc=-1;errmsg=key or value too long;");
  EXPECT_EQ(first("cmd=kvs-get;junk;"),
            "cmd=kvs-get-response;rc=-1;errmsg=PMI-2 message: a pair without '=';");
  EXPECT_EQ(first("key=x;cmd=kvs-get;"),
            "cmd=error;rc=-1;errmsg=a PMI-2 message begins with cmd=;");
  EXPECT_EQ(first(""), "cmd=error;rc=-1;errmsg=a PMI-2 message begins with cmd=;");
  // The client is still served.
  EXPECT_EQ(first("cmd=job-getid;"), "cmd=job-getid-response;rc=0;jobid=hpcq_7_0;");
  EXPECT_TRUE(server.refused(0).empty());
}

TEST(Pmi2, AMalformedLengthIsRefusedWithOneAnswerAndTheClientNotReadAgain) {
  Server server(world(2, 1), {0, 1});
  server.on_bytes(0, std::string(kInit2));
  auto replies = server.on_bytes(0, "12x   cmd=job-getid;" + message("cmd=job-getid;"));
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(messages_to(replies, 0),
            std::vector<std::string>{"cmd=error;rc=-1;errmsg=a PMI-2 message whose length is "
                                     "not a number up to 65536: '12x   ';"});
  EXPECT_EQ(server.refused(0),
            "a PMI-2 message whose length is not a number up to 65536: '12x   '");
  EXPECT_TRUE(server.on_bytes(0, message("cmd=job-getid;")).empty());
  // Too long a message is refused the same way, before its bytes come.
  server.on_bytes(1, std::string(kInit2));
  EXPECT_EQ(server.on_bytes(1, "999999").size(), 1u);
  EXPECT_FALSE(server.refused(1).empty());
  // A refused client that began and did not finalize still breaks the world.
  std::vector<Reply> gone;
  EXPECT_TRUE(server.on_client_gone(0, gone));
}

TEST(Pmi, ALineTooLongIsRefusedWithOneLine) {
  Server server(world(1, 1), {0});
  auto replies = server.on_bytes(0, "cmd=put key=k value=" + std::string(kLineMax, 'v'));
  EXPECT_EQ(lines_to(replies, 0),
            std::vector<std::string>{"cmd=error rc=-1 msg=a_PMI-1_line_longer_than_4096_bytes\n"});
  EXPECT_FALSE(server.refused(0).empty());
  EXPECT_TRUE(server.on_bytes(0, "\ncmd=get_maxes\n").empty());
}

TEST(Pmi, LinesMaySplitAnywhereAndComeSeveralAtOnce) {
  Server server(world(2, 1), {0, 1});
  EXPECT_TRUE(server.on_bytes(0, "cmd=init pmi_vers").empty());
  auto replies = server.on_bytes(0, "ion=1 pmi_subversion=1\ncmd=get_appnum\ncmd=get_univ");
  EXPECT_EQ(lines_to(replies, 0),
            (std::vector<std::string>{"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n",
                                      "cmd=appnum rc=0 appnum=0\n"}));
  EXPECT_EQ(lines_to(server.on_bytes(0, "erse_size\n"), 0),
            std::vector<std::string>{"cmd=universe_size rc=0 size=2\n"});
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
