// The local wire (proto/local.proto): hpcq's own framing of one API call on
// the unix socket, spoken by the hpcq command and served by hpcqd beside
// gRPC on the same socket. It exists for start-up cost: a command that links
// gRPC pays its initialisation (threads, an HTTP/2 handshake, a teardown) on
// every call, several times what the call itself costs.
//
// A connection: the client writes kMagic, then one frame holding a Call; the
// server answers with frames holding Replies, the last with `last` set. A
// frame is a 4-byte big-endian length and that many bytes. Either side may
// close at any time; the client cancels a stream by closing.
//
// The fd helpers work on blocking and non-blocking sockets alike (they poll).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "lib/core/status.h"
#include "proto/local.pb.h"

namespace hpcq::api::local_wire {

// A local-wire connection's first bytes (an HTTP/2 client's are "PRI ").
inline constexpr std::string_view kMagic = "HPQ1";
inline constexpr std::size_t kHeaderBytes = 4;

// The frame header for `size` bytes.
std::string frame_header(std::size_t size);
// The size a frame header announces.
std::size_t frame_size(std::string_view header);

// A Call from a frame's bytes; kInvalidArgument when they are not one.
Result<local::Call> parse_call(std::string_view frame);

// The Reply for `status` (a failed status carries no payload).
local::Reply make_reply(const Status& status, std::string payload, bool last);
// The Status a Reply carries (an unknown code is an internal error).
Status reply_status(const local::Reply& reply);

// Writes all of `bytes`; kUnavailable once the peer has gone.
Status write_all(int fd, std::string_view bytes);
// A frame holding `bytes`.
Status write_frame(int fd, std::string_view bytes);
// Exactly n bytes. kUnavailable on end of file or after timeout_ms (-1: no
// limit) without progress.
Result<std::string> read_exactly(int fd, std::size_t n, int timeout_ms);
// One frame. kResourceExhausted ("N bytes, over the limit of M") when it
// announces more than max_bytes, its bytes left unread; otherwise as
// read_exactly.
// `announced` (may be null) gets the size the header announced, read or not.
Result<std::string> read_frame(int fd, std::size_t max_bytes, int timeout_ms,
                               std::size_t* announced = nullptr);

// What a client sends: kMagic, then a frame holding a Call. kUnavailable when
// the connection ends or stalls (timeout_ms) before it is whole or does not
// start with kMagic: nothing to answer. kResourceExhausted as read_frame,
// with the size the frame announced in `announced`. kInvalidArgument when
// the frame is not a Call.
Result<local::Call> read_call(int fd, std::size_t max_bytes, int timeout_ms,
                              std::size_t* announced);

}  // namespace hpcq::api::local_wire
