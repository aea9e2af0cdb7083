// The only translation unit that includes toml11 (slow to compile).
#include "lib/core/config.h"

#include <csignal>
#include <optional>

#include <pwd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <toml.hpp>
#include <type_traits>

#include "lib/core/hostlist.h"
#include "lib/core/units.h"

namespace hpcq {
namespace {

using Table = toml::basic_value<toml::discard_comments>;

std::string where(const Table& v) {
  const auto loc = v.location();
  return loc.file_name() + ":" + std::to_string(loc.line());
}

// Throws nothing: every failure becomes a Status naming file:line and key.
Status check_keys(const Table& table, const std::string& section,
                  const std::set<std::string>& known) {
  for (const auto& [key, value] : table.as_table()) {
    if (!known.count(key)) {
      return invalid_argument(where(value) + ": unknown key " +
                              quote(section.empty() ? key : section + "." + key));
    }
  }
  return Status::ok();
}

template <typename T>
Status get(const Table& table, const std::string& section, const std::string& key, T& out) {
  if (!table.contains(key)) return Status::ok();
  const Table& v = table.at(key);
  try {
    out = toml::get<T>(v);
  } catch (const std::exception&) {
    return invalid_argument(where(v) + ": bad value for '" + section + "." + key + "'");
  }
  return Status::ok();
}

// TOML keeps 3 and 3.0 apart; a share or weight may be written either way.
template <>
Status get<double>(const Table& table, const std::string& section, const std::string& key,
                   double& out) {
  if (!table.contains(key)) return Status::ok();
  const Table& v = table.at(key);
  if (v.is_integer()) {
    out = static_cast<double>(v.as_integer());
  } else if (v.is_floating()) {
    out = v.as_floating();
  } else {
    return invalid_argument(where(v) + ": bad value for '" + section + "." + key + "'");
  }
  return Status::ok();
}

// The signals an application may be told of a resize with: those the job
// shell forwards to every task (shell/main.cc) but
// SIGTERM, which means "end".
std::optional<int> parse_resize_signal(std::string name) {
  if (name == "none") return 0;
  if (name.starts_with("SIG")) name = name.substr(3);
  static const std::pair<const char*, int> kSignals[] = {
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP}, {"INT", SIGINT}};
  for (const auto& [n, signo] : kSignals) {
    if (name == n) return signo;
  }
  return std::nullopt;
}

// A number key within what its use can take: a value that passes here never
// breaks a job later (a pids.max or a timer past its type, say). `lo` and
// `hi` say so in the message.
template <typename T>
Status get_in_range(const Table& table, const std::string& section, const std::string& key, T& out,
                    T lo, T hi) {
  if (!table.contains(key)) return Status::ok();
  const Table& v = table.at(key);
  auto out_of_range = [&](const std::string& got) {
    std::ostringstream range;
    range << lo << " to " << hi;
    return invalid_argument(where(v) + ": '" + section + "." + key + "' must be from " +
                            range.str() + ", got " + got);
  };
  if constexpr (std::is_integral_v<T>) {
    if (!v.is_integer()) {
      return invalid_argument(where(v) + ": '" + section + "." + key + "' must be an integer");
    }
    const std::int64_t value = v.as_integer();
    if (value < static_cast<std::int64_t>(lo) || value > static_cast<std::int64_t>(hi)) {
      return out_of_range(std::to_string(value));
    }
    out = static_cast<T>(value);
  } else {
    double value = 0;
    HPCQ_RETURN_IF_ERROR(get(table, section, key, value));
    if (!(value >= lo && value <= hi)) {
      std::ostringstream got;
      got << value;
      return out_of_range(got.str());
    }
    out = static_cast<T>(value);
  }
  return Status::ok();
}

// Ranges the keys share. A day of milliseconds bounds the overlay's timers,
// a century of seconds a time limit (microseconds of it fit an int64), a
// billion any count of jobs, cores or nodes.
constexpr int kDayMs = 86'400'000;
constexpr std::int64_t kCenturyS = 100LL * 366 * 86'400;
constexpr std::int64_t kMaxCount = 1'000'000'000;

// A scalar option value as the text the scheduler's option parsers take.
Result<std::string> option_text(const Table& v, const std::string& key) {
  if (v.is_string()) return std::string(v.as_string().str);
  if (v.is_integer()) return std::to_string(v.as_integer());
  if (v.is_boolean()) return std::string(v.as_boolean() ? "true" : "false");
  if (v.is_floating()) {
    std::ostringstream out;
    out << v.as_floating();
    return out.str();
  }
  return invalid_argument(where(v) + ": 'scheduler.options." + key +
                          "' must be a string, number or boolean");
}

Status read_options(const Table& t, ClusterConfig& c) {
  if (!t.is_table()) return invalid_argument(where(t) + ": [scheduler.options] must be a table");
  for (const auto& [key, value] : t.as_table()) {
    if (value.is_table()) {  // [scheduler.options.backfill] reservation_depth = 1
      for (const auto& [option, v] : value.as_table()) {
        auto text = option_text(v, key + "." + option);
        if (!text.is_ok()) return text.status();
        c.scheduler_options[key + "." + option] = *text;
      }
      continue;
    }
    if (key.find('.') == std::string::npos) {
      return invalid_argument(where(value) + ": 'scheduler.options." + key +
                              "' is not \"<action or plugin>.<option>\"");
    }
    auto text = option_text(value, key);
    if (!text.is_ok()) return text.status();
    c.scheduler_options[key] = *text;
  }
  return Status::ok();
}

// The tables of an array of tables ([[queue]]), or none.
Result<std::vector<const Table*>> tables_of(const Table& root, const std::string& key) {
  std::vector<const Table*> out;
  if (!root.contains(key)) return out;
  const Table& list = root.at(key);
  if (!list.is_array()) {
    return invalid_argument(where(list) + ": " + quote(key) + " must be an array of tables ([[" +
                            key + "]])");
  }
  for (const Table& t : list.as_array()) {
    if (!t.is_table()) return invalid_argument(where(t) + ": each [[" + key + "]] must be a table");
    out.push_back(&t);
  }
  return out;
}

Status read_queue(const Table& t, QueueConfig& q, bool& is_default) {
  HPCQ_RETURN_IF_ERROR(
      check_keys(t, "queue",
                 {"name", "default", "weight", "priority", "priority_tier", "preempt_mode",
                  "migratable", "default_time_limit_s", "max_time_limit_s", "max_running_jobs",
                  "max_cores", "max_nodes", "max_running_jobs_per_user", "max_cores_per_user",
                  "max_nodes_per_user", "nodes", "allow_groups", "allow_accounts"}));
  HPCQ_RETURN_IF_ERROR(get(t, "queue", "name", q.name));
  if (q.name.empty()) return invalid_argument(where(t) + ": [[queue]] needs a name");
  const std::string section = "queue " + q.name;
  HPCQ_RETURN_IF_ERROR(get(t, section, "default", is_default));
  HPCQ_RETURN_IF_ERROR(get(t, section, "weight", q.weight));
  if (t.contains("weight") && !(q.weight > 0 && q.weight <= 1e9)) {
    return invalid_argument(where(t.at("weight")) + ": '" + section +
                            ".weight' must be positive, at most 1e9");
  }
  HPCQ_RETURN_IF_ERROR(get_in_range(t, section, "priority", q.priority, -1'000'000, 1'000'000));
  HPCQ_RETURN_IF_ERROR(
      get_in_range(t, section, "priority_tier", q.priority_tier, -1'000'000, 1'000'000));
  std::string mode = "off";
  HPCQ_RETURN_IF_ERROR(get(t, section, "preempt_mode", mode));
  if (mode == "off") {
    q.preempt_mode = PreemptMode::kOff;
  } else if (mode == "requeue") {
    q.preempt_mode = PreemptMode::kRequeue;
  } else if (mode == "cancel") {
    q.preempt_mode = PreemptMode::kCancel;
  } else if (mode == "checkpoint") {
    q.preempt_mode = PreemptMode::kCheckpoint;
  } else {
    return invalid_argument(where(t.at("preempt_mode")) + ": '" + section +
                            ".preempt_mode' must be off, requeue, cancel or checkpoint");
  }
  HPCQ_RETURN_IF_ERROR(get(t, section, "migratable", q.migratable));
  std::string nodes;
  HPCQ_RETURN_IF_ERROR(get(t, section, "nodes", nodes));
  if (t.contains("nodes")) {
    auto names = expand_hostlist(nodes);
    if (!names.is_ok()) {
      return invalid_argument(where(t.at("nodes")) + ": '" + section +
                              ".nodes': " + names.status().message());
    }
    q.nodes = std::move(names).value();
  }
  HPCQ_RETURN_IF_ERROR(get(t, section, "allow_groups", q.allow_groups));
  HPCQ_RETURN_IF_ERROR(get(t, section, "allow_accounts", q.allow_accounts));
  HPCQ_RETURN_IF_ERROR(get_in_range<std::int64_t>(t, section, "default_time_limit_s",
                                                  q.default_time_limit_s, 0, kCenturyS));
  auto& l = q.limits;
  HPCQ_RETURN_IF_ERROR(
      get_in_range<std::int64_t>(t, section, "max_time_limit_s", l.max_time_limit_s, 0, kCenturyS));
  // 0: no limit.
  for (const auto& [key, limit] :
       {std::pair{"max_running_jobs", &l.max_running_jobs}, std::pair{"max_cores", &l.max_cores},
        std::pair{"max_nodes", &l.max_nodes},
        std::pair{"max_running_jobs_per_user", &l.max_running_jobs_per_user},
        std::pair{"max_cores_per_user", &l.max_cores_per_user},
        std::pair{"max_nodes_per_user", &l.max_nodes_per_user}}) {
    HPCQ_RETURN_IF_ERROR(get_in_range<std::int64_t>(t, section, key, *limit, 0, kMaxCount));
  }
  if (l.max_time_limit_s > 0 && q.default_time_limit_s > l.max_time_limit_s) {
    return invalid_argument(where(t) + ": " + section +
                            ": default_time_limit_s is above max_time_limit_s");
  }
  return Status::ok();
}

Result<std::uint32_t> uid_of(const Table& t, const std::string& name) {
  passwd pw{};
  passwd* found = nullptr;
  char buf[4096];
  if (getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &found) != 0 || found == nullptr) {
    return invalid_argument(where(t) + ": [[user]] names unknown user " + quote(name));
  }
  return static_cast<std::uint32_t>(pw.pw_uid);
}

