// The protocol hpcq's processes speak to each other: one number for the
// overlay (proto/overlay.proto, leader <-> agents: Hello.protocol_version,
// Welcome.protocol_version) and the local wire (proto/local.proto, hpcq ->
// hpcqd: Call.protocol_version). Raise kProtocolVersion when a change to
// either makes an older peer misread a newer one, and record the new wire
// (tests/data/wire/README.md).
//
// Who accepts whom, so that a cluster upgrades leader first, then the agents
// one at a time (docs/admin-guide.md, "Upgrading"):
// - the leader takes agents of its own protocol and the one before it;
// - an agent refuses a leader older than itself;
// - hpcqd takes any hpcq command of its protocol or the one before it, and
//   refuses a newer one.
// A message without the field comes from a build before it was added:
// protocol 1. The checks are pure; their reasons are the one line the
// refusing side logs or answers.
#pragma once

#include <cstdint>
#include <string>

namespace hpcq {

inline constexpr std::uint32_t kProtocolVersion = 2;
inline constexpr std::uint32_t kOldestAcceptedProtocol = kProtocolVersion - 1;

// The protocol a peer speaks, from its message's field as read (0, unset: 1).
std::uint32_t protocol_of(std::uint32_t field);

struct ProtocolCheck {
  enum class Verdict { kAccepted, kPeerTooOld, kPeerTooNew };
  Verdict verdict = Verdict::kAccepted;
  std::string reason;  // one line when refused; empty when accepted
  bool accepted() const { return verdict == Verdict::kAccepted; }
};

// The leader's verdict on an agent's Hello.protocol_version. An agent too
// new is refused (it should wait for its leader's upgrade); the leader still
// tells it its own version, so that the agent can stop with its own line.
ProtocolCheck check_agent_protocol(std::uint32_t hello_field);
// An agent's verdict on its leader's Welcome.protocol_version: a leader older
// than the agent is refused (upgrade the leader first).
ProtocolCheck check_leader_protocol(std::uint32_t welcome_field);
// hpcqd's verdict on an hpcq command's Call.protocol_version.
ProtocolCheck check_client_protocol(std::uint32_t call_field);

}  // namespace hpcq
