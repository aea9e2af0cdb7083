// libFuzzer target: arbitrary bytes as what a local user's connection sends
// hpcqd on its unix socket, read as LocalApi reads a call (local_wire's
// read_call, through a real socket pair), and a Reply as the hpcq command
// reads one. Neither may crash, hang or allocate by what a header announces;
// anything malformed is refused with a reason.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "lib/api/local_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hpcq::api::local_wire;
  if (size > 1 << 16) return 0;  // within one socket buffer: the write below cannot block
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 0;
  (void)write_all(fds[0], std::string_view(reinterpret_cast<const char*>(data), size));
  ::shutdown(fds[0], SHUT_WR);
  std::size_t announced = 0;
  auto call = read_call(fds[1], /*max_bytes=*/1 << 20, /*timeout_ms=*/0, &announced);
  if (call.is_ok() && call->method().empty()) __builtin_trap();  // parse_call refuses those
  ::close(fds[0]);
  ::close(fds[1]);

  hpcq::local::Reply reply;
  if (reply.ParseFromArray(data, static_cast<int>(size))) (void)reply_status(reply);
  return 0;
}