// A table of name = count: [licenses], and [[rank]]/[[nodes]] gres (`key`
// and `noun` name it in messages: "licenses" and "license", "gres" twice).
Status read_counts(const Table& t, const std::string& key, const std::string& noun,
                   std::map<std::string, int>& out) {
  if (!t.is_table()) return invalid_argument(where(t) + ": '" + key + "' must be a table");
  for (const auto& [name, value] : t.as_table()) {
    if (!is_plain_name(name)) {
      return invalid_argument(where(value) + ": bad " + noun + " name " + quote(name) +
                              " (letters, digits, '_', '-', '.')");
    }
    // GPUs are bound by id (--gpus-per-node/--gpus-per-task), not counted.
    if (key == "gres" && name == "gpu") {
      return invalid_argument(where(value) + ": 'gres.gpu': GPUs are not gres here; the agent " +
                              "finds them and jobs ask with --gpus-per-node or --gpus-per-task");
    }
    int count = 0;
    HPCQ_RETURN_IF_ERROR(get(t, key, name, count));
    if (count < 1) {
      return invalid_argument(where(value) + ": '" + key + "." + name +
                              "' must be a positive integer");
    }
    out[name] = count;
  }
  return Status::ok();
}

// [agent] gpu_devices: one entry per GPU, a path or a list of paths, each
// absolute.
Status read_gpu_devices(const Table& t, std::vector<std::vector<std::string>>& out) {
  if (!t.contains("gpu_devices")) return Status::ok();
  const Table& list = t.at("gpu_devices");
  auto bad = [&list](const std::string& why) {
    return invalid_argument(where(list) + ": 'agent.gpu_devices' " + why);
  };
  if (!list.is_array()) return bad("must be an array (one entry per GPU)");
  for (const Table& gpu : list.as_array()) {
    std::vector<std::string> paths;
    if (gpu.is_string()) {
      paths.push_back(std::string(gpu.as_string().str));
    } else if (gpu.is_array()) {
      for (const Table& p : gpu.as_array()) {
        if (!p.is_string()) return bad("entries must be paths or lists of paths");
        paths.push_back(std::string(p.as_string().str));
      }
    } else {
      return bad("entries must be paths or lists of paths");
    }
    if (paths.empty()) return bad("names a GPU with no device file");
    for (const std::string& p : paths) {
      if (p.empty() || p[0] != '/') return bad("must name absolute paths, got " + quote(p));
    }
    out.push_back(std::move(paths));
  }
  return Status::ok();
}

