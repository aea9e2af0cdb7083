// libFuzzer target: arbitrary bytes as what a job's tasks write on their PMI
// sockets (agent/executor/pmi.h). The tasks are the user's programs: the job
// shell, which runs as root, must answer each line with whole lines and
// never crash, whatever they send. Each input line is "C<line>": C picks one
// of three clients; a line starting with '!' is a fence outcome from the
// other nodes instead (its rest decoded as the exchange's key=value lines).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agent/executor/pmi.h"

using hpcq::agent::pmi::Reply;

namespace {

void check(const std::vector<Reply>& replies) {
  for (const Reply& r : replies) {
    if (r.client >= 3 || r.line.empty() || r.line.back() != '\n' ||
        r.line.find('\n') != r.line.size() - 1) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  hpcq::agent::pmi::World world;
  world.kvsname = "hpcq_1_0";
  world.size = 6;
  world.nodes = 2;
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
    check(server.on_line(client, line.substr(1)));
    if (server.fence_pending()) {
      auto back = hpcq::agent::pmi::decode_kvs(server.take_fence());
      if (!back.is_ok()) std::abort();  // what the server encodes, it decodes
    }
  }
  return 0;
}
