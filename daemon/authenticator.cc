#include "daemon/authenticator.h"

#include <grp.h>
#include <openssl/evp.h>
#include <pwd.h>

#include <algorithm>

#include "lib/core/units.h"

namespace hpcq::daemon {
namespace {

constexpr std::string_view kBearer = "Bearer ";

struct PasswdEntry {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

std::optional<PasswdEntry> user_by_name(const std::string& name) {
  passwd pw{};
  passwd* found = nullptr;
  char buf[4096];
  if (getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  return PasswdEntry{pw.pw_name, pw.pw_uid, pw.pw_gid};
}

std::optional<PasswdEntry> user_by_uid(uid_t uid) {
  passwd pw{};
  passwd* found = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) != 0 || found == nullptr) return std::nullopt;
  return PasswdEntry{pw.pw_name, pw.pw_uid, pw.pw_gid};
}

// The user's groups: `gid` and those the group database lists the user in.
std::vector<gid_t> gids_of(const std::string& user, gid_t gid) {
  int count = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  if (getgrouplist(user.c_str(), gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<std::size_t>(count));
    if (getgrouplist(user.c_str(), gid, groups.data(), &count) < 0) return {gid};
  }
  groups.resize(static_cast<std::size_t>(count));
  return groups;
}

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace

std::string sha256_hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 0xf];
  }
  return out;
}

Authenticator::Authenticator(const ClusterConfig& config, const PeerCredentials& local, Clock clock)
    : local_(local), clock_(std::move(clock)) {
  admin_users_.insert(config.admin_users.begin(), config.admin_users.end());
  for (const std::string& name : config.admin_groups) {
    group gr{};
    group* found = nullptr;
    char buf[8192];
    if (getgrnam_r(name.c_str(), &gr, buf, sizeof buf, &found) == 0 && found != nullptr) {
      admin_gids_.insert(gr.gr_gid);
    }
  }
  const std::int64_t now = clock_();
  for (const PortalConfig& p : config.portals) {
    Portal portal;
    portal.config = p;
    portal.any_user = std::find(p.users.begin(), p.users.end(), "*") != p.users.end();
    portal.tokens = 2 * p.rate_per_s;
    portal.last_us = now;
    portals_.push_back(std::move(portal));
  }
}

bool Authenticator::is_admin(uid_t uid, gid_t gid) const {
  if (uid == 0) return true;
  if (admin_users_.empty() && admin_gids_.empty()) return false;
  auto user = user_by_uid(uid);
  if (!user) return false;
  if (admin_users_.count(user->name) || admin_users_.count(std::to_string(uid))) return true;
  if (admin_gids_.empty()) return false;
  const std::vector<gid_t> groups = gids_of(user->name, gid);
  return std::any_of(groups.begin(), groups.end(), [&](gid_t g) { return admin_gids_.count(g); });
}

std::vector<std::string> group_names_of(uid_t uid, gid_t gid) {
  auto user = user_by_uid(uid);
  std::vector<std::string> names;
  for (gid_t g : user ? gids_of(user->name, gid) : std::vector<gid_t>{gid}) {
    group gr{};
    group* found = nullptr;
    char buf[8192];
    if (getgrgid_r(g, &gr, buf, sizeof buf, &found) == 0 && found != nullptr) {
      names.emplace_back(gr.gr_name);
    }
  }
  return names;
}

Result<Caller> Authenticator::authenticate(const std::string& peer,
                                           std::optional<std::string_view> authorization,
                                           std::optional<std::string_view> act_as) {
  if (peer.starts_with("fd:")) {
    std::optional<Caller> caller = local_.lookup(peer);
    if (!caller) return Status(Code::kUnauthenticated, "the caller's identity is unknown");
    caller->admin = is_admin(caller->uid, caller->gid);
    return *caller;
  }
  return remote(authorization, act_as);
}

Result<Caller> Authenticator::remote(std::optional<std::string_view> authorization,
                                     std::optional<std::string_view> act_as) {
  if (!authorization || !authorization->starts_with(kBearer)) {
    return Status(Code::kUnauthenticated, "missing 'authorization: Bearer TOKEN'");
  }
  const std::string hash = sha256_hex(authorization->substr(kBearer.size()));
  std::lock_guard lock(mutex_);
  Portal* portal = nullptr;
  for (Portal& p : portals_) {
    if (equal_in_constant_time(hash, p.config.token_sha256)) portal = &p;
  }
  if (portal == nullptr) return Status(Code::kUnauthenticated, "unknown token");
  const std::int64_t now = clock_();
  const double rate = portal->config.rate_per_s;
  portal->tokens =
      std::min(2 * rate, portal->tokens + rate * static_cast<double>(now - portal->last_us) / 1e6);
  portal->last_us = now;
  if (portal->tokens < 1) {
    return Status(Code::kResourceExhausted,
                  "portal '" + portal->config.name + "' is over its rate of " +
                      std::to_string(static_cast<int>(rate)) + " requests/s");
  }
  portal->tokens -= 1;
  if (!act_as || act_as->empty()) {
    return permission_denied("portal calls must name the user in 'x-hpcq-user'");
  }
  const std::string name(*act_as);
  auto user = user_by_name(name);
  if (!user) return permission_denied("unknown user " + quote(name));
  if (user->uid == 0) return permission_denied("a portal may not act as root");
  const auto& users = portal->config.users;
  if (!portal->any_user && std::find(users.begin(), users.end(), name) == users.end()) {
    return permission_denied("portal '" + portal->config.name + "' may not act for user '" + name +
                             "'");
  }
  Caller caller;
  caller.uid = user->uid;
  caller.gid = user->gid;
  caller.portal = portal->config.name;
  caller.admin = is_admin(caller.uid, caller.gid);
  return caller;
}

}  // namespace hpcq::daemon
