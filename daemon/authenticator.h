// Who is calling the API, for every call on either listener.
//
// Local calls (peer "fd:N", the unix socket) are identified by SO_PEERCRED
// (PeerCredentials). Remote calls (TCP + TLS, portals) must carry
// "authorization: Bearer TOKEN" and "x-hpcq-user: NAME": the token's SHA-256
// must be one configured in [[portal]] and NAME one of the users that portal
// may act for (never root, even with "*"). Each portal has a token bucket of
// rate_per_s requests per second, bursting to twice that.
//
// A caller is an admin when root, in [api] admin_users, or a member of an
// admin_groups group (a portal's user included: it acts with that user's
// rights). Tokens are compared as hashes in constant time and never logged.
//
// Thread-safe (gRPC threads). Errors: kUnauthenticated (no or wrong token,
// unknown local connection), kPermissionDenied (user outside the token's
// set, root, unknown user), kResourceExhausted (rate limit).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/peer_credentials.h"
#include "lib/core/config.h"
#include "lib/core/status.h"

namespace hpcq::daemon {

// The hex SHA-256 of `text` (what [[portal]] token_sha256 holds).
std::string sha256_hex(std::string_view text);

// The names of the groups of user `uid` whose primary group is `gid` (the
// group database's view on this host, as Slurm's AllowGroups takes it).
std::vector<std::string> group_names_of(uid_t uid, gid_t gid);

class Authenticator {
 public:
  // Monotonic microseconds (injected so tests can step the rate limiter).
  using Clock = std::function<std::int64_t()>;

  Authenticator(const ClusterConfig& config, const PeerCredentials& local, Clock clock);

  Result<Caller> authenticate(const std::string& peer,
                              std::optional<std::string_view> authorization,
                              std::optional<std::string_view> act_as);

 private:
  struct Portal {
    PortalConfig config;
    bool any_user = false;
    double tokens = 0;
    std::int64_t last_us = 0;
  };
  bool is_admin(uid_t uid, gid_t gid) const;
  Result<Caller> remote(std::optional<std::string_view> authorization,
                        std::optional<std::string_view> act_as);

  const PeerCredentials& local_;
  Clock clock_;
  std::set<std::string> admin_users_;
  std::set<gid_t> admin_gids_;
  std::mutex mutex_;
  std::vector<Portal> portals_;  // guarded by mutex_ (buckets)
};

}  // namespace hpcq::daemon
