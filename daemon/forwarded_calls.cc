#include "daemon/forwarded_calls.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "lib/api/local_wire.h"

namespace hpcq::daemon {

namespace wire = api::local_wire;

namespace {

// Replies are bounded by what LocalApi writes, not by the request limit: a
// listing of a large queue is one frame.
constexpr std::size_t kMaxReplyBytes = std::size_t{1} << 31;

// A ForwardedReply to call `id` of rank `to`, to be filled.
overlay::Envelope reply_to(Rank to, std::uint64_t id) {
  overlay::Envelope envelope;
  envelope.set_dst(to);
  envelope.mutable_forwarded_reply()->set_id(id);
  return envelope;
}

}  // namespace

ForwardedCalls::ForwardedCalls(LocalApi& local, PeerCredentials& credentials, Send send)
    : local_(local), credentials_(credentials), send_(std::move(send)) {}

ForwardedCalls::~ForwardedCalls() {
  std::unique_lock lock(mutex_);
  stopping_ = true;
  for (const auto& [key, fd] : relays_) ::shutdown(fd, SHUT_RDWR);
  if (!idle_.wait_for(lock, std::chrono::seconds(3), [this] { return relays_.empty(); })) {
    spdlog::warn("api: {} forwarded call(s) still in flight at shutdown", relays_.size());
  }
}

void ForwardedCalls::on_call(Rank from, const overlay::ForwardedCall& call) {
  auto answer_now = [&](const Status& status) {
    overlay::Envelope envelope = reply_to(from, call.id());
    overlay::ForwardedReply* reply = envelope.mutable_forwarded_reply();
    reply->set_frame(wire::make_reply(status, "", /*last=*/true).SerializeAsString());
    reply->set_end(true);
    send_(std::move(envelope));
  };
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    answer_now(unavailable("hpcqd cannot take the call now (socketpair failed)"));
    return;
  }
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || !relays_.emplace(Key{from, call.id()}, pair[1]).second) {
      ::close(pair[0]);
      ::close(pair[1]);
      answer_now(stopping_ ? unavailable("hpcqd is shutting down")
                           : invalid_argument("a forwarded call with this id is in flight"));
      return;
    }
  }
  Caller caller;
  caller.uid = call.uid();
  caller.gid = call.gid();
  caller.pid = call.pid();
  credentials_.record(pair[0], caller);
  local_.serve(pair[0]);  // closes it when the call is over
  std::thread([this, from, id = call.id(), fd = pair[1], bytes = call.call()] {
    if (!wire::write_all(fd, wire::kMagic).is_ok() || !wire::write_frame(fd, bytes).is_ok()) {
      spdlog::debug("api: forwarded call {} of rank {}: ended before it was sent", id, from);
    }
    relay(from, id, fd);
  }).detach();
}

void ForwardedCalls::relay(Rank from, std::uint64_t id, int fd) {
  // Until LocalApi closes its end (the call is over) or a cancel shuts ours.
  for (;;) {
    auto frame = wire::read_frame(fd, kMaxReplyBytes, /*timeout_ms=*/-1);
    if (!frame.is_ok()) break;
    overlay::Envelope envelope = reply_to(from, id);
    envelope.mutable_forwarded_reply()->set_frame(std::move(frame).value());
    send_(std::move(envelope));
  }
  overlay::Envelope end = reply_to(from, id);
  end.mutable_forwarded_reply()->set_end(true);
  send_(std::move(end));
  std::lock_guard lock(mutex_);
  relays_.erase(Key{from, id});
  ::close(fd);
  idle_.notify_all();
}

void ForwardedCalls::on_cancel(Rank from, const overlay::ForwardedCancel& cancel) {
  std::lock_guard lock(mutex_);
  auto it = relays_.find(Key{from, cancel.id()});
  if (it != relays_.end()) ::shutdown(it->second, SHUT_RDWR);
}

}  // namespace hpcq::daemon
