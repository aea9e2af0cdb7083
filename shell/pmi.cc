#include "shell/pmi.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <utility>

namespace hpcq::agent::pmi {
namespace {

// The words of a line: "cmd=put key=a value=b=c" -> {cmd: put, key: a,
// value: b=c}. A word without '=' is kept with an empty value.
std::map<std::string, std::string> words_of(std::string_view line) {
  std::map<std::string, std::string> words;
  std::size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && line[pos] == ' ') ++pos;
    std::size_t end = line.find(' ', pos);
    if (end == std::string_view::npos) end = line.size();
    const std::string_view word = line.substr(pos, end - pos);
    if (!word.empty()) {
      const std::size_t eq = word.find('=');
      if (eq == std::string_view::npos) {
        words.emplace(std::string(word), "");
      } else {
        words.emplace(std::string(word.substr(0, eq)), std::string(word.substr(eq + 1)));
      }
    }
    pos = end;
  }
  return words;
}

std::string value_or(const std::map<std::string, std::string>& words, const std::string& key,
                     const std::string& fallback = "") {
  auto it = words.find(key);
  return it == words.end() ? fallback : it->second;
}

// PMI messages are words: a space or newline inside one would split it.
std::string as_word(std::string text) {
  for (char& c : text) {
    if (c == ' ' || c == '\n' || c == '=') c = '_';
  }
  return text;
}

std::optional<std::string> find(const Pairs& pairs, std::string_view key) {
  for (const auto& [k, v] : pairs) {
    if (k == key) return v;
  }
  return std::nullopt;
}

bool is_true(const std::optional<std::string>& value) {
  if (!value || value->size() != 4) return false;
  for (std::size_t i = 0; i < 4; ++i) {
    if (std::toupper(static_cast<unsigned char>((*value)[i])) != "TRUE"[i]) return false;
  }
  return true;
}

// A PMI-2 length: decimal digits with spaces either side, as "%-6d" (Slurm's
// libpmi2) and "%6u" (MPICH) write it.
std::optional<std::size_t> length_of(std::string_view field) {
  std::size_t b = 0, e = field.size();
  while (b < e && field[b] == ' ') ++b;
  while (e > b && field[e - 1] == ' ') --e;
  if (b == e) return std::nullopt;
  std::size_t length = 0;
  for (std::size_t i = b; i < e; ++i) {
    if (field[i] < '0' || field[i] > '9') return std::nullopt;
    length = length * 10 + static_cast<std::size_t>(field[i] - '0');
  }
  return length;
}

// A PMI-2 answer: `cmd`, the request's thrid if it had one, then `pairs`.
Reply answer(std::size_t client, std::string cmd, const std::string& thrid, Pairs pairs) {
  Pairs all{{"cmd", std::move(cmd)}};
  if (!thrid.empty()) all.emplace_back("thrid", thrid);
  for (auto& p : pairs) all.push_back(std::move(p));
  return {client, encode_message(all)};
}

Pairs failed(std::string why) { return {{"rc", "-1"}, {"errmsg", std::move(why)}}; }

// Why a key and value cannot be stored: the fence carries them as
// "key=value\n" lines.
std::optional<std::string> unstorable(const std::string& key, const std::string& value) {
  if (key.empty() || key.size() > kKeyMax || value.size() > kValueMax) {
    return "key or value too long";
  }
  if (key.find_first_of("=\n") != std::string::npos || value.find('\n') != std::string::npos) {
    return "a key holds no '=' or newline, a value no newline";
  }
  return std::nullopt;
}

}  // namespace

std::string encode_kvs(const Kvs& kvs) {
  std::string text;
  for (const auto& [key, value] : kvs) text += key + "=" + value + "\n";
  return text;
}

