// libFuzzer target: arbitrary bytes as what a job's tasks write on their PMI
// sockets (shell/pmi.h). The tasks are the user's programs: the job
// shell, which runs as root, must answer with whole lines (PMI-1) and whole
// messages whose length is right (PMI-2), and never crash, whatever they
// send. Each input line is "C<payload>": C % 4 picks one of three clients (3:
// a client goes away); a lower-case C (bit 0x20 set) feeds the payload as one
// PMI-1 line (on_line), an upper-case one as raw bytes (on_bytes: framing,
// PMI-2 messages; a '\r' in it stands for a newline). A line starting with
// '!' is a fence outcome from the other nodes instead (its rest decoded as
// the exchange's key=value lines).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "shell/pmi.h"

using hpcq::agent::pmi::kLengthWidth;
using hpcq::agent::pmi::Reply;

namespace {

void check(const std::vector<Reply>& replies) {
  for (const Reply& r : replies) {
    if (r.client >= 3 || r.text.empty()) std::abort();
    if (r.text.rfind("cmd=", 0) == 0) {  // PMI-1: one line
      if (r.text.back() != '\n' || r.text.find('\n') != r.text.size() - 1) std::abort();
      continue;
    }
    // PMI-2: its length, then pairs that decode, "cmd" first.
    if (r.text.size() < kLengthWidth) std::abort();
    const std::string length = r.text.substr(0, kLengthWidth);
    if (std::strtoul(length.c_str(), nullptr, 10) != r.text.size() - kLengthWidth) std::abort();
    auto pairs = hpcq::agent::pmi::decode_message(std::string_view(r.text).substr(kLengthWidth));
    if (!pairs.is_ok() || pairs->empty() || pairs->front().first != "cmd") std::abort();
    if (hpcq::agent::pmi::encode_message(*pairs) != r.text) std::abort();  // round trip
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  hpcq::agent::pmi::World world;
  world.kvsname = "hpcq_1_0";
  world.size = 6;
  world.nodes = 2;
  world.preset["PMI_process_mapping"] = "(vector,(0,2,3))";
  hpcq::agent::pmi::Server server(world, {0, 1, 2});
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    if (line[0] == '!') {
      auto kvs = hpcq::agent::pmi::decode_kvs(line.substr(1));
      check(kvs.is_ok() ? server.fence_done(server.fence_seq(), *kvs) : server.fence_failed());
      continue;
    }
    const std::size_t client = static_cast<unsigned char>(line[0]) % 4;
    if (client == 3) {  // a client goes away
      std::vector<Reply> replies;
      server.on_client_gone(static_cast<unsigned char>(line.size()) % 3, replies);
      check(replies);
      continue;
    }
    if (line[0] & 0x20) {
      check(server.on_line(client, line.substr(1)));
    } else {
      std::string bytes(line.substr(1));
      for (char& c : bytes) {
        if (c == '\r') c = '\n';
      }
      check(server.on_bytes(client, bytes));
    }
    if (server.fence_pending()) {
      auto back = hpcq::agent::pmi::decode_kvs(server.take_fence());
      if (!back.is_ok()) std::abort();  // what the server encodes, it decodes
    }
  }
  return 0;
}
