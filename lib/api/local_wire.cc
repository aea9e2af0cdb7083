#include "lib/api/local_wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hpcq::api::local_wire {

std::string frame_header(std::size_t size) {
  std::string header(kHeaderBytes, '\0');
  for (std::size_t i = 0; i < kHeaderBytes; ++i) {
    header[i] = static_cast<char>((size >> (8 * (kHeaderBytes - 1 - i))) & 0xff);
  }
  return header;
}

std::size_t frame_size(std::string_view header) {
  std::size_t size = 0;
  for (std::size_t i = 0; i < kHeaderBytes && i < header.size(); ++i) {
    size = (size << 8) | static_cast<unsigned char>(header[i]);
  }
  return size;
}

Result<local::Call> parse_call(std::string_view frame) {
  local::Call call;
  if (!call.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) {
    return invalid_argument("local wire: the call is not a Call message");
  }
  if (call.method().empty()) return invalid_argument("local wire: the call names no method");
  return call;
}

local::Reply make_reply(const Status& status, std::string payload, bool last) {
  local::Reply reply;
  reply.set_code(static_cast<std::uint32_t>(status.code()));
  if (status.is_ok()) {
    reply.set_payload(std::move(payload));
  } else {
    reply.set_message(status.message());
  }
  reply.set_last(last);
  return reply;
}

Status reply_status(const local::Reply& reply) {
  if (reply.code() == 0) return Status::ok();
  if (reply.code() > static_cast<std::uint32_t>(Code::kOutOfRange)) {
    return internal_error("hpcqd answered with unknown code " + std::to_string(reply.code()) +
                          ": " + reply.message());
  }
  return {static_cast<Code>(reply.code()), reply.message()};
}

namespace {

// Waits until fd is ready for `events`; false after timeout_ms.
bool wait_for(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  while (true) {
    int n = ::poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    return n > 0;
  }
}

}  // namespace

Status write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_for(fd, POLLOUT, -1);
      continue;
    }
    return unavailable(std::string("the connection closed (") + std::strerror(errno) + ")");
  }
  return Status::ok();
}

Status write_frame(int fd, std::string_view bytes) {
  std::string frame = frame_header(bytes.size());
  frame.append(bytes);
  return write_all(fd, frame);
}

Result<std::string> read_exactly(int fd, std::size_t n, int timeout_ms) {
  // Grown as bytes come, not sized by what the peer announced.
  std::string out;
  char buffer[1 << 16];
  while (out.size() < n) {
    // Waits first when bounded: on a blocking socket recv() would not return.
    if (timeout_ms >= 0 && !wait_for(fd, POLLIN, timeout_ms))
      return unavailable("no answer in time");
    ssize_t r = ::recv(fd, buffer, std::min(sizeof buffer, n - out.size()), 0);
    if (r > 0) {
      out.append(buffer, static_cast<std::size_t>(r));
      continue;
    }
    if (r == 0) return unavailable("the connection closed");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_for(fd, POLLIN, -1);
      continue;
    }
    return unavailable(std::string("the connection failed (") + std::strerror(errno) + ")");
  }
  return out;
}

Result<std::string> read_frame(int fd, std::size_t max_bytes, int timeout_ms,
                               std::size_t* announced) {
  auto header = read_exactly(fd, kHeaderBytes, timeout_ms);
  if (!header.is_ok()) return header.status();
  const std::size_t size = frame_size(*header);
  if (announced != nullptr) *announced = size;
  if (size > max_bytes) {
    return Status(Code::kResourceExhausted,
                  std::to_string(size) + " bytes, over the limit of " + std::to_string(max_bytes));
  }
  return read_exactly(fd, size, timeout_ms);
}

Result<local::Call> read_call(int fd, std::size_t max_bytes, int timeout_ms,
                              std::size_t* announced) {
  auto magic = read_exactly(fd, kMagic.size(), timeout_ms);
  if (!magic.is_ok()) return magic.status();
  if (*magic != kMagic) return unavailable("not the local wire");
  auto frame = read_frame(fd, max_bytes, timeout_ms, announced);
  if (!frame.is_ok()) return frame.status();
  return parse_call(*frame);
}

}  // namespace hpcq::api::local_wire