std::string encode_message(const Pairs& pairs) {
  std::string text;
  for (const auto& [key, value] : pairs) {
    text += key;
    text += '=';
    for (char c : value) {
      if (c == ';') text += ';';  // escaped as ";;"
      text += c;
    }
    text += ';';
  }
  std::string length = std::to_string(text.size());
  length.resize(std::max(length.size(), kLengthWidth), ' ');
  return length + text;
}

Result<Pairs> decode_message(std::string_view text) {
  Pairs pairs;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t eq = text.find('=', pos);
    if (eq == std::string_view::npos) return invalid_argument("PMI-2 message: a pair without '='");
    const std::string_view key = text.substr(pos, eq - pos);
    if (key.empty() || key.find(';') != std::string_view::npos) {
      return invalid_argument("PMI-2 message: a pair whose key is empty or holds ';'");
    }
    std::string value;
    std::size_t i = eq + 1;
    for (; i < text.size(); ++i) {
      if (text[i] == ';') {
        if (i + 1 >= text.size() || text[i + 1] != ';') break;
        ++i;  // ";;" is one ';' of the value
      }
      value += text[i];
    }
    pairs.emplace_back(std::string(key), std::move(value));
    pos = i + 1;
  }
  return pairs;
}

Result<Kvs> decode_kvs(std::string_view text) {
  Kvs kvs;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) return invalid_argument("PMI exchange: unterminated line");
    const std::string_view line = text.substr(pos, end - pos);
    const std::size_t eq = line.find('=');
    if (eq == 0 || eq == std::string_view::npos) {
      return invalid_argument("PMI exchange: a line without key=value");
    }
    kvs[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    pos = end + 1;
  }
  return kvs;
}

std::string process_mapping(const std::vector<int>& node_of_rank) {
  struct Block {
    int node, nodes, ranks;
  };
  std::vector<Block> blocks;
  for (std::size_t r = 0; r < node_of_rank.size();) {
    std::size_t end = r;
    while (end < node_of_rank.size() && node_of_rank[end] == node_of_rank[r]) ++end;
    const Block run{node_of_rank[r], 1, static_cast<int>(end - r)};
    Block* last = blocks.empty() ? nullptr : &blocks.back();
    if (last && last->ranks == run.ranks && last->node + last->nodes == run.node) {
      ++last->nodes;
    } else {
      blocks.push_back(run);
    }
    r = end;
  }
  std::string text = "(vector";
  for (const Block& b : blocks) {
    text += ",(" + std::to_string(b.node) + "," + std::to_string(b.nodes) + "," +
            std::to_string(b.ranks) + ")";
  }
  text += ")";
  return text.size() > kValueMax ? "" : text;
}

Server::Server(World world, std::vector<int> ranks)
    : world_(std::move(world)), ranks_(std::move(ranks)), clients_(ranks_.size()) {
  for (const auto& [key, value] : world_.preset) store(key, value);
}

void Server::store(const std::string& key, const std::string& value) {
  auto [it, added] = kvs_.try_emplace(key, value);
  if (!added) {
    kvs_bytes_ -= kvs_bytes(key, it->second);
    it->second = value;
  }
  kvs_bytes_ += kvs_bytes(key, value);
}

std::optional<std::string> Server::put(const std::string& key, const std::string& value) {
  auto it = kvs_.find(key);
  const std::size_t would =
      kvs_bytes_ - (it == kvs_.end() ? 0 : kvs_bytes(key, it->second)) + kvs_bytes(key, value);
  if (would > world_.max_kvs_bytes) {
    std::string why = "PMI key space of " + world_.kvsname + " full: its keys and values would " +
                      "take " + std::to_string(would) + " bytes, past the limit of " +
                      std::to_string(world_.max_kvs_bytes) + " ([agent] pmi_max_kvs_bytes)";
    if (key_space_refusal_.empty()) key_space_refusal_ = why;
    return why;
  }
  store(key, value);
  pending_[key] = value;
  return std::nullopt;
}

const std::string& Server::refused(std::size_t client) const {
  static const std::string kNone;
  return client < clients_.size() ? clients_[client].refused : kNone;
}

