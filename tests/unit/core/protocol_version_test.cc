// Who accepts whom across protocol versions (lib/core/protocol_version.h),
// and what --version prints (lib/core/build_info.h).
#include "lib/core/protocol_version.h"

#include <gtest/gtest.h>

#include <string>

#include "lib/core/build_info.h"
#include "lib/core/version.h"

namespace hpcq {
namespace {

using Verdict = ProtocolCheck::Verdict;

TEST(ProtocolVersionTest, AnUnsetFieldIsTheFirstProtocol) {
  EXPECT_EQ(protocol_of(0), 1u);
  EXPECT_EQ(protocol_of(1), 1u);
  EXPECT_EQ(protocol_of(7), 7u);
  EXPECT_EQ(kOldestAcceptedProtocol, kProtocolVersion - 1);
}

TEST(ProtocolVersionTest, TheLeaderTakesAgentsOfItsProtocolAndTheOneBefore) {
  EXPECT_TRUE(check_agent_protocol(kProtocolVersion).accepted());
  EXPECT_TRUE(check_agent_protocol(kProtocolVersion - 1).accepted());
  EXPECT_TRUE(check_agent_protocol(0).accepted());  // a build before the field: protocol 1
  EXPECT_TRUE(check_agent_protocol(kProtocolVersion).reason.empty());
}

TEST(ProtocolVersionTest, TheLeaderRefusesANewerAgentSayingToUpgradeItFirst) {
  const ProtocolCheck check = check_agent_protocol(kProtocolVersion + 1);
  EXPECT_EQ(check.verdict, Verdict::kPeerTooNew);
  EXPECT_EQ(check.reason, "hpcq-agent speaks protocol " + std::to_string(kProtocolVersion + 1) +
                              ", newer than this hpcqd's protocol " +
                              std::to_string(kProtocolVersion) +
                              ": upgrade hpcqd first, then the agents");
}

TEST(ProtocolVersionTest, AnAgentRefusesAnOlderLeaderInOneLine) {
  EXPECT_TRUE(check_leader_protocol(kProtocolVersion).accepted());
  EXPECT_TRUE(check_leader_protocol(kProtocolVersion + 1).accepted());
  for (std::uint32_t field : {0u, kProtocolVersion - 1}) {
    const ProtocolCheck check = check_leader_protocol(field);
    EXPECT_EQ(check.verdict, Verdict::kPeerTooOld);
    EXPECT_EQ(check.reason,
              "the leader (hpcqd) speaks protocol " + std::to_string(protocol_of(field)) +
                  ", older than this hpcq-agent's protocol " + std::to_string(kProtocolVersion) +
                  ": upgrade hpcqd first, then the agents; this agent stops");
    EXPECT_EQ(check.reason.find('\n'), std::string::npos);
  }
}

TEST(ProtocolVersionTest, HpcqdServesOlderCommandsAndRefusesNewerOnes) {
  EXPECT_TRUE(check_client_protocol(0).accepted());
  EXPECT_TRUE(check_client_protocol(kProtocolVersion - 1).accepted());
  EXPECT_TRUE(check_client_protocol(kProtocolVersion).accepted());
  const ProtocolCheck check = check_client_protocol(kProtocolVersion + 1);
  EXPECT_EQ(check.verdict, Verdict::kPeerTooNew);
  EXPECT_NE(check.reason.find("newer than this hpcqd"), std::string::npos) << check.reason;
  EXPECT_NE(check.reason.find("upgrade hpcqd"), std::string::npos) << check.reason;
}

TEST(BuildInfoTest, VersionLineNamesVersionCommitAndProtocol) {
  const std::string commit = build_commit();
  EXPECT_FALSE(commit.empty());
  EXPECT_EQ(version_line("hpcq-agent"), std::string("hpcq-agent ") + kVersion + " (commit " +
                                            commit + ", protocol " +
                                            std::to_string(kProtocolVersion) + ")");
  EXPECT_EQ(version_with_commit(), std::string(kVersion) + "+" + commit);
}

}  // namespace
}  // namespace hpcq
