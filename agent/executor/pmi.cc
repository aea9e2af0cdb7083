#include "agent/executor/pmi.h"

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

}  // namespace

std::string encode_kvs(const Kvs& kvs) {
  std::string text;
  for (const auto& [key, value] : kvs) text += key + "=" + value + "\n";
  return text;
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
    : world_(std::move(world)), ranks_(std::move(ranks)), phase_(ranks_.size(), Phase::kNew) {
  kvs_ = world_.preset;
}

std::vector<Reply> Server::on_line(std::size_t client, std::string_view line) {
  std::vector<Reply> replies;
  if (client >= ranks_.size() || phase_[client] == Phase::kGone) return replies;
  auto reply = [&](std::string text) { replies.push_back({client, std::move(text) + "\n"}); };
  const auto words = words_of(line);
  if (words.count("mcmd")) {  // spawn: multi-line, ended by "endcmd"
    in_multi_line_.insert(client);
    return replies;
  }
  if (in_multi_line_.count(client)) {
    if (words.count("endcmd")) {
      in_multi_line_.erase(client);
      reply("cmd=spawn_result rc=-1 msg=hpcq_does_not_spawn_processes");
    }
    return replies;
  }
  const std::string cmd = value_or(words, "cmd");
  if (cmd == "init") {
    const std::string version = value_or(words, "pmi_version");
    if (version != "1") {
      reply("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1");
      return replies;
    }
    in_use_ = true;
    if (phase_[client] == Phase::kNew) phase_[client] = Phase::kInitialized;
    // A task that ended before any began is missing from this world.
    if (!gone_early_.empty() && !broken_by_) broken_by_ = *gone_early_.begin();
    reply("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
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
    } else {
      kvs_[key] = value;
      pending_[key] = value;
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
    phase_[client] = Phase::kInBarrier;
    return maybe_complete_barrier();
  } else if (cmd == "finalize") {
    phase_[client] = Phase::kFinalized;
    reply("cmd=finalize_ack rc=0");
  } else if (cmd == "abort") {
    if (!abort_) {
      int code = 1;
      try {
        code = std::stoi(value_or(words, "exitcode", "1"));
      } catch (const std::exception&) {
      }
      abort_ = Abort{ranks_[client], code};
    }
  } else if (cmd == "publish_name" || cmd == "unpublish_name" || cmd == "lookup_name") {
    const std::string answer = cmd.substr(0, cmd.find('_')) + "_result";
    reply("cmd=" + answer + " rc=-1 msg=hpcq_has_no_name_service");
  } else {
    reply("cmd=" + as_word(cmd.empty() ? "unknown" : cmd) + "_result rc=-1 msg=unknown_command");
  }
  return replies;
}

std::vector<Reply> Server::maybe_complete_barrier() {
  bool anyone_waits = false;
  for (Phase p : phase_) {
    if (p == Phase::kNew || p == Phase::kInitialized) return {};
    anyone_waits = anyone_waits || p == Phase::kInBarrier;
  }
  if (!anyone_waits) return {};
  if (world_.nodes <= 1) {
    pending_.clear();
    return release_barrier("cmd=barrier_out rc=0\n");
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
  for (const auto& [key, value] : all) kvs_[key] = value;
  return release_barrier("cmd=barrier_out rc=0\n");
}

std::vector<Reply> Server::fence_failed() {
  fence_in_flight_ = fence_pending_ = false;
  return release_barrier("cmd=barrier_out rc=-1 msg=a_rank_of_the_job_has_ended\n");
}

std::vector<Reply> Server::release_barrier(const std::string& line) {
  std::vector<Reply> replies;
  for (std::size_t c = 0; c < phase_.size(); ++c) {
    if (phase_[c] != Phase::kInBarrier) continue;
    phase_[c] = Phase::kInitialized;
    replies.push_back({c, line});
  }
  return replies;
}

bool Server::on_client_gone(std::size_t client, std::vector<Reply>& replies) {
  if (client >= phase_.size() || phase_[client] == Phase::kGone) return false;
  const Phase was = phase_[client];
  phase_[client] = Phase::kGone;
  in_multi_line_.erase(client);
  const bool breaks =
      was == Phase::kInitialized || was == Phase::kInBarrier || (was == Phase::kNew && in_use_);
  if (was == Phase::kNew && !in_use_) gone_early_.insert(client);
  if (breaks && !broken_by_) broken_by_ = client;
  auto released = breaks ? fence_failed() : maybe_complete_barrier();
  replies.insert(replies.end(), released.begin(), released.end());
  return breaks;
}

}  // namespace hpcq::agent::pmi
