// The only translation unit that includes toml11 (slow to compile).
#include "lib/core/config.h"

#include <fstream>
#include <set>
#include <sstream>
#include <toml.hpp>

namespace hpcq {
namespace {

using Table = toml::basic_value<toml::discard_comments>;

std::string where(const Table& v) {
  const auto loc = v.location();
  return loc.file_name() + ":" + std::to_string(loc.line());
}

// Throws nothing: every failure becomes a Status naming file:line and key.
Status check_keys(const Table& table, const std::string& section, const std::set<std::string>& known) {
  for (const auto& [key, value] : table.as_table()) {
    if (!known.count(key)) {
      return invalid_argument(where(value) + ": unknown key '" +
                              (section.empty() ? key : section + "." + key) + "'");
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

Status get_positive(const Table& table, const std::string& section, const std::string& key,
                    int& out) {
  HPCQ_RETURN_IF_ERROR(get(table, section, key, out));
  if (table.contains(key) && out <= 0) {
    return invalid_argument(where(table.at(key)) + ": '" + section + "." + key +
                            "' must be a positive integer");
  }
  return Status::ok();
}

Result<ClusterConfig> from_toml(const Table& root, const std::string& name) {
  ClusterConfig c;
  c.source = name;
  if (!root.is_table()) return invalid_argument(name + ": not a TOML table");
  HPCQ_RETURN_IF_ERROR(check_keys(root, "", {"overlay", "leader", "scheduler", "agent", "rank"}));

  if (root.contains("overlay")) {
    const Table& t = root.at("overlay");
    if (!t.is_table()) return invalid_argument(where(t) + ": [overlay] must be a table");
    HPCQ_RETURN_IF_ERROR(
        check_keys(t, "overlay", {"fanout", "heartbeat_interval_ms", "node_unresponsive_after_ms",
                                  "node_down_after_ms"}));
    HPCQ_RETURN_IF_ERROR(get_positive(t, "overlay", "fanout", c.fanout));
    HPCQ_RETURN_IF_ERROR(get_positive(t, "overlay", "heartbeat_interval_ms", c.heartbeat_interval_ms));
    HPCQ_RETURN_IF_ERROR(get_positive(t, "overlay", "node_unresponsive_after_ms",
                                      c.node_unresponsive_after_ms));
    HPCQ_RETURN_IF_ERROR(get_positive(t, "overlay", "node_down_after_ms", c.node_down_after_ms));
    if (c.node_unresponsive_after_ms <= c.heartbeat_interval_ms ||
        c.node_down_after_ms <= c.node_unresponsive_after_ms) {
      return invalid_argument(where(t) +
                              ": overlay needs heartbeat_interval_ms < node_unresponsive_after_ms"
                              " < node_down_after_ms");
    }
  }
  if (root.contains("leader")) {
    const Table& t = root.at("leader");
    if (!t.is_table()) return invalid_argument(where(t) + ": [leader] must be a table");
    HPCQ_RETURN_IF_ERROR(check_keys(t, "leader", {"state_dir", "socket", "secret_key",
                                                  "default_time_limit_s", "max_time_limit_s"}));
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "state_dir", c.state_dir));
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "socket", c.socket));
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "secret_key", c.secret_key));
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "default_time_limit_s", c.default_time_limit_s));
    HPCQ_RETURN_IF_ERROR(get(t, "leader", "max_time_limit_s", c.max_time_limit_s));
    if (c.default_time_limit_s <= 0 || c.max_time_limit_s < 0) {
      return invalid_argument(where(t) + ": leader time limits must be positive");
    }
  }
  if (root.contains("scheduler")) {
    const Table& t = root.at("scheduler");
    if (!t.is_table()) return invalid_argument(where(t) + ": [scheduler] must be a table");
    HPCQ_RETURN_IF_ERROR(check_keys(t, "scheduler", {"actions", "plugins", "queue_depth"}));
    HPCQ_RETURN_IF_ERROR(get_positive(t, "scheduler", "queue_depth", c.queue_depth));
    HPCQ_RETURN_IF_ERROR(get(t, "scheduler", "actions", c.actions));
    HPCQ_RETURN_IF_ERROR(get(t, "scheduler", "plugins", c.plugins));
  }
  if (root.contains("agent")) {
    const Table& t = root.at("agent");
    if (!t.is_table()) return invalid_argument(where(t) + ": [agent] must be a table");
    HPCQ_RETURN_IF_ERROR(check_keys(t, "agent", {"state_dir", "secret_key", "job_shell",
                                                 "kill_grace_s"}));
    HPCQ_RETURN_IF_ERROR(get(t, "agent", "state_dir", c.agent_state_dir));
    HPCQ_RETURN_IF_ERROR(get(t, "agent", "secret_key", c.agent_secret_key));
    HPCQ_RETURN_IF_ERROR(get(t, "agent", "job_shell", c.job_shell));
    HPCQ_RETURN_IF_ERROR(get_positive(t, "agent", "kill_grace_s", c.kill_grace_s));
  }
  if (!root.contains("rank")) return invalid_argument(name + ": no [[rank]] entries (rank 0 is the leader)");
  const Table& ranks = root.at("rank");
  if (!ranks.is_array()) return invalid_argument(where(ranks) + ": 'rank' must be an array of tables ([[rank]])");
  std::set<std::string> names, endpoints;
  for (const Table& r : ranks.as_array()) {
    if (!r.is_table()) return invalid_argument(where(r) + ": each [[rank]] must be a table");
    HPCQ_RETURN_IF_ERROR(check_keys(r, "rank", {"name", "endpoint", "public_key", "topology"}));
    RankConfig rc;
    rc.topology = "host";
    HPCQ_RETURN_IF_ERROR(get(r, "rank", "name", rc.name));
    HPCQ_RETURN_IF_ERROR(get(r, "rank", "endpoint", rc.endpoint));
    HPCQ_RETURN_IF_ERROR(get(r, "rank", "public_key", rc.public_key));
    HPCQ_RETURN_IF_ERROR(get(r, "rank", "topology", rc.topology));
    const std::string rank_name = "rank " + std::to_string(c.ranks.size());
    if (rc.name.empty()) return invalid_argument(where(r) + ": " + rank_name + " has no name");
    if (rc.endpoint.empty()) return invalid_argument(where(r) + ": " + rank_name + " has no endpoint");
    if (rc.public_key.size() != 40) {
      return invalid_argument(where(r) + ": " + rank_name + " needs a 40-character Z85 public_key");
    }
    if (!names.insert(rc.name).second) {
      return invalid_argument(where(r) + ": duplicate node name '" + rc.name + "'");
    }
    if (!endpoints.insert(rc.endpoint).second) {
      return invalid_argument(where(r) + ": duplicate endpoint '" + rc.endpoint + "'");
    }
    c.ranks.push_back(std::move(rc));
  }
  if (c.ranks.empty()) return invalid_argument(name + ": no [[rank]] entries (rank 0 is the leader)");
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
    std::size_t extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : 4;
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

}  // namespace

Result<ClusterConfig> parse_config(const std::string& text, const std::string& name) {
  HPCQ_RETURN_IF_ERROR(check_utf8(text, name));
  try {
    std::istringstream in(text);
    return from_toml(toml::parse(in, name), name);
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

Result<ClusterConfig> load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("config " + path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path);
}

}  // namespace hpcq
