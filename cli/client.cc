#include "cli/client.h"

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>

#include "lib/api/local_wire.h"
#include "lib/core/bytes.h"
#include "lib/core/protocol_version.h"

extern char** environ;

namespace hpcq::cli {

std::string socket_path() {
  const char* env = std::getenv("HPCQ_SOCKET");
  return env && *env ? env : "/run/hpcq/hpcqd.sock";
}

namespace {

namespace wire = api::local_wire;

// The most a reply may hold (a large queue listing).
constexpr std::size_t kMaxReplyBytes = 256 << 20;

Status lost(const std::string& socket, const Status& why) {
  return unavailable("hpcqd is not reachable at " + socket + " (" + why.message() + ")");
}

// The next Reply on fd.
Result<local::Reply> read_reply(int fd, const std::string& socket, int timeout_ms) {
  auto frame = wire::read_frame(fd, kMaxReplyBytes, timeout_ms);
  if (!frame.is_ok()) return lost(socket, frame.status());
  local::Reply reply;
  if (!reply.ParseFromString(*frame)) return internal_error("hpcqd's reply is malformed");
  return reply;
}

// Seconds from variable `name` (a number, 0..max), or `fallback` when unset.
Result<std::chrono::milliseconds> seconds_from_env(const char* name, double max,
                                                   std::chrono::milliseconds fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const double seconds = std::strtod(text, &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(seconds) || seconds < 0 || seconds > max) {
    return invalid_argument(std::string(name) + ": want seconds, 0 to " +
                            std::to_string(static_cast<int>(max)) + ", got '" + text + "'");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

int ms_until(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<std::int64_t>(left.count(), 0));
}

// Writes all of `bytes` on a non-blocking fd by `deadline`.
Status write_by(int fd, std::string_view bytes, std::chrono::steady_clock::time_point deadline) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, ms_until(deadline)) == 0) return unavailable("no answer in time");
      continue;
    }
    return unavailable(std::string("the connection closed (") + std::strerror(errno) + ")");
  }
  return Status::ok();
}

}  // namespace

Result<RetryPolicy> RetryPolicy::from_environment() {
  RetryPolicy policy;
  auto total = seconds_from_env("HPCQ_RETRY_S", 86400, policy.total);
  if (!total.is_ok()) return total.status();
  auto per_try = seconds_from_env("HPCQ_MESSAGE_TIMEOUT_S", 3600, policy.per_try);
  if (!per_try.is_ok()) return per_try.status();
  policy.total = *total;
  policy.per_try = std::max(*per_try, std::chrono::milliseconds(1));
  return policy;
}

Result<std::string> new_submission_key() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return internal_error(std::string("getrandom: ") + std::strerror(errno));
    got += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string key;
  for (unsigned char b : bytes) {
    key += kHex[b >> 4];
    key += kHex[b & 15];
  }
  return key;
}

Client::Client(std::string socket) : socket_(std::move(socket)) {
  for (std::size_t start = 0; start <= socket_.size();) {
    std::size_t end = socket_.find(':', start);
    if (end == std::string::npos) end = socket_.size();
    paths_.push_back(socket_.substr(start, end - start));
    start = end + 1;
  }
  stalled_at_.resize(paths_.size());
}

Client::Client(const Client& other) : socket_(other.socket_), paths_(other.paths_) {
  std::lock_guard lock(other.mutex_);
  stalled_at_ = other.stalled_at_;
}

