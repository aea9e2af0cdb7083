#include "cli/client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "lib/api/local_wire.h"
#include "lib/core/bytes.h"

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

}  // namespace

Result<int> Client::open(std::string_view method,
                         const google::protobuf::MessageLite& request) const {
  // Several sockets (PATH:PATH, the leader's candidates on one host): the
  // first that answers; only the active leader serves its socket.
  int fd = -1;
  Status why;
  for (std::size_t start = 0; fd < 0 && start <= socket_.size();) {
    std::size_t end = socket_.find(':', start);
    if (end == std::string::npos) end = socket_.size();
    const std::string path = socket_.substr(start, end - start);
    start = end + 1;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof addr.sun_path) {
      return invalid_argument("not a socket path: '" + path + "' (HPCQ_SOCKET)");
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size());
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return lost(socket_, unavailable(std::strerror(errno)));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      why = unavailable(std::strerror(errno));
      ::close(fd);
      fd = -1;
    }
  }
  if (fd < 0) return lost(socket_, why);
  local::Call call;
  call.set_method(std::string(method));
  request.SerializeToString(call.mutable_request());
  std::string bytes(wire::kMagic);
  const std::string body = call.SerializeAsString();
  bytes += wire::frame_header(body.size());
  bytes += body;
  // A write that fails may still have an answer to read (hpcqd refused the
  // request before reading it all): the caller reads next either way.
  (void)wire::write_all(fd, bytes);
  return fd;
}

Status Client::call(std::string_view method, const google::protobuf::MessageLite& request,
                    google::protobuf::MessageLite* response, int timeout_ms) const {
  auto fd = open(method, request);
  if (!fd.is_ok()) return fd.status();
  auto reply = read_reply(*fd, socket_, timeout_ms);
  ::close(*fd);
  if (!reply.is_ok()) return reply.status();
  Status status = wire::reply_status(*reply);
  if (status.is_ok() && !response->ParseFromString(reply->payload())) {
    return internal_error("hpcqd's answer to " + std::string(method) + " is malformed");
  }
  return status;
}

Stream::Stream(const Client& client, std::string_view method,
               const google::protobuf::MessageLite& request)
    : socket_(client.socket()) {
  auto fd = client.open(method, request);
  if (fd.is_ok()) {
    fd_ = *fd;
  } else {
    status_ = fd.status();
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

int exit_code_of(const Status& status) {
  if (status.is_ok()) return 0;
  return status.code() == Code::kInvalidArgument ? 2 : 1;
}

int fail(const Status& status) {
  std::fprintf(stderr, "hpcq: %s\n", status.message().c_str());
  return exit_code_of(status);
}

std::int64_t wall_clock_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<JobId> parse_job_id(const std::string& text) {
  JobId id = 0;
  size_t used = 0;
  try {
    id = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || id == 0 || text.empty() || text[0] == '-') {
    return invalid_argument("'" + text + "' is not a job id");
  }
  return id;
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
