// The hpcq command's calls to hpcqd: the local wire (lib/api/local_wire.h)
// on the unix socket named by $HPCQ_SOCKET (default /run/hpcq/hpcqd.sock;
// PATH:PATH: the first that takes the connection), one connection per call.
// The daemon knows the caller from the socket, so requests carry no
// identity. Not gRPC: the command would pay gRPC's start and teardown on
// every call, several times the call's own cost.
#pragma once

#include <google/protobuf/message_lite.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "proto/hpcq.pb.h"

namespace hpcq::cli {

std::string socket_path();

// Calls to one hpcqd. Errors are one-line Statuses: hpcqd's own, or
// kUnavailable "hpcqd is not reachable at PATH (why)".
class Client {
 public:
  explicit Client(std::string socket) : socket_(std::move(socket)) {}
  const std::string& socket() const { return socket_; }

  // A unary call of `method` (its name in hpcq.proto); `response` is filled
  // when it succeeds. timeout_ms bounds the wait for the answer (-1: none).
  Status call(std::string_view method, const google::protobuf::MessageLite& request,
              google::protobuf::MessageLite* response, int timeout_ms = -1) const;

 private:
  friend class Stream;
  // A connected socket that has sent the call; kUnavailable otherwise.
  Result<int> open(std::string_view method, const google::protobuf::MessageLite& request) const;

  std::string socket_;
};

// A streaming call (WatchJobs, WatchOutput): read() until false, then
// finish() for how it ended.
class Stream {
 public:
  Stream(const Client& client, std::string_view method,
         const google::protobuf::MessageLite& request);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // The next message; false at the end of the stream, on error or once
  // cancelled.
  bool read(google::protobuf::MessageLite* message);
  // How the stream ended: ok when hpcqd ended it or it was cancelled.
  Status finish() const { return status_; }
  // Any thread: ends the stream (read() returns false).
  void cancel();

 private:
  const std::string socket_;
  int fd_ = -1;
  bool done_ = false;
  std::atomic<bool> cancelled_{false};
  Status status_;
};

// Exit codes: 0 ok, 2 bad input (invalid argument), 1 anything else.
int exit_code_of(const Status& status);

// Prints "hpcq: <message>" on stderr; returns exit_code_of(status).
int fail(const Status& status);

// Now, for --begin and --start: microseconds since the epoch.
std::int64_t wall_clock_us();

// A job id as the user writes it ("12"); kInvalidArgument otherwise.
Result<JobId> parse_job_id(const std::string& text);

// This process's environment, as a job's tasks get it (a variable whose
// name is not UTF-8 is left out, with a warning: the API carries names as
// text).
std::map<std::string, std::string> caller_environment();

}  // namespace hpcq::cli
