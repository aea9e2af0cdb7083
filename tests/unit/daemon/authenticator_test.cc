// Who a call comes from: local peers by their credentials, portals by token,
// the users a token may act for, the rate limit, admin users.
#include "daemon/authenticator.h"

#include <gtest/gtest.h>

namespace hpcq::daemon {
namespace {

ClusterConfig config_with_portal(const std::string& token, std::vector<std::string> users) {
  ClusterConfig c;
  PortalConfig p;
  p.name = "gw";
  p.token_sha256 = sha256_hex(token);
  p.users = std::move(users);
  p.rate_per_s = 2;
  c.portals.push_back(p);
  c.admin_users = {"daemon"};  // uid 1 on Debian
  return c;
}

TEST(Authenticator, Sha256MatchesTheStandardVector) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Authenticator, LocalCallersComeFromTheirConnection) {
  PeerCredentials local;
  Caller c;
  c.uid = 1;
  c.gid = 1;
  local.record(7, c);
  Authenticator auth(config_with_portal("tok", {"daemon"}), local, [] { return 0; });
  auto caller = auth.authenticate("fd:7", std::nullopt, std::nullopt);
  ASSERT_TRUE(caller.is_ok()) << caller.status().message();
  EXPECT_EQ(caller->uid, 1u);
  EXPECT_TRUE(caller->is_admin());  // "daemon" is an admin user
  EXPECT_EQ(auth.authenticate("fd:8", std::nullopt, std::nullopt).status().code(),
            Code::kUnauthenticated);
}

TEST(Authenticator, PortalTokenUsersAndRate) {
  PeerCredentials local;
  std::int64_t now_us = 0;
  Authenticator auth(config_with_portal("tok", {"daemon"}), local, [&] { return now_us; });
  const std::string peer = "ipv4:127.0.0.1:5555";
  EXPECT_EQ(auth.authenticate(peer, std::nullopt, "daemon").status().code(),
            Code::kUnauthenticated);
  EXPECT_EQ(auth.authenticate(peer, "Bearer nope", "daemon").status().message(), "unknown token");
  now_us += 10'000'000;  // refill
  auto caller = auth.authenticate(peer, "Bearer tok", "daemon");
  ASSERT_TRUE(caller.is_ok()) << caller.status().message();
  EXPECT_EQ(caller->uid, 1u);
  EXPECT_EQ(caller->portal, "gw");
  EXPECT_EQ(auth.authenticate(peer, "Bearer tok", "bin").status().message(),
            "portal 'gw' may not act for user 'bin'");
  EXPECT_EQ(auth.authenticate(peer, "Bearer tok", "root").status().code(), Code::kPermissionDenied);
  // The bucket holds 2 x 2 calls; the fifth in the same instant is refused.
  now_us += 10'000'000;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(auth.authenticate(peer, "Bearer tok", "daemon").is_ok());
  EXPECT_EQ(auth.authenticate(peer, "Bearer tok", "daemon").status().code(),
            Code::kResourceExhausted);
  now_us += 500'000;  // half a second: one more call
  EXPECT_TRUE(auth.authenticate(peer, "Bearer tok", "daemon").is_ok());
  EXPECT_EQ(auth.authenticate(peer, "Bearer tok", "daemon").status().code(),
            Code::kResourceExhausted);
}

TEST(Authenticator, AnyUserButRoot) {
  PeerCredentials local;
  Authenticator auth(config_with_portal("tok", {"*"}), local, [] { return 0; });
  EXPECT_TRUE(auth.authenticate("ipv6:[::1]:1", "Bearer tok", "bin").is_ok());
  EXPECT_EQ(auth.authenticate("ipv6:[::1]:1", "Bearer tok", "root").status().message(),
            "a portal may not act as root");
}

}  // namespace
}  // namespace hpcq::daemon