void Server::refuse(std::size_t client, const std::string& why, std::vector<Reply>& replies) {
  Client& c = clients_[client];
  c.refused = why;
  c.unread.clear();
  replies.push_back(c.wire == Wire::kLines
                        ? Reply{client, "cmd=error rc=-1 msg=" + as_word(why) + "\n"}
                        : answer(client, "error", "", failed(why)));
}

std::vector<Reply> Server::on_bytes(std::size_t client, std::string_view bytes) {
  std::vector<Reply> replies;
  if (client >= clients_.size()) return replies;
  Client& c = clients_[client];  // clients_ never grows: the reference stays
  if (c.phase == Phase::kGone || !c.refused.empty()) return replies;
  c.unread.append(bytes);
  std::size_t pos = 0;
  auto take = [&replies](std::vector<Reply> more) {
    for (Reply& r : more) replies.push_back(std::move(r));
  };
  while (c.phase != Phase::kGone && c.refused.empty()) {
    const std::string_view rest = std::string_view(c.unread).substr(pos);
    if (c.wire == Wire::kLines) {
      const std::size_t end = rest.find('\n');
      if ((end == std::string_view::npos ? rest.size() : end) > kLineMax) {
        refuse(client, "a PMI-1 line longer than " + std::to_string(kLineMax) + " bytes", replies);
        break;
      }
      if (end == std::string_view::npos) break;
      const std::string line(rest.substr(0, end));
      pos += end + 1;
      take(on_line(client, line));  // may switch the client to PMI-2
    } else {
      if (rest.size() < kLengthWidth) break;
      const auto length = length_of(rest.substr(0, kLengthWidth));
      if (!length || *length > kMessageMax) {
        std::string field(rest.substr(0, kLengthWidth));  // copied: refuse() drops `rest`
        for (char& ch : field) {
          if (!std::isprint(static_cast<unsigned char>(ch))) ch = '?';  // one line in the log
        }
        refuse(client,
               "a PMI-2 message whose length is not a number up to " + std::to_string(kMessageMax) +
                   ": '" + field + "'",
               replies);
        break;
      }
      if (rest.size() < kLengthWidth + *length) break;
      const std::string text(rest.substr(kLengthWidth, *length));
      pos += kLengthWidth + *length;
      take(on_message(client, text));
    }
  }
  if (c.refused.empty() && c.phase != Phase::kGone) {
    c.unread.erase(0, pos);
  } else {
    c.unread.clear();
  }
  return replies;
}

void Server::begin(std::size_t client) {
  in_use_ = true;
  if (clients_[client].phase == Phase::kNew) clients_[client].phase = Phase::kInitialized;
  // A task that ended before any began is missing from this world.
  if (!gone_early_.empty() && !broken_by_) broken_by_ = *gone_early_.begin();
}