// [licenses]: name = count (hpcq.toml and hpcq simulate --cluster files).
Status read_licenses(const Table& root, SitePolicy& site) {
  if (!root.contains("licenses")) return Status::ok();
  return read_counts(root.at("licenses"), "licenses", "license", site.licenses);
}

// The names of a [[rank]]'s or a [[nodes]]'s features.
Status check_features(const Table& t, const std::vector<std::string>& features) {
  for (const std::string& f : features) {
    if (!is_plain_name(f)) {
      return invalid_argument(where(t.at("features")) + ": bad feature name " + quote(f) +
                              " (letters, digits, '_', '-', '.')");
    }
  }
  return Status::ok();
}

Status read_site(const Table& root, SitePolicy& site) {
  HPCQ_RETURN_IF_ERROR(read_licenses(root, site));
  auto queues = tables_of(root, "queue");
  if (!queues.is_ok()) return queues.status();
  std::set<std::string> names;
  for (const Table* t : *queues) {
    QueueConfig q;
    bool is_default = false;
    HPCQ_RETURN_IF_ERROR(read_queue(*t, q, is_default));
    if (!names.insert(q.name).second) {
      return invalid_argument(where(*t) + ": duplicate queue " + quote(q.name));
    }
    if (is_default) {
      if (!site.default_queue.empty()) {
        return invalid_argument(where(*t) + ": queues " + quote(site.default_queue) + " and " +
                                quote(q.name) + " are both the default");
      }
      site.default_queue = q.name;
    }
    site.queues.push_back(std::move(q));
  }

  auto qos = tables_of(root, "qos");
  if (!qos.is_ok()) return qos.status();
  std::set<std::string> qos_names;
  for (const Table* t : *qos) {
    HPCQ_RETURN_IF_ERROR(check_keys(*t, "qos", {"name", "priority", "preempt"}));
    QosConfig q;
    HPCQ_RETURN_IF_ERROR(get(*t, "qos", "name", q.name));
    if (q.name.empty()) return invalid_argument(where(*t) + ": [[qos]] needs a name");
    HPCQ_RETURN_IF_ERROR(get(*t, "qos " + q.name, "priority", q.priority));
    HPCQ_RETURN_IF_ERROR(get(*t, "qos " + q.name, "preempt", q.preempt));
    if (!qos_names.insert(q.name).second) {
      return invalid_argument(where(*t) + ": duplicate qos " + quote(q.name));
    }
    site.qos.push_back(std::move(q));
  }
  for (std::size_t i = 0; i < site.qos.size(); ++i) {
    for (const std::string& p : site.qos[i].preempt) {
      if (!qos_names.count(p)) {
        return invalid_argument(where(*(*qos)[i]) + ": qos " + quote(site.qos[i].name) +
                                " preempts unknown qos " + quote(p));
      }
    }
  }

  auto accounts = tables_of(root, "account");
  if (!accounts.is_ok()) return accounts.status();
  std::set<std::string> account_names = {"root"};
  for (const Table* t : *accounts) {
    HPCQ_RETURN_IF_ERROR(check_keys(*t, "account", {"name", "parent", "shares"}));
    AccountConfig a;
    HPCQ_RETURN_IF_ERROR(get(*t, "account", "name", a.name));
    if (a.name.empty() || a.name == "root") {
      return invalid_argument(where(*t) + ": [[account]] needs a name other than 'root'");
    }
    HPCQ_RETURN_IF_ERROR(get(*t, "account " + a.name, "parent", a.parent));
    HPCQ_RETURN_IF_ERROR(get(*t, "account " + a.name, "shares", a.shares));
    if (!(a.shares > 0)) {
      return invalid_argument(where(*t) + ": account " + quote(a.name) +
                              ": shares must be positive");
    }
    // Parents come first, so the tree has no cycles.
    const std::string parent = a.parent.empty() ? "root" : a.parent;
    if (!account_names.count(parent)) {
      return invalid_argument(where(*t) + ": account " + quote(a.name) + " has unknown parent " +
                              quote(parent) + " (list parents before their children)");
    }
    if (!account_names.insert(a.name).second) {
      return invalid_argument(where(*t) + ": duplicate account " + quote(a.name));
    }
    site.accounts.push_back(std::move(a));
  }

  auto users = tables_of(root, "user");
  if (!users.is_ok()) return users.status();
  for (const Table* t : *users) {
    HPCQ_RETURN_IF_ERROR(check_keys(*t, "user", {"name", "uid", "account", "shares"}));
    UserShare u;
    std::string user_name;
    std::int64_t uid = -1;
    HPCQ_RETURN_IF_ERROR(get(*t, "user", "name", user_name));
    HPCQ_RETURN_IF_ERROR(get(*t, "user", "uid", uid));
    if (user_name.empty() == (uid < 0)) {
      return invalid_argument(where(*t) + ": [[user]] needs exactly one of name and uid");
    }
    if (uid > static_cast<std::int64_t>(UINT32_MAX)) {
      return invalid_argument(where(*t) + ": [[user]] uid out of range");
    }
    if (!user_name.empty()) {
      auto found = uid_of(*t, user_name);
      if (!found.is_ok()) return found.status();
      u.uid = *found;
    } else {
      u.uid = static_cast<std::uint32_t>(uid);
    }
    HPCQ_RETURN_IF_ERROR(get(*t, "user", "account", u.account));
    HPCQ_RETURN_IF_ERROR(get(*t, "user", "shares", u.shares));
    if (u.account.empty() || !account_names.count(u.account)) {
      return invalid_argument(where(*t) + ": [[user]] needs a configured account (got " +
                              quote(u.account) + ")");
    }
    if (!(u.shares > 0)) return invalid_argument(where(*t) + ": [[user]] shares must be positive");
    site.users.push_back(u);
  }
  return Status::ok();
}

