#include "lib/core/protocol_version.h"

#include <string>

namespace hpcq {

namespace {

std::string text(std::uint32_t protocol) { return "protocol " + std::to_string(protocol); }

// `peer` speaks `theirs`, this process (`self`) kProtocolVersion, and this
// process accepts [oldest, newest].
ProtocolCheck check(const char* peer, const char* self, std::uint32_t theirs, std::uint32_t oldest,
                    std::uint32_t newest, const char* upgrade_when_too_new) {
  ProtocolCheck verdict;
  if (theirs < oldest) {
    verdict.verdict = ProtocolCheck::Verdict::kPeerTooOld;
    verdict.reason = std::string(peer) + " speaks " + text(theirs) + ", older than the " +
                     text(oldest) + " this " + self + " still accepts: upgrade " + peer;
  } else if (theirs > newest) {
    verdict.verdict = ProtocolCheck::Verdict::kPeerTooNew;
    verdict.reason = std::string(peer) + " speaks " + text(theirs) + ", newer than this " + self +
                     "'s " + text(kProtocolVersion) + ": " + upgrade_when_too_new;
  }
  return verdict;
}

}  // namespace

std::uint32_t protocol_of(std::uint32_t field) { return field == 0 ? 1 : field; }

ProtocolCheck check_agent_protocol(std::uint32_t hello_field) {
  return check("hpcq-agent", "hpcqd", protocol_of(hello_field), kOldestAcceptedProtocol,
               kProtocolVersion, "upgrade hpcqd first, then the agents");
}

ProtocolCheck check_leader_protocol(std::uint32_t welcome_field) {
  const std::uint32_t leader = protocol_of(welcome_field);
  ProtocolCheck verdict;
  if (leader < kProtocolVersion) {
    verdict.verdict = ProtocolCheck::Verdict::kPeerTooOld;
    verdict.reason = "the leader (hpcqd) speaks " + text(leader) +
                     ", older than this hpcq-agent's " + text(kProtocolVersion) +
                     ": upgrade hpcqd first, then the agents; this agent stops";
  }
  return verdict;
}

ProtocolCheck check_client_protocol(std::uint32_t call_field) {
  return check("this hpcq command", "hpcqd", protocol_of(call_field), kOldestAcceptedProtocol,
               kProtocolVersion, "upgrade hpcqd, or use the hpcq command of its release");
}

}  // namespace hpcq
