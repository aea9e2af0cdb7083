#include "agent/call_forwarder.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <utility>

#include "agent/executor/posix.h"
#include "lib/api/local_wire.h"

namespace hpcq::agent {

namespace wire = api::local_wire;

namespace {

// How long a client may take to send its call once connected (as hpcqd's).
constexpr int kCallTimeoutMs = 10'000;

void wake(int fd) {
  const std::uint64_t one = 1;
  ssize_t ignored = ::write(fd, &one, sizeof one);
  (void)ignored;
}

// A failed call's one reply.
std::string failure(const Status& status) {
  return wire::make_reply(status, "", /*last=*/true).SerializeAsString();
}

}  // namespace

CallForwarder::CallForwarder(Post post, Send send, std::size_t max_request_bytes)
    : post_(std::move(post)),
      send_(std::move(send)),
      max_request_bytes_(max_request_bytes),
      // Ids of an earlier run of this agent may still be in flight at the
      // leader: start somewhere else.
      next_id_(std::uint64_t{std::random_device()()} << 20) {}

CallForwarder::~CallForwarder() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  if (stop_fd_ >= 0) wake(stop_fd_);
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(path_.c_str());
  }
  fail_all(unavailable("the node's agent is stopping"));
  std::unique_lock lock(mutex_);
  if (!idle_.wait_for(lock, std::chrono::seconds(3), [this] { return threads_ == 0; })) {
    spdlog::warn("agent: {} forwarded call(s) still in flight at shutdown", threads_);
  }
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

Status CallForwarder::start(const std::string& path) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return invalid_argument("agent socket '" + path + "': not a unix socket path");
  }
  path_ = path;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (listen_fd_ < 0 || stop_fd_ < 0) return unavailable("agent socket: " + errno_text(errno));
  ::unlink(path.c_str());  // an earlier agent's
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::chmod(path.c_str(), 0666) != 0 || ::listen(listen_fd_, 128) != 0) {
    const std::string why = errno_text(errno);
    ::close(listen_fd_);
    listen_fd_ = -1;
    return unavailable("agent socket " + path + ": " + why);
  }
  acceptor_ = std::thread([this] { accept_loop(); });
  return Status::ok();
}

void CallForwarder::accept_loop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) {
        ::close(fd);
        return;
      }
      ++threads_;
    }
    std::thread([this, fd] {
      serve(fd);
      ::close(fd);
      std::lock_guard lock(mutex_);
      --threads_;
      idle_.notify_all();
    }).detach();
  }
}

void CallForwarder::serve(int fd) {
  std::size_t size = 0;
  auto call = wire::read_call(fd, max_request_bytes_, kCallTimeoutMs, &size);
  if (call.status().code() == Code::kUnavailable) return;  // gone, silent or not ours
  if (!call.is_ok()) {
    const Status why =
        call.status().code() == Code::kResourceExhausted
            ? invalid_argument("the request is " + std::to_string(size) +
                               " bytes, over the limit of " + std::to_string(max_request_bytes_))
            : call.status();
    (void)wire::write_frame(fd, failure(why));
    return;
  }
  ucred peer{};
  socklen_t length = sizeof peer;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
    (void)wire::write_frame(fd, failure(unavailable("the caller's identity is unknown")));
    return;
  }
  const std::uint64_t id = next_id_++;
  auto state = std::make_shared<Call>();
  state->wake_fd = ::eventfd(0, EFD_CLOEXEC);
  if (state->wake_fd < 0) {
    (void)wire::write_frame(fd, failure(unavailable("eventfd: " + errno_text(errno))));
    return;
  }
  {
    std::lock_guard lock(mutex_);
    calls_[id] = state;
  }
  overlay::Envelope envelope;
  envelope.set_dst(0);
  overlay::ForwardedCall* forwarded = envelope.mutable_forwarded_call();
  forwarded->set_id(id);
  forwarded->set_uid(peer.uid);
  forwarded->set_gid(peer.gid);
  forwarded->set_pid(peer.pid);
  forwarded->set_call(call->SerializeAsString());
  post_([this, id, envelope = std::move(envelope)]() mutable {
    if (!send_(std::move(envelope))) {
      deliver(id, failure(unavailable("hpcqd is not reachable from this node now")), true);
    }
  });

  const bool cancelled = !relay_replies(fd, *state);
  {
    std::lock_guard lock(mutex_);
    calls_.erase(id);
  }
  ::close(state->wake_fd);
  state->wake_fd = -1;
  if (cancelled) {
    post_([this, id] {
      overlay::Envelope cancel;
      cancel.set_dst(0);
      cancel.mutable_forwarded_cancel()->set_id(id);
      (void)send_(std::move(cancel));
    });
  }
}

bool CallForwarder::relay_replies(int fd, Call& state) {
  bool cancelled = false;
  for (bool end = false; !end;) {
    pollfd fds[2] = {{state.wake_fd, POLLIN, 0}, {fd, POLLRDHUP, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      cancelled = true;
      break;
    }
    if (fds[0].revents != 0) {
      std::uint64_t count = 0;
      ssize_t ignored = ::read(state.wake_fd, &count, sizeof count);
      (void)ignored;
      std::deque<std::string> frames;
      {
        std::lock_guard lock(state.mutex);
        frames.swap(state.frames);
        end = state.end;
      }
      for (const std::string& frame : frames) {
        if (!wire::write_frame(fd, frame).is_ok()) {
          cancelled = !end;
          end = true;
          break;
        }
      }
      continue;
    }
    if (fds[1].revents != 0) {
      cancelled = true;
      break;
    }
  }
  return !cancelled;
}

void CallForwarder::deliver(std::uint64_t id, std::string frame, bool end) {
  std::lock_guard lock(mutex_);
  auto it = calls_.find(id);
  if (it == calls_.end()) return;  // over, or cancelled meanwhile
  Call& call = *it->second;
  std::lock_guard call_lock(call.mutex);
  if (call.end) return;  // already failed (a reroute)
  if (!frame.empty()) call.frames.push_back(std::move(frame));
  call.end = end;
  wake(call.wake_fd);
}

void CallForwarder::on_reply(const overlay::ForwardedReply& reply) {
  deliver(reply.id(), reply.frame(), reply.end());
}

void CallForwarder::on_reroute() {
  fail_all(unavailable("the way to hpcqd changed (a new leader, or a link lost): try again"));
}

void CallForwarder::fail_all(const Status& why) {
  std::lock_guard lock(mutex_);
  for (const auto& [id, call] : calls_) {
    std::lock_guard call_lock(call->mutex);
    if (call->end) continue;
    call->frames.push_back(failure(why));
    call->end = true;
    wake(call->wake_fd);
  }
}

}  // namespace hpcq::agent