Status read_api(const Table& root, ClusterConfig& c) {
  if (root.contains("api")) {
    const Table& t = root.at("api");
    if (!t.is_table()) return invalid_argument(where(t) + ": [api] must be a table");
    HPCQ_RETURN_IF_ERROR(check_keys(t, "api",
                                    {"listen", "tls_cert", "tls_key", "tls_client_ca",
                                     "max_message_bytes", "admin_users", "admin_groups"}));
    HPCQ_RETURN_IF_ERROR(get(t, "api", "admin_users", c.admin_users));
    HPCQ_RETURN_IF_ERROR(get(t, "api", "admin_groups", c.admin_groups));
    HPCQ_RETURN_IF_ERROR(get(t, "api", "listen", c.api_listen));
    HPCQ_RETURN_IF_ERROR(get(t, "api", "tls_cert", c.api_tls_cert));
    HPCQ_RETURN_IF_ERROR(get(t, "api", "tls_key", c.api_tls_key));
    HPCQ_RETURN_IF_ERROR(get(t, "api", "tls_client_ca", c.api_tls_client_ca));
    HPCQ_RETURN_IF_ERROR(
        get_in_range(t, "api", "max_message_bytes", c.api_max_message_bytes, 4096, INT32_MAX));
    if (!c.api_listen.empty() && (c.api_tls_cert.empty() || c.api_tls_key.empty())) {
      return invalid_argument(where(t) +
                              ": [api] listen needs tls_cert and tls_key (no plain TCP)");
    }
  }
  auto portals = tables_of(root, "portal");
  if (!portals.is_ok()) return portals.status();
  std::set<std::string> names, hashes;
  for (const Table* t : *portals) {
    HPCQ_RETURN_IF_ERROR(check_keys(*t, "portal", {"name", "token_sha256", "users", "rate_per_s"}));
    PortalConfig p;
    HPCQ_RETURN_IF_ERROR(get(*t, "portal", "name", p.name));
    if (p.name.empty()) return invalid_argument(where(*t) + ": [[portal]] needs a name");
    const std::string section = "portal " + p.name;
    HPCQ_RETURN_IF_ERROR(get(*t, section, "token_sha256", p.token_sha256));
    HPCQ_RETURN_IF_ERROR(get(*t, section, "users", p.users));
    HPCQ_RETURN_IF_ERROR(get(*t, section, "rate_per_s", p.rate_per_s));
    const bool hex = p.token_sha256.size() == 64 &&
                     p.token_sha256.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!hex) {
      return invalid_argument(
          where(*t) + ": '" + section +
          ".token_sha256' must be 64 lowercase hex digits (printf %s TOKEN | sha256sum)");
    }
    if (p.users.empty()) {
      return invalid_argument(where(*t) + ": '" + section + ".users' names nobody");
    }
    if (!(p.rate_per_s > 0)) {
      return invalid_argument(where(*t) + ": '" + section + ".rate_per_s' must be positive");
    }
    if (!names.insert(p.name).second) {
      return invalid_argument(where(*t) + ": duplicate portal " + quote(p.name));
    }
    if (!hashes.insert(p.token_sha256).second) {
      return invalid_argument(where(*t) + ": portal " + quote(p.name) + " reuses another's token");
    }
    c.portals.push_back(std::move(p));
  }
  return Status::ok();
}