Result<Client::Opened> Client::open(std::string_view method,
                                    const google::protobuf::MessageLite& request,
                                    int deadline_ms) const {
  const bool bounded = deadline_ms >= 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
  // Several sockets (PATH:PATH, the leader's candidates on one host): the
  // first that takes the connection; only the active leader serves its
  // socket. A frozen one still takes connections (the kernel queues them):
  // it goes last once it has let a call wait.
  std::vector<std::size_t> order(paths_.size());
  std::iota(order.begin(), order.end(), 0);
  {
    std::lock_guard lock(mutex_);
    std::stable_sort(order.begin(), order.end(), [this](std::size_t a, std::size_t b) {
      return stalled_at_[a] < stalled_at_[b];
    });
  }
  int fd = -1;
  std::size_t candidate = 0;
  Status why;
  for (std::size_t i : order) {
    const std::string& path = paths_[i];
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof addr.sun_path) {
      return invalid_argument("not a socket path: '" + path + "' (HPCQ_SOCKET)");
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size());
    // Bounded: non-blocking, so that a candidate whose queue of connections
    // is full is passed over (EAGAIN) rather than waited for.
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (bounded ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) return lost(socket_, unavailable(std::strerror(errno)));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      candidate = i;
      break;
    }
    why = unavailable(std::strerror(errno));
    ::close(fd);
    fd = -1;
  }
  if (fd < 0) return lost(socket_, why);
  local::Call call;
  call.set_method(std::string(method));
  call.set_protocol_version(kProtocolVersion);
  request.SerializeToString(call.mutable_request());
  std::string bytes(wire::kMagic);
  const std::string body = call.SerializeAsString();
  bytes += wire::frame_header(body.size());
  bytes += body;
  // A write that fails may still have an answer to read (hpcqd refused the
  // request before reading it all): the caller reads next either way.
  if (bounded) {
    (void)write_by(fd, bytes, deadline);
  } else {
    (void)wire::write_all(fd, bytes);
  }
  return Opened{fd, candidate};
}

Client::Repeat Client::repeat_of(std::string_view method) {
  // Asking these twice does no more than asking once: reads, and writes
  // that set a state (a second cancel of a job the first ended says so).
  // Not Signal, Requeue, SendInput, LaunchStep, Checkpoint, Resize,
  // EndAllocation, CreateReservation, nor Submit without a key (submit()):
  // each would act twice.
  static constexpr std::string_view kReads[] = {"GetJob",     "ListJobs",    "ListNodes",
                                                "ListQueues", "ListLeaders", "ListReservations"};
  static constexpr std::string_view kSettings[] = {"Cancel", "Hold",   "Release",          "Update",
                                                   "Drain",  "Resume", "DeleteReservation"};
  auto in = [method](const auto& list) {
    return std::find(std::begin(list), std::end(list), method) != std::end(list);
  };
  if (in(kReads) || in(kSettings)) return Repeat::kAlways;
  // A read too, but its kUnavailable answer says the job has not started:
  // the command reports it rather than wait for the start.
  if (method == "Stat") return Repeat::kUntilAnswered;
  return Repeat::kUntilSent;
}

Status Client::try_once(std::string_view method, const google::protobuf::MessageLite& request,
                        google::protobuf::MessageLite* response, int timeout_ms,
                        Reached* reached) const {
  *reached = Reached::kNobody;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto opened = open(method, request, timeout_ms);
  if (!opened.is_ok()) return opened.status();
  *reached = Reached::kSent;
  auto reply = read_reply(opened->fd, socket_, timeout_ms < 0 ? -1 : ms_until(deadline));
  ::close(opened->fd);
  {
    std::lock_guard lock(mutex_);
    const bool stalled = !reply.is_ok() && timeout_ms >= 0 && ms_until(deadline) == 0;
    stalled_at_[opened->candidate] =
        stalled ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  }
  if (!reply.is_ok()) return reply.status();
  *reached = Reached::kAnswered;
  Status status = wire::reply_status(*reply);
  if (status.is_ok() && !response->ParseFromString(reply->payload())) {
    return internal_error("hpcqd's answer to " + std::string(method) + " is malformed");
  }
  return status;
}

