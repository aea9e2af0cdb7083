// The hpcq command's calls to hpcqd: the local wire (lib/api/local_wire.h)
// on the unix socket named by $HPCQ_SOCKET (default /run/hpcq/hpcqd.sock;
// PATH:PATH: the leader's candidates, the first that takes the connection),
// one connection per call. The daemon knows the caller from the socket, so
// requests carry no identity. Not gRPC: the command would pay gRPC's start
// and teardown on every call, several times the call's own cost.
//
// A call rides out a failover (a leader killed, frozen or restarting): while
// hpcqd is unavailable it asks again, every candidate, with a short
// backoff, for HPCQ_RETRY_S seconds in all (RetryPolicy). What it may ask
// again depends on what it knows of the last try: a request that no
// candidate took may always go again; one that was sent but not answered
// only when asking twice does no harm (reads, cancel, hold, release,
// update, drain, resume, and Submit with its idempotency key: submit()).
// Slurm's commands do the same with the backup controllers, for
// MessageTimeout rounds a second apart (slurm_open_controller_conn).
#pragma once

#include <google/protobuf/message_lite.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "proto/hpcq.pb.h"

namespace hpcq::cli {

std::string socket_path();

// How long a call asks again while hpcqd is unavailable.
struct RetryPolicy {
  // In all, from the first try (HPCQ_RETRY_S, default 60 s; 0: one try).
  std::chrono::milliseconds total{60'000};
  // The wait for one try's answer, when asking again is safe
  // (HPCQ_MESSAGE_TIMEOUT_S, default 10 s, as Slurm's MessageTimeout): a
  // frozen leader still takes connections, and must not hold the call.
  std::chrono::milliseconds per_try{10'000};
  // kInvalidArgument naming the variable when one is not a number of seconds.
  static Result<RetryPolicy> from_environment();
};

// A new submission's idempotency key: 16 random bytes as 32 hex digits.
Result<std::string> new_submission_key();

// Calls to hpcqd's candidates. Errors are one-line Statuses: hpcqd's own,
// or kUnavailable "hpcqd is not reachable at PATH (why)", after the retries.
// Any thread; a Client may be shared.
class Client {
 public:
  explicit Client(std::string socket);
  // A copy starts with what the original knows of stalled candidates.
  Client(const Client& other);
  Client& operator=(const Client&) = delete;
  const std::string& socket() const { return socket_; }

  // A unary call of `method` (its name in hpcq.proto); `response` is filled
  // when it succeeds. With timeout_ms (the most to wait for the answer) one
  // try only; by default, tries as the header says.
  Status call(std::string_view method, const google::protobuf::MessageLite& request,
              google::protobuf::MessageLite* response, int timeout_ms = -1) const;

  // Submit, made at most once however often it is asked: the request gets
  // an idempotency key unless it has one, the same for every try, and so is
  // asked again as any call that is safe to repeat.
  Status submit(v1::SubmitRequest request, v1::SubmitResponse* response) const;

 private:
  friend class Stream;
  struct Opened {
    int fd = -1;
    std::size_t candidate = 0;  // index into paths_
  };
  // A connected socket that has sent the call (or began to: hpcqd may have
  // refused it before reading it all); kUnavailable when no candidate took
  // it. Candidates that have not stalled are tried first, in order, then
  // those that have, the longest ago first. `deadline_ms` bounds the
  // connection and the sending (-1: none).
  Result<Opened> open(std::string_view method, const google::protobuf::MessageLite& request,
                      int deadline_ms) const;
  // How far one try got.
  enum class Reached { kNobody, kSent, kAnswered };
  // What a call may ask again after a kUnavailable: a try no candidate
  // took (kUntilSent: any call); also one that was sent and not answered
  // (kUntilAnswered); also hpcqd's own kUnavailable answer, a daemon going
  // away (kAlways).
  enum class Repeat { kUntilSent, kUntilAnswered, kAlways };
  static Repeat repeat_of(std::string_view method);
  Status try_once(std::string_view method, const google::protobuf::MessageLite& request,
                  google::protobuf::MessageLite* response, int timeout_ms, Reached* reached) const;
  Status call_with_retries(std::string_view method, const google::protobuf::MessageLite& request,
                           google::protobuf::MessageLite* response, Repeat repeat) const;

  std::string socket_;
  std::vector<std::string> paths_;  // socket_'s candidates
  mutable std::mutex mutex_;
  // Per candidate: when it last took a call and did not answer in time
  // (time_point{}: never, or it has answered since). Guarded by mutex_.
  mutable std::vector<std::chrono::steady_clock::time_point> stalled_at_;
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

// Who speaks on stderr: "hpcq", or a Slurm command of compat/slurm, whose
// errors are "sbatch: error: ..." and exit 1 whatever they are, as Slurm's.
struct ErrorStyle {
  std::string program = "hpcq";
  bool slurm = false;
};
void set_error_style(ErrorStyle style);
// "hpcq: " (or "srun: "): what the command's notes on stderr start with.
const char* note_prefix();

// Exit codes: 0 ok, 2 bad input (invalid argument), 1 anything else.
int exit_code_of(const Status& status);

// Prints "hpcq: <message>" ("sbatch: error: <message>") on stderr;
// returns exit_code_of(status).
int fail(const Status& status);

// Now, for --begin and --start: microseconds since the epoch.
std::int64_t wall_clock_us();

// This process's environment, as a job's tasks get it (a variable whose
// name is not UTF-8 is left out, with a warning: the API carries names as
// text).
std::map<std::string, std::string> caller_environment();

}  // namespace hpcq::cli