Result<ClusterConfig> from_toml(const Table& root, const std::string& name) {
  ClusterConfig c;
  c.source = name;
  if (!root.is_table()) return invalid_argument(name + ": not a TOML table");
  HPCQ_RETURN_IF_ERROR(
      check_keys(root, "",
                 {"overlay", "leader", "scheduler", "sched", "agent", "rank", "queue", "qos",
                  "account", "user", "api", "portal", "metrics", "licenses"}));

  if (root.contains("overlay")) {
    const Table& t = root.at("overlay");
    if (!t.is_table()) return invalid_argument(where(t) + ": [overlay] must be a table");
    HPCQ_RETURN_IF_ERROR(check_keys(
        t, "overlay",
        {"fanout", "heartbeat_interval_ms", "node_unresponsive_after_ms", "node_down_after_ms"}));
    HPCQ_RETURN_IF_ERROR(get_in_range(t, "overlay", "fanout", c.fanout, 1, 1 << 16));
    HPCQ_RETURN_IF_ERROR(
        get_in_range(t, "overlay", "heartbeat_interval_ms", c.heartbeat_interval_ms, 10, kDayMs));
    HPCQ_RETURN_IF_ERROR(get_in_range(t, "overlay", "node_unresponsive_after_ms",
                                      c.node_unresponsive_after_ms, 10, kDayMs));
    HPCQ_RETURN_IF_ERROR(
        get_in_range(t, "overlay", "node_down_after_ms", c.node_down_after_ms, 10, kDayMs));
    if (c.node_unresponsive_after_ms <= c.heartbeat_interval_ms ||
        c.node_down_after_ms <= c.node_unresponsive_after_ms) {
      return invalid_argument(where(t) +
                              ": overlay needs heartbeat_interval_ms < node_unresponsive_after_ms"
                              " < node_down_after_ms");
    }
    if (c.fence_after_ms() <= c.heartbeat_interval_ms) {
      // Else no heartbeat's answer could renew an agent's lease in time.
      return invalid_argument(where(t) +
                              ": overlay needs node_down_after_ms > 2 x heartbeat_interval_ms (a "
                              "node's jobs are killed node_down_after_ms - heartbeat_interval_ms "
                              "after the leader last answered it)");
    }
  }
  if (root.contains("leader")) {
    const Table& t = root.at("leader");
    if (!t.is_table()) return invalid_argument(where(t) + ": [leader] must be a table");
    HPCQ_RETURN_IF_ERROR(check_keys(
        t, "leader",
        {"state_dir", "socket", "secret_key", "default_time_limit_s", "max_time_limit_s",
         "checkpoint_dir", "resize_timeout_ms", "mpi", "store", "etcd_endpoints", "etcd_prefix",
         "lease_s", "etcd_ca", "etcd_cert", "etcd_key", "store_key", "etcd_insecure"}));
    HPCQ_RETURN_IF_ERROR(get_in_range(t, "leader", "lease_s", c.lease_s, 1, 3600));
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "store", c.store));
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "etcd_endpoints", c.etcd_endpoints));
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "etcd_prefix", c.etcd_prefix));
    if (c.store != "sqlite" && c.store != "etcd") {
      return invalid_argument(where(t.at("store")) + ": 'leader.store' is " + quote(c.store) +
                              " (want sqlite or etcd)");
    }
    if (c.store == "etcd" && c.etcd_endpoints.empty()) {
      return invalid_argument(where(t) + ": leader.store = \"etcd\" needs leader.etcd_endpoints");
    }
    if (c.etcd_prefix.empty()) {
      return invalid_argument(where(t.at("etcd_prefix")) + ": 'leader.etcd_prefix' is empty");
    }
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "etcd_ca", c.etcd_ca));
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "etcd_cert", c.etcd_cert));
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "etcd_key", c.etcd_key));
    if (c.etcd_cert.empty() != c.etcd_key.empty() || (!c.etcd_cert.empty() && c.etcd_ca.empty())) {
      return invalid_argument(where(t) +
                              ": leader.etcd_cert and leader.etcd_key go together, with etcd_ca");
    }
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "store_key", c.store_key));
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "etcd_insecure", c.etcd_insecure));
    if (c.store == "etcd" && !c.etcd_insecure && (c.etcd_cert.empty() || c.store_key.empty())) {
      return invalid_argument(
          where(t) +
          ": leader.store = \"etcd\" needs etcd_ca, etcd_cert and etcd_key (etcd with client "
          "certificates) and a store_key; leader.etcd_insecure = true runs without them");
    }
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "mpi", c.mpi));
    if (!known_mpi(c.mpi)) {
      return invalid_argument(where(t.at("mpi")) + ": 'leader.mpi' is " + quote(c.mpi) +
                              " (want pmi1, pmix, " + kMpiBoth + " or none)");
    }
    HPCQ_RETURN_IF_ERROR(
        get_in_range(t, "leader", "resize_timeout_ms", c.resize_timeout_ms, 1, kDayMs));
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "state_dir", c.state_dir));
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "checkpoint_dir", c.checkpoint_dir));
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "socket", c.socket));
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "secret_key", c.secret_key));
    HPCQ_RETURN_IF_ERROR(get_in_range<std::int64_t>(t, "leader", "default_time_limit_s",
                                                    c.default_time_limit_s, 1, kCenturyS));
    HPCQ_RETURN_IF_ERROR(get_in_range<std::int64_t>(t, "leader", "max_time_limit_s",
                                                    c.max_time_limit_s, 0, kCenturyS));
  }
  if (root.contains("scheduler")) {
    const Table& t = root.at("scheduler");
    if (!t.is_table()) return invalid_argument(where(t) + ": [scheduler] must be a table");
    HPCQ_RETURN_IF_ERROR(
        check_keys(t, "scheduler",
                   {"actions", "plugins", "queue_depth", "full_queue_depth",
                    "full_cycle_interval_s", "options", "usage_half_life_s", "decision_log"}));
    HPCQ_RETURN_IF_ERROR(get_in_range(t, "scheduler", "queue_depth", c.queue_depth, 1, INT32_MAX));
    HPCQ_RETURN_IF_ERROR(
        get_in_range(t, "scheduler", "full_queue_depth", c.full_queue_depth, 1, INT32_MAX));
    HPCQ_RETURN_IF_ERROR(get_in_range<std::int64_t>(t, "scheduler", "full_cycle_interval_s",
                                                    c.full_cycle_interval_s, 0, 86'400));
    HPCQ_RETURN_IF_ERROR(get(t, "scheduler", "actions", c.actions));
    HPCQ_RETURN_IF_ERROR(get(t, "scheduler", "plugins", c.plugins));
    HPCQ_RETURN_IF_ERROR(get_in_range<std::int64_t>(t, "scheduler", "usage_half_life_s",
                                                    c.usage_half_life_s, 0, kCenturyS));
    HPCQ_RETURN_IF_ERROR(get(t, "scheduler", "decision_log", c.decision_log));
    if (t.contains("options")) HPCQ_RETURN_IF_ERROR(read_options(t.at("options"), c));
  }
  // [sched.granularity] policy = "scale": the granularity plugin with that
  // policy (papers/000), the same as plugins += "granularity" and
  // [scheduler.options.granularity] policy = ... .
  if (root.contains("sched")) {
    const Table& sched = root.at("sched");
    if (!sched.is_table()) return invalid_argument(where(sched) + ": [sched] must be a table");
    HPCQ_RETURN_IF_ERROR(check_keys(sched, "sched", {"granularity"}));
    const Table& g = sched.at("granularity");
    if (!g.is_table()) {
      return invalid_argument(where(g) + ": [sched.granularity] must be a table");
    }
    HPCQ_RETURN_IF_ERROR(check_keys(g, "sched.granularity", {"policy", "task_group"}));
    for (const auto& [option, v] : g.as_table()) {
      auto text = option_text(v, "granularity." + option);
      if (!text.is_ok()) return text.status();
      c.scheduler_options["granularity." + option] = *text;
    }
    if (std::find(c.plugins.begin(), c.plugins.end(), "granularity") == c.plugins.end()) {
      c.plugins.push_back("granularity");
    }
  }
  if (root.contains("agent")) {
    const Table& t = root.at("agent");
    if (!t.is_table()) return invalid_argument(where(t) + ": [agent] must be a table");
    HPCQ_RETURN_IF_ERROR(
        check_keys(t, "agent",
                   {"state_dir", "run_dir", "secret_key", "job_shell", "kill_grace_s",
                    "resize_signal", "pids_per_core", "prolog", "epilog", "script_timeout_s",
                    "health_check", "health_check_interval_s", "gpu_devices", "private_tmp",
                    "socket", "pmi_max_kvs_bytes", "shared_host"}));
    if (t.contains("resize_signal")) {
      std::string name;
      HPCQ_RETURN_IF_ERROR(get(t, "agent", "resize_signal", name));
      auto signo = parse_resize_signal(name);
      if (!signo) {
        return invalid_argument(where(t.at("resize_signal")) + ": 'agent.resize_signal' " +
                                "unknown signal " + quote(name) +
                                " (want SIGUSR1, SIGUSR2, SIGHUP, SIGINT or none)");
      }
      c.resize_signal = *signo;
    }
    HPCQ_RETURN_IF_ERROR(get(t, "agent", "state_dir", c.agent_state_dir));
    HPCQ_RETURN_IF_ERROR(get(t, "agent", "run_dir", c.agent_run_dir));
    HPCQ_RETURN_IF_ERROR(get(t, "agent", "socket", c.agent_socket));
    HPCQ_RETURN_IF_ERROR(get(t, "agent", "secret_key", c.agent_secret_key));
    HPCQ_RETURN_IF_ERROR(get(t, "agent", "job_shell", c.job_shell));
    HPCQ_RETURN_IF_ERROR(get_in_range(t, "agent", "kill_grace_s", c.kill_grace_s, 1, 3600));
    HPCQ_RETURN_IF_ERROR(
        get_in_range<std::int64_t>(t, "agent", "pids_per_core", c.pids_per_core, 0, 4'194'304));
    // At least one key of the largest size; at most what a std::string of
    // one fence's keys may sensibly hold on a node.
    HPCQ_RETURN_IF_ERROR(get_in_range<std::int64_t>(
        t, "agent", "pmi_max_kvs_bytes", c.pmi_max_kvs_bytes, kPmiMinKvsBytes, kPmiMaxKvsBytes));
    for (const auto& [key, program] :
         {std::pair{"prolog", &c.agent_prolog}, std::pair{"epilog", &c.agent_epilog},
          std::pair{"health_check", &c.agent_health_check}}) {
      HPCQ_RETURN_IF_ERROR(get(t, "agent", key, *program));
      if (!program->empty() && (*program)[0] != '/') {
        return invalid_argument(where(t.at(key)) + ": 'agent." + key +
                                "' must be an absolute path, got " + quote(*program));
      }
    }
    HPCQ_RETURN_IF_ERROR(
        get_in_range(t, "agent", "script_timeout_s", c.agent_script_timeout_s, 1, 86'400));
    HPCQ_RETURN_IF_ERROR(get_in_range(t, "agent", "health_check_interval_s",
                                      c.agent_health_check_interval_s, 1, 86'400));
    HPCQ_RETURN_IF_ERROR(read_gpu_devices(t, c.agent_gpu_devices));
    HPCQ_RETURN_IF_ERROR(get(t, "agent", "private_tmp", c.agent_private_tmp));
    HPCQ_RETURN_IF_ERROR(get(t, "agent", "shared_host", c.agent_shared_host));
    if (c.agent_private_tmp != "off" && c.agent_private_tmp != "dir" &&
        c.agent_private_tmp != "tmpfs") {
      return invalid_argument(where(t.at("private_tmp")) + ": 'agent.private_tmp' must be " +
                              "\"off\", \"dir\" or \"tmpfs\", got " + quote(c.agent_private_tmp));
    }
  }
  HPCQ_RETURN_IF_ERROR(read_site(root, c.site));
  add_site_plugins(c.site, c.plugins);
  HPCQ_RETURN_IF_ERROR(read_api(root, c));
  if (root.contains("metrics")) {
    const Table& t = root.at("metrics");
    if (!t.is_table()) return invalid_argument(where(t) + ": [metrics] must be a table");
    HPCQ_RETURN_IF_ERROR(check_keys(t, "metrics", {"listen", "per_node"}));
    HPCQ_RETURN_IF_ERROR(get(t, "metrics", "listen", c.metrics_listen));
    HPCQ_RETURN_IF_ERROR(get(t, "metrics", "per_node", c.metrics_per_node));
    const std::size_t colon = c.metrics_listen.rfind(':');
    if (!c.metrics_listen.empty() &&
        (colon == std::string::npos || colon + 1 == c.metrics_listen.size() ||
         c.metrics_listen.find_first_not_of("0123456789", colon + 1) != std::string::npos)) {
      return invalid_argument(where(t.at("listen")) + ": 'metrics.listen' want ADDR:PORT, got " +
                              quote(c.metrics_listen));
    }
  }
  if (!root.contains("rank"))
    return invalid_argument(name + ": no [[rank]] entries (rank 0 is the leader)");
  const Table& ranks = root.at("rank");
  if (!ranks.is_array())
    return invalid_argument(where(ranks) + ": 'rank' must be an array of tables ([[rank]])");
  std::set<std::string> names, endpoints;
  for (const Table& r : ranks.as_array()) {
    if (!r.is_table()) return invalid_argument(where(r) + ": each [[rank]] must be a table");
    HPCQ_RETURN_IF_ERROR(check_keys(
        r, "rank",
        {"name", "endpoint", "endpoints", "public_key", "topology", "features", "gres"}));
    RankConfig rc;
    rc.topology = "host";
    HPCQ_RETURN_IF_ERROR(get(r, "rank", "name", rc.name));
    HPCQ_RETURN_IF_ERROR(get(r, "rank", "endpoint", rc.endpoint));
    HPCQ_RETURN_IF_ERROR(get(r, "rank", "endpoints", rc.endpoints));
    HPCQ_RETURN_IF_ERROR(get(r, "rank", "public_key", rc.public_key));
    HPCQ_RETURN_IF_ERROR(get(r, "rank", "topology", rc.topology));
    HPCQ_RETURN_IF_ERROR(get(r, "rank", "features", rc.features));
    HPCQ_RETURN_IF_ERROR(check_features(r, rc.features));
    if (r.contains("gres"))
      HPCQ_RETURN_IF_ERROR(read_counts(r.at("gres"), "gres", "gres", rc.gres));
    const std::string rank_name = "rank " + std::to_string(c.ranks.size());
    if (rc.name.empty()) return invalid_argument(where(r) + ": " + rank_name + " has no name");
    if (!rc.endpoints.empty() && !c.ranks.empty()) {
      return invalid_argument(where(r) + ": " + rank_name +
                              ": only rank 0 (the leader's candidates) lists endpoints");
    }
    if (!rc.endpoints.empty() && !rc.endpoint.empty()) {
      return invalid_argument(
          where(r) + ": " + rank_name +
          " has both endpoint and endpoints; list every candidate in endpoints");
    }
    if (rc.endpoints.empty() && !rc.endpoint.empty()) rc.endpoints = {rc.endpoint};
    if (rc.endpoint.empty() && !rc.endpoints.empty()) rc.endpoint = rc.endpoints.front();
    if (rc.endpoint.empty() ||
        std::find(rc.endpoints.begin(), rc.endpoints.end(), "") != rc.endpoints.end())
      return invalid_argument(where(r) + ": " + rank_name + " has no endpoint");
    if (rc.public_key.size() != 40) {
      return invalid_argument(where(r) + ": " + rank_name + " needs a 40-character Z85 public_key");
    }
    if (!names.insert(rc.name).second) {
      return invalid_argument(where(r) + ": duplicate node name " + quote(rc.name));
    }
    for (const std::string& endpoint : rc.endpoints) {
      if (!endpoints.insert(endpoint).second)
        return invalid_argument(where(r) + ": duplicate endpoint " + quote(endpoint));
    }
    c.ranks.push_back(std::move(rc));
  }
  if (c.ranks.empty())
    return invalid_argument(name + ": no [[rank]] entries (rank 0 is the leader)");
  for (const QueueConfig& q : c.site.queues) {
    for (const std::string& node : q.nodes) {
      if (!names.count(node) || node == c.ranks.front().name) {
        // At the queue's own line: the file hpcq start merges names it.
        std::string at = name;
        for (const Table& t : root.at("queue").as_array()) {
          if (t.is_table() && t.contains("nodes") && t.contains("name") &&
              t.at("name").is_string() && t.at("name").as_string().str == q.name) {
            at = where(t.at("nodes"));
          }
        }
        return invalid_argument(at + ": queue " + quote(q.name) + " names " + quote(node) +
                                ", which is not a node's [[rank]]");
      }
    }
  }
  return c;
}

// TOML files are UTF-8. Checked before toml11 sees the text: its parser
// (3.7, Debian 12) reads past the end of a literal string holding an invalid
// byte such as 0xff (found by tests/fuzz/config_fuzz.cc).
Status check_utf8(const std::string& text, const std::string& name) {
  int line = 1;
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') ++line;
    std::size_t extra = c < 0x80           ? 0
                        : (c >> 5) == 0x6  ? 1
                        : (c >> 4) == 0xe  ? 2
                        : (c >> 3) == 0x1e ? 3
                                           : 4;
    bool valid = extra < 4 && i + extra < text.size() && !(c >= 0x80 && c < 0xc2) && c <= 0xf4;
    for (std::size_t k = 1; valid && k <= extra; ++k) {
      valid = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
    }
    if (!valid) {
      return invalid_argument(name + ":" + std::to_string(line) + ": not valid UTF-8");
    }
    i += extra + 1;
  }
  return Status::ok();
}

// Nodes of a simulated cluster ([[nodes]] groups, in rank order).
Result<SimClusterConfig> sim_cluster_from_toml(const Table& root, const std::string& name) {
  HPCQ_RETURN_IF_ERROR(check_keys(root, "", {"nodes", "licenses"}));
  SitePolicy site;
  HPCQ_RETURN_IF_ERROR(read_licenses(root, site));
  auto groups = tables_of(root, "nodes");
  if (!groups.is_ok()) return groups.status();
  if (groups->empty()) return invalid_argument(name + ": no [[nodes]] (the simulated nodes)");
  SimClusterConfig c;
  c.licenses = std::move(site.licenses);
  for (const Table* t : *groups) {
    HPCQ_RETURN_IF_ERROR(
        check_keys(*t, "nodes", {"count", "cores", "topology", "features", "gres"}));
    SimNodeGroup group;
    group.where = where(*t);
    HPCQ_RETURN_IF_ERROR(get_in_range(*t, "nodes", "count", group.count, 1, 1 << 20));
    HPCQ_RETURN_IF_ERROR(get_in_range(*t, "nodes", "cores", group.cores, 1, 1 << 20));
    HPCQ_RETURN_IF_ERROR(get(*t, "nodes", "topology", group.topology));
    HPCQ_RETURN_IF_ERROR(get(*t, "nodes", "features", group.features));
    HPCQ_RETURN_IF_ERROR(check_features(*t, group.features));
    if (t->contains("gres"))
      HPCQ_RETURN_IF_ERROR(read_counts(t->at("gres"), "gres", "gres", group.gres));
    if ((group.cores > 0) == !group.topology.empty()) {
      return invalid_argument(group.where +
                              ": each [[nodes]] needs either 'cores' or 'topology', not both");
    }
    c.groups.push_back(std::move(group));
  }
  return c;
}

// toml11 throws; every failure becomes one line naming the file (and line).
template <typename Out>
Result<Out> parse_toml(const std::string& text, const std::string& name,
                       Result<Out> (*convert)(const Table&, const std::string&)) {
  HPCQ_RETURN_IF_ERROR(check_utf8(text, name));
  try {
    std::istringstream in(text);
    return convert(toml::parse(in, name), name);
  } catch (const toml::syntax_error& e) {
    // toml11 spreads its message over several lines: "[error] WHAT", then
    // " --> FILE", then " N | TEXT" with the line number. Fold it into one.
    std::istringstream lines(e.what());
    std::string line, what, lineno;
    while (std::getline(lines, line)) {
      if (what.empty() && line.rfind("[error] ", 0) == 0) what = line.substr(8);
      auto bar = line.find(" | ");
      if (lineno.empty() && bar != std::string::npos) {
        std::string n = line.substr(0, bar);
        n.erase(0, n.find_first_not_of(' '));
        if (!n.empty() && n.find_first_not_of("0123456789") == std::string::npos) lineno = n;
      }
    }
    return invalid_argument(name + (lineno.empty() ? "" : ":" + lineno) + ": " +
                            (what.empty() ? "TOML syntax error" : what));
  } catch (const std::exception& e) {
    std::string msg = e.what();
    return invalid_argument(name + ": " + msg.substr(0, msg.find('\n')));
  }
}

Result<std::string> read_text(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) return not_found(std::string(what) + " " + path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void add_site_plugins(const SitePolicy& site, std::vector<std::string>& plugins) {
  // Licenses are counted by their plugin (lib/sched/plugins/licenses.h).
  if (!site.licenses.empty() &&
      std::find(plugins.begin(), plugins.end(), "licenses") == plugins.end()) {
    plugins.push_back("licenses");
  }
}

Result<ClusterConfig> parse_config(const std::string& text, const std::string& name) {
  return parse_toml<ClusterConfig>(text, name, from_toml);
}

Result<ClusterConfig> load_config(const std::string& path) {
  auto text = read_text(path, "config");
  if (!text.is_ok()) return text.status();
  return parse_config(*text, path);
}

Result<SimClusterConfig> parse_sim_cluster(const std::string& text, const std::string& name) {
  return parse_toml<SimClusterConfig>(text, name, sim_cluster_from_toml);
}

Result<SimClusterConfig> load_sim_cluster(const std::string& path) {
  auto text = read_text(path, "cluster file");
  if (!text.is_ok()) return text.status();
  return parse_sim_cluster(*text, path);
}

}  // namespace hpcq