Status Client::call_with_retries(std::string_view method,
                                 const google::protobuf::MessageLite& request,
                                 google::protobuf::MessageLite* response, Repeat repeat) const {
  auto policy = RetryPolicy::from_environment();
  if (!policy.is_ok()) return policy.status();
  const auto start = std::chrono::steady_clock::now();
  const auto give_up = start + policy->total;
  auto pause = std::chrono::milliseconds(100);
  bool said = false;
  for (;;) {
    Reached reached = Reached::kNobody;
    // Once sent, a call that may not be repeated waits as long as it takes
    // (a checkpoint, a resize): asking again could act twice.
    const int timeout_ms =
        repeat == Repeat::kUntilSent ? -1 : static_cast<int>(policy->per_try.count());
    Status s = try_once(method, request, response, timeout_ms, &reached);
    const bool again = reached == Reached::kNobody ||
                       (reached == Reached::kSent && repeat != Repeat::kUntilSent) ||
                       repeat == Repeat::kAlways;
    if (s.code() != Code::kUnavailable || !again) return s;
    const auto now = std::chrono::steady_clock::now();
    if (now + pause >= give_up) {
      if (policy->total.count() == 0) return s;
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start).count();
      return unavailable(s.message() + "; asked for " + std::to_string(waited) +
                         " s (HPCQ_RETRY_S)");
    }
    if (!said && isatty(2)) {
      std::fprintf(stderr, "hpcq: %s; asking again for up to %lld s\n", s.message().c_str(),
                   static_cast<long long>(
                       std::chrono::duration_cast<std::chrono::seconds>(policy->total).count()));
      said = true;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
}

Status Client::call(std::string_view method, const google::protobuf::MessageLite& request,
                    google::protobuf::MessageLite* response, int timeout_ms) const {
  if (timeout_ms >= 0) {
    Reached reached = Reached::kNobody;
    return try_once(method, request, response, timeout_ms, &reached);
  }
  return call_with_retries(method, request, response, repeat_of(method));
}

Status Client::submit(v1::SubmitRequest request, v1::SubmitResponse* response) const {
  if (request.submission_key().empty()) {
    auto key = new_submission_key();
    if (!key.is_ok()) return key.status();
    request.set_submission_key(*key);
  }
  return call_with_retries("Submit", request, response, Repeat::kAlways);
}

Stream::Stream(const Client& client, std::string_view method,
               const google::protobuf::MessageLite& request)
    : socket_(client.socket()) {
  auto opened = client.open(method, request, /*deadline_ms=*/-1);
  if (opened.is_ok()) {
    fd_ = opened->fd;
  } else {
    status_ = opened.status();
    done_ = true;
  }
}

Stream::~Stream() {
  if (fd_ >= 0) ::close(fd_);
}

bool Stream::read(google::protobuf::MessageLite* message) {
  if (done_) return false;
  auto reply = read_reply(fd_, socket_, -1);
  if (cancelled_) {
    done_ = true;
    status_ = Status::ok();
    return false;
  }
  if (!reply.is_ok()) {
    done_ = true;
    status_ = reply.status();
    return false;
  }
  if (reply->last()) {
    done_ = true;
    status_ = wire::reply_status(*reply);
    return false;
  }
  if (!message->ParseFromString(reply->payload())) {
    done_ = true;
    status_ = internal_error("hpcqd's stream message is malformed");
    return false;
  }
  return true;
}

void Stream::cancel() {
  cancelled_ = true;
  // Wakes a read() blocked in another thread; the fd stays open until then.
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

namespace {
ErrorStyle error_style;
std::string notes = "hpcq: ";
}  // namespace

void set_error_style(ErrorStyle style) {
  error_style = std::move(style);
  notes = error_style.program + ": ";
}

const char* note_prefix() { return notes.c_str(); }

int exit_code_of(const Status& status) {
  if (status.is_ok()) return 0;
  return status.code() == Code::kInvalidArgument && !error_style.slurm ? 2 : 1;
}

int fail(const Status& status) {
  std::fprintf(stderr, "%s%s%s\n", notes.c_str(), error_style.slurm ? "error: " : "",
               status.message().c_str());
  return exit_code_of(status);
}

std::int64_t wall_clock_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::map<std::string, std::string> caller_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    if (!hpcq::is_utf8(kv.substr(0, eq))) {
      std::fprintf(stderr,
                   "hpcq: warning: an environment variable whose name is not UTF-8 "
                   "is not passed to the job\n");
      continue;
    }
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

}  // namespace hpcq::cli