std::vector<Reply> Server::on_line(std::size_t client, std::string_view line) {
  std::vector<Reply> replies;
  if (client >= clients_.size()) return replies;
  Client& c = clients_[client];
  if (c.phase == Phase::kGone || !c.refused.empty()) return replies;
  if (c.in_multi_line || line.substr(0, 5) == "mcmd=") return on_spawn_line(client, line);
  auto reply = [&](std::string text) { replies.push_back({client, std::move(text) + "\n"}); };
  const auto words = words_of(line);
  const std::string cmd = value_or(words, "cmd");
  if (cmd == "init") {
    const std::string version = value_or(words, "pmi_version");
    if (version == "2") {
      begin(client);
      c.wire = Wire::kMessages;  // what follows this line is PMI-2's
      reply("cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0");
    } else if (version != "1") {
      reply("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1");
    } else {
      begin(client);
      reply("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
    }
  } else if (cmd == "get_maxes") {
    reply("cmd=maxes rc=0 kvsname_max=" + std::to_string(kKvsNameMax) +
          " keylen_max=" + std::to_string(kKeyMax) + " vallen_max=" + std::to_string(kValueMax));
  } else if (cmd == "get_appnum") {
    reply("cmd=appnum rc=0 appnum=0");
  } else if (cmd == "get_my_kvsname") {
    reply("cmd=my_kvsname rc=0 kvsname=" + world_.kvsname);
  } else if (cmd == "get_universe_size") {
    reply("cmd=universe_size rc=0 size=" + std::to_string(world_.size));
  } else if (cmd == "put") {
    const std::string key = value_or(words, "key"), value = value_or(words, "value");
    if (key.empty() || key.size() > kKeyMax || value.size() > kValueMax) {
      reply("cmd=put_result rc=-1 msg=key_or_value_too_long");
    } else if (key.find('=') != std::string::npos) {
      reply("cmd=put_result rc=-1 msg=a_key_holds_no_equals_sign");
    } else if (auto why = put(key, value)) {
      reply("cmd=put_result rc=-1 msg=" + as_word(*why));
    } else {
      reply("cmd=put_result rc=0 msg=success");
    }
  } else if (cmd == "get") {
    const std::string key = value_or(words, "key");
    auto it = kvs_.find(key);
    if (it == kvs_.end()) {
      reply("cmd=get_result rc=-1 value=unknown msg=key_" + as_word(key) + "_not_found");
    } else {
      reply("cmd=get_result rc=0 value=" + it->second + " msg=success");
    }
  } else if (cmd == "getbyidx") {
    reply("cmd=getbyidx_results rc=-1 reason=no_more_keyvals");
  } else if (cmd == "barrier_in") {
    c.phase = Phase::kInBarrier;
    c.fence_thrid.clear();
    return maybe_complete_barrier();
  } else if (cmd == "finalize") {
    c.phase = Phase::kFinalized;
    reply("cmd=finalize_ack rc=0");
  } else if (cmd == "abort") {
    if (!abort_) {
      int code = 1;
      try {
        code = std::stoi(value_or(words, "exitcode", "1"));
      } catch (const std::exception&) {
      }
      abort_ = Abort{ranks_[client], code, ""};
    }
  } else if (cmd == "publish_name" || cmd == "unpublish_name" || cmd == "lookup_name") {
    const std::string answer = cmd.substr(0, cmd.find('_')) + "_result";
    reply("cmd=" + answer + " rc=-1 msg=hpcq_has_no_name_service");
  } else {
    reply("cmd=" + as_word(cmd.empty() ? "unknown" : cmd) + "_result rc=-1 msg=unknown_command");
  }
  return replies;
}

std::vector<Reply> Server::on_spawn_line(std::size_t client, std::string_view line) {
  Client& c = clients_[client];
  c.in_multi_line = true;
  // A line of the block is one key=value, the value all after the first
  // '=' (an argument, "argN=...", may hold spaces, '=' and "endcmd").
  while (!line.empty() && line.back() == ' ') line.remove_suffix(1);
  const std::size_t eq = line.find('=');
  const std::string_view key = line.substr(0, eq);
  const std::string_view value = eq == std::string_view::npos ? "" : line.substr(eq + 1);
  if (key == "totspawns" || key == "spawnssofar") {
    std::from_chars(value.data(), value.data() + value.size(),
                    key == "totspawns" ? c.spawn_commands : c.spawns_so_far);
  }
  if (line != "endcmd") return {};
  c.in_multi_line = false;
  if (c.spawns_so_far < c.spawn_commands) return {};  // the next command's block follows
  c.spawns_so_far = c.spawn_commands = 0;
  if (!spawn_refused_) spawn_refused_ = ranks_[client];
  return {{client, "cmd=spawn_result rc=-1 msg=" + as_word(std::string(kSpawnRefused)) + "\n"}};
}

namespace {

// The answer to a PMI-2 message that cannot be read: named after its
// command where that much can be read.
Reply unreadable(std::size_t client, std::string_view text, const std::string& why) {
  std::string cmd = "error";
  if (text.substr(0, 4) == "cmd=") {
    const std::size_t semicolon = text.find(';');
    cmd = std::string(text.substr(
              4, semicolon == std::string_view::npos ? std::string_view::npos : semicolon - 4)) +
          "-response";
  }
  return answer(client, cmd, "", failed(why));
}

Pairs found(const std::optional<std::string>& value) {
  if (!value) return {{"rc", "0"}, {"found", "FALSE"}};
  return {{"rc", "0"}, {"found", "TRUE"}, {"value", *value}};
}

}  // namespace

std::optional<std::string> Server::job_attr(const std::string& key) const {
  if (key == "universeSize") return std::to_string(world_.size);
  if (auto it = world_.preset.find(key); it != world_.preset.end() && !it->second.empty()) {
    return it->second;
  }
  return std::nullopt;
}

void Server::put_node_attr(std::size_t client, const std::string& key, const std::string& value,
                           const std::string& thrid, std::vector<Reply>& replies) {
  if (auto why = unstorable(key, value)) {
    replies.push_back(answer(client, "info-putnodeattr-response", thrid, failed(*why)));
    return;
  }
  node_attrs_[key] = value;
  replies.push_back(answer(client, "info-putnodeattr-response", thrid, {{"rc", "0"}}));
  for (std::size_t other = 0; other < clients_.size(); ++other) {
    Client& o = clients_[other];
    if (!o.awaits || o.awaits->first != key) continue;
    replies.push_back(answer(other, "info-getnodeattr-response", o.awaits->second, found(value)));
    o.awaits.reset();
  }
}

std::vector<Reply> Server::on_message(std::size_t client, std::string_view text) {
  std::vector<Reply> replies;
  Client& c = clients_[client];
  auto pairs = decode_message(text);
  if (!pairs.is_ok() || pairs->empty() || pairs->front().first != "cmd") {
    replies.push_back(
        unreadable(client, text,
                   pairs.is_ok() ? "a PMI-2 message begins with cmd=" : pairs.status().message()));
    return replies;
  }
  const std::string cmd = pairs->front().second;
  const std::string thrid = find(*pairs, "thrid").value_or("");
  auto reply = [&](Pairs p) {
    replies.push_back(answer(client, cmd + "-response", thrid, std::move(p)));
  };
  const std::string key = find(*pairs, "key").value_or("");
  if (cmd == "fullinit") {
    // The rank is the task's, whatever pmirank says (PMI_RANK told it).
    begin(client);
    reply({{"rc", "0"},
           {"pmi-version", "2"},
           {"pmi-subversion", "0"},
           {"rank", std::to_string(ranks_[client])},
           {"size", std::to_string(world_.size)},
           {"appnum", "0"},
           {"debugged", "FALSE"},
           {"pmiverbose", "FALSE"}});
    // No spawner-jobid: its presence tells the client it was spawned.
  } else if (cmd == "job-getid") {
    reply({{"rc", "0"}, {"jobid", world_.kvsname}});
  } else if (cmd == "kvs-put") {
    const std::string value = find(*pairs, "value").value_or("");
    if (auto why = unstorable(key, value)) {
      reply(failed(*why));
    } else if (auto full = put(key, value)) {
      reply(failed(*full));
    } else {
      reply({{"rc", "0"}});
    }
  } else if (cmd == "kvs-fence") {
    c.phase = Phase::kInBarrier;
    c.fence_thrid = thrid;
    return maybe_complete_barrier();
  } else if (cmd == "kvs-get") {
    // jobid and srcid name no other space: there is one, the world's.
    auto it = kvs_.find(key);
    reply(found(it == kvs_.end() ? std::nullopt : std::optional<std::string>(it->second)));
  } else if (cmd == "info-putnodeattr") {
    put_node_attr(client, key, find(*pairs, "value").value_or(""), thrid, replies);
  } else if (cmd == "info-getnodeattr") {
    auto it = node_attrs_.find(key);
    if (it != node_attrs_.end()) {
      reply(found(it->second));
    } else if (is_true(find(*pairs, "wait"))) {
      c.awaits = std::make_pair(key, thrid);  // answered by the put
    } else {
      reply(found(std::nullopt));
    }
  } else if (cmd == "info-getjobattr") {
    reply(found(job_attr(key)));
  } else if (cmd == "finalize") {
    c.phase = Phase::kFinalized;
    reply({{"rc", "0"}});
  } else if (cmd == "abort") {
    // isworld or not: a world of fixed size cannot go on without the rank.
    // No answer: the client exits.
    if (!abort_) abort_ = Abort{ranks_[client], 1, find(*pairs, "msg").value_or("")};
  } else if (cmd == "spawn") {
    if (!spawn_refused_) spawn_refused_ = ranks_[client];
    reply(failed(std::string(kSpawnRefused)));
  } else if (cmd == "name-publish" || cmd == "name-unpublish" || cmd == "name-lookup") {
    reply(failed("hpcq has no name service"));
  } else {
    reply(failed("unknown or unsupported command"));
  }
  return replies;
}

std::vector<Reply> Server::maybe_complete_barrier() {
  bool anyone_waits = false;
  for (const Client& c : clients_) {
    if (c.phase == Phase::kNew || c.phase == Phase::kInitialized) return {};
    anyone_waits = anyone_waits || c.phase == Phase::kInBarrier;
  }
  if (!anyone_waits) return {};
  if (world_.nodes <= 1) {
    pending_.clear();
    return release_barrier(std::nullopt);
  }
  if (!fence_in_flight_) fence_pending_ = true;
  return {};
}

std::string Server::take_fence() {
  fence_pending_ = false;
  fence_in_flight_ = true;
  std::string text = encode_kvs(pending_);
  pending_.clear();
  return text;
}

std::vector<Reply> Server::fence_done(std::uint32_t seq, const Kvs& all) {
  if (!fence_in_flight_ || seq != fence_seq_) return {};
  fence_in_flight_ = false;
  ++fence_seq_;
  for (const auto& [key, value] : all) store(key, value);
  return release_barrier(std::nullopt);
}

std::vector<Reply> Server::fence_failed(const std::string& why) {
  fence_in_flight_ = fence_pending_ = false;
  return release_barrier(why);
}

std::vector<Reply> Server::release_barrier(std::optional<std::string> why) {
  std::vector<Reply> replies;
  for (std::size_t i = 0; i < clients_.size(); ++i) {
    Client& c = clients_[i];
    if (c.phase != Phase::kInBarrier) continue;
    c.phase = Phase::kInitialized;
    if (c.wire == Wire::kLines) {
      replies.push_back({i, !why ? "cmd=barrier_out rc=0\n"
                                 : "cmd=barrier_out rc=-1 msg=" + as_word(*why) + "\n"});
    } else {
      replies.push_back(
          answer(i, "kvs-fence-response", c.fence_thrid, !why ? Pairs{{"rc", "0"}} : failed(*why)));
    }
  }
  return replies;
}

bool Server::on_client_gone(std::size_t client, std::vector<Reply>& replies) {
  if (client >= clients_.size() || clients_[client].phase == Phase::kGone) return false;
  Client& c = clients_[client];
  const Phase was = c.phase;
  c.phase = Phase::kGone;
  c.in_multi_line = false;
  c.awaits.reset();
  c.unread.clear();
  const bool breaks =
      was == Phase::kInitialized || was == Phase::kInBarrier || (was == Phase::kNew && in_use_);
  if (was == Phase::kNew && !in_use_) gone_early_.insert(client);
  if (breaks && !broken_by_) broken_by_ = client;
  auto released = breaks ? fence_failed() : maybe_complete_barrier();
  replies.insert(replies.end(), released.begin(), released.end());
  return breaks;
}

}  // namespace hpcq::agent::pmi
