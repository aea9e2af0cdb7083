#include "daemon/local_api.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "lib/api/local_wire.h"
#include "lib/core/protocol_version.h"

namespace hpcq::daemon {

namespace wire = api::local_wire;

namespace {

// How long a client may take to send its call once connected.
constexpr int kCallTimeoutMs = 10'000;

// False when the reader has gone, which is the end of the call either way.
bool reply(int fd, const Status& status, std::string payload, bool last) {
  return wire::write_frame(fd,
                           wire::make_reply(status, std::move(payload), last).SerializeAsString())
      .is_ok();
}

// A stream's messages as Replies on fd.
template <class Message>
class ReplySink final : public Sink<Message> {
 public:
  ReplySink(int fd, std::function<bool()> stopping) : fd_(fd), stopping_(std::move(stopping)) {}
  bool write(const Message& message) override {
    return reply(fd_, Status::ok(), message.SerializeAsString(), /*last=*/false);
  }
  // The client cancels by closing; it sends nothing after its call.
  bool cancelled() override {
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    return stopping_() || (::poll(&p, 1, 0) > 0 && p.revents != 0);
  }

 private:
  int fd_;
  std::function<bool()> stopping_;
};

}  // namespace

LocalApi::LocalApi(Api& api, Authenticator& authenticator, std::size_t max_request_bytes)
    : api_(api), authenticator_(authenticator), max_request_bytes_(max_request_bytes) {
  add("Submit", &Api::submit);
  add("Cancel", &Api::cancel);
  add("GetJob", &Api::get_job);
  add("ListJobs", &Api::list_jobs);
  add("ListNodes", &Api::list_nodes);
  add("ListQueues", &Api::list_queues);
  add("ListLeaders", &Api::list_leaders);
  add("Hold", &Api::hold);
  add("Release", &Api::release);
  add("Checkpoint", &Api::checkpoint);
  add("Resize", &Api::resize);
  add("Drain", &Api::drain);
  add("Resume", &Api::resume);
  add("CreateReservation", &Api::create_reservation);
  add("DeleteReservation", &Api::delete_reservation);
  add("ListReservations", &Api::list_reservations);
  add("Signal", &Api::signal);
  add("Requeue", &Api::requeue);
  add("EndAllocation", &Api::end_allocation);
  add("Update", &Api::update);
  add("Stat", &Api::stat);
  add("SendInput", &Api::send_input);
  add("LaunchStep", &Api::launch_step);
  add("WatchJobs", &Api::watch_jobs);
  add("WatchOutput", &Api::watch_output);
}

LocalApi::~LocalApi() { stop(); }

template <class Request, class Response>
void LocalApi::add(const char* method,
                   Status (Api::*call)(const Caller&, const Request&, Response*)) {
  handlers_[method] = [this, call, method](const Caller& caller, const std::string& bytes, int fd) {
    Request request;
    if (!request.ParseFromString(bytes)) {
      reply(fd, invalid_argument(std::string(method) + ": the request is malformed"), "", true);
      return;
    }
    Response response;
    Status status = (api_.*call)(caller, request, &response);
    reply(fd, status, status.is_ok() ? response.SerializeAsString() : "", true);
  };
}

template <class Request, class Message>
void LocalApi::add(const char* method,
                   Status (Api::*call)(const Caller&, const Request&, Sink<Message>&)) {
  handlers_[method] = [this, call, method](const Caller& caller, const std::string& bytes, int fd) {
    Request request;
    if (!request.ParseFromString(bytes)) {
      reply(fd, invalid_argument(std::string(method) + ": the request is malformed"), "", true);
      return;
    }
    ReplySink<Message> sink(fd, [this] { return stopping(); });
    reply(fd, (api_.*call)(caller, request, sink), "", true);
  };
}

bool LocalApi::stopping() const {
  std::lock_guard lock(mutex_);
  return stopping_;
}

void LocalApi::serve(int fd) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || open_.size() >= static_cast<std::size_t>(kMaxCalls)) {
      reply(fd,
            stopping_ ? unavailable("hpcqd is shutting down")
                      : Status(Code::kResourceExhausted, "hpcqd has " + std::to_string(kMaxCalls) +
                                                             " local calls in flight; try again"),
            "", true);
      ::close(fd);
      return;
    }
    open_.insert(fd);
  }
  std::thread([this, fd] {
    run(fd);
    std::lock_guard lock(mutex_);
    open_.erase(fd);
    ::close(fd);
    idle_.notify_all();
  }).detach();
}

void LocalApi::run(int fd) {
  std::size_t size = 0;
  auto call = wire::read_call(fd, max_request_bytes_, kCallTimeoutMs, &size);
  if (call.status().code() == Code::kUnavailable) return;  // gone, silent or not ours
  if (call.status().code() == Code::kResourceExhausted) {
    reply(fd,
          invalid_argument("the request is " + std::to_string(size) +
                           " bytes, over hpcqd's limit of " + std::to_string(max_request_bytes_) +
                           " ([api] max_message_bytes in hpcq.toml)"),
          "", true);
    // Read what the client still sends (bounded by the header's size), so
    // that closing with unread bytes does not reset the reply away.
    ::shutdown(fd, SHUT_WR);
    for (std::size_t left = size; left > 0;) {
      auto got = wire::read_exactly(fd, std::min<std::size_t>(left, 1 << 16), kCallTimeoutMs);
      if (!got.is_ok()) break;
      left -= got->size();
    }
    return;
  }
  if (!call.is_ok()) {
    reply(fd, call.status(), "", true);
    return;
  }
  // Before the method: a newer command's may be one this hpcqd lacks.
  if (const ProtocolCheck check = check_client_protocol(call->protocol_version());
      !check.accepted()) {
    reply(fd, failed_precondition(check.reason), "", true);
    return;
  }
  auto handler = handlers_.find(call->method());
  if (handler == handlers_.end()) {
    reply(fd, Status(Code::kInvalidArgument, "unknown method '" + call->method() + "'"), "", true);
    return;
  }
  auto caller = authenticator_.authenticate("fd:" + std::to_string(fd), std::nullopt, std::nullopt);
  if (!caller.is_ok()) {
    reply(fd, caller.status(), "", true);
    return;
  }
  try {
    handler->second(*caller, call->request(), fd);
  } catch (const std::exception&) {
    // A Leader call whose promise broke: the loop stopped under it.
    reply(fd, unavailable("hpcqd is shutting down"), "", true);
  }
}

void LocalApi::stop() {
  std::unique_lock lock(mutex_);
  if (stopping_) return;
  stopping_ = true;
  for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
  if (!idle_.wait_for(lock, std::chrono::seconds(3), [this] { return open_.empty(); })) {
    spdlog::warn("api: {} local call(s) still in flight at shutdown", open_.size());
  }
}

}  // namespace hpcq::daemon
