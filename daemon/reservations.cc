#include "daemon/reservations.h"

#include <pwd.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "lib/core/units.h"

namespace hpcq::daemon {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxNameLength = 64;

bool good_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

Result<std::uint32_t> resolve_user(const std::string& user) {
  std::uint32_t uid = 0;
  const auto [end, ec] = std::from_chars(user.data(), user.data() + user.size(), uid);
  if (ec == std::errc{} && end == user.data() + user.size() && !user.empty()) return uid;
  passwd pw{};
  passwd* found = nullptr;
  char buf[4096];
  if (getpwnam_r(user.c_str(), &pw, buf, sizeof buf, &found) != 0 || found == nullptr) {
    return invalid_argument("--users: unknown user " + quote(user));
  }
  return static_cast<std::uint32_t>(pw.pw_uid);
}

}  // namespace

Result<Reservation> reservation_from_request(
    const v1::Reservation& request, const std::function<bool(const std::string&)>& known_node,
    TimeUs now) {
  Reservation r;
  r.name = request.name();
  if (!good_name(r.name)) {
    return invalid_argument("reservation name '" + r.name +
                            "' must be 1-64 characters of A-Z a-z 0-9 . _ -");
  }
  if (request.nodes().empty()) return invalid_argument("--nodes: a reservation needs nodes");
  for (const std::string& node : request.nodes()) {
    if (!known_node(node)) return invalid_argument("--nodes: unknown node " + quote(node));
    if (std::find(r.nodes.begin(), r.nodes.end(), node) != r.nodes.end()) {
      return invalid_argument("--nodes: node " + quote(node) + " is listed twice");
    }
    r.nodes.push_back(node);
  }
  r.start = request.start_us();
  r.end = request.end_us();
  if (r.end <= r.start)
    return invalid_argument("--duration: the reservation must end after it starts");
  if (r.end <= now) return invalid_argument("--start: the reservation would already be over");
  for (const std::string& user : request.users()) {
    auto uid = resolve_user(user);
    if (!uid.is_ok()) return uid.status();
    r.users.push_back(user);
    r.uids.push_back(*uid);
  }
  for (const std::string& account : request.accounts()) {
    if (account.empty()) return invalid_argument("--accounts: empty account name");
    r.accounts.push_back(account);
  }
  if (r.uids.empty() && r.accounts.empty()) {
    return invalid_argument("a reservation needs --users or --accounts (who may use it)");
  }
  return r;
}

v1::Reservation to_proto(const Reservation& r) {
  v1::Reservation p;
  p.set_name(r.name);
  for (const auto& n : r.nodes) p.add_nodes(n);
  p.set_start_us(r.start);
  p.set_end_us(r.end);
  for (const auto& u : r.users) p.add_users(u);
  for (const auto& a : r.accounts) p.add_accounts(a);
  return p;
}

std::string encode_reservation(const Reservation& r) {
  return json{{"name", r.name},   {"nodes", r.nodes}, {"start", r.start},      {"end", r.end},
              {"users", r.users}, {"uids", r.uids},   {"accounts", r.accounts}}
      .dump();
}

Result<Reservation> decode_reservation(std::string_view text) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return invalid_argument("reservation: not a JSON object");
  Reservation r;
  try {
    r.name = doc.at("name").get<std::string>();
    r.nodes = doc.at("nodes").get<std::vector<std::string>>();
    r.start = doc.at("start").get<TimeUs>();
    r.end = doc.at("end").get<TimeUs>();
    r.users = doc.at("users").get<std::vector<std::string>>();
    r.uids = doc.at("uids").get<std::vector<std::uint32_t>>();
    r.accounts = doc.at("accounts").get<std::vector<std::string>>();
  } catch (const json::exception& e) {
    return invalid_argument(std::string("reservation: ") + e.what());
  }
  return r;
}

bool overlaps(const Reservation& a, const Reservation& b) {
  if (a.end <= b.start || b.end <= a.start) return false;
  return std::any_of(a.nodes.begin(), a.nodes.end(), [&](const std::string& n) {
    return std::find(b.nodes.begin(), b.nodes.end(), n) != b.nodes.end();
  });
}

}  // namespace hpcq::daemon
