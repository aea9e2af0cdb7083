#include "agent/executor/shell_channel.h"

#include <errno.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>

#include "agent/executor/posix.h"

namespace hpcq::agent {

void ShellChannel::read(const Sink& sink) {
  if (listen_fd >= 0 && fd < 0) {
    const int accepted = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (accepted >= 0) {  // the shell's tasks use PMI across nodes now: the channel is open
      fd = accepted;
      open = true;
      awaiting_handoff = true;
      close_fd(listen_fd);
    }
  }
  if (fd < 0 || (awaiting_handoff && !take_handoff(sink))) return;
  static char frame[kOutputFrameData + 64];
  for (;;) {
    const ssize_t n = recv(fd, frame, sizeof frame, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) {
      take_frame(sink, std::string_view(frame, static_cast<size_t>(n)));
      continue;
    }
    // The shell has ended (or the socket failed).
    if (n == 0 || errno != EAGAIN) close_fd(fd);
    return;
  }
}

bool ShellChannel::take_handoff(const Sink& sink) {
  Received got = receive_fd(fd);
  if (got.kind == Received::Kind::kNothingYet) return false;
  awaiting_handoff = false;
  if (got.kind == Received::Kind::kClosed) {
    close_fd(fd);
    return false;
  }
  if (got.fd >= 0) {
    ::close(fd);
    fd = got.fd;
    fcntl(fd, F_SETFL, O_NONBLOCK);
  } else {
    take_frame(sink, got.data);
  }
  send_queued();  // what came for it before (modex requests)
  return true;
}

void ShellChannel::take_frame(const Sink& sink, std::string_view frame) {
  auto decoded = decode_output_frame(frame);
  if (!decoded.is_ok()) {
    spdlog::warn("job {}: {}", sink.id, decoded.status().message());
    return;
  }
  if (decoded->failure_code) {
    PmiEvent failure;
    failure.kind = PmiEvent::Kind::kFailure;
    failure.id = sink.id;
    failure.step = sink.step;
    failure.code = *decoded->failure_code;
    failure.seen_at = decoded->failure_seen_at;
    failure.data = std::move(decoded->data);
    sink.events.push_back(std::move(failure));
    return;
  }
  if (decoded->modex) {
    take_modex_frame(sink, std::move(*decoded->modex));
    return;
  }
  if (decoded->fence) {
    take_fence_frame(sink, *decoded->fence);
    return;
  }
  sink.output.push_back(
      {sink.id, sink.step, decoded->rank, decoded->is_stderr, std::move(decoded->data)});
}

void ShellChannel::take_fence_frame(const Sink& sink, const FenceFrame& frame) {
  // The shell's server refuses puts past the limit: more comes only from a
  // channel written to by hand, and goes no further.
  fence_too_big_ = fence_too_big_ || fence_data_.size() + frame.data.size() > sink.max_kvs_bytes;
  if (fence_too_big_) {
    std::string().swap(fence_data_);
  } else {
    fence_data_ += frame.data;
  }
  if (!frame.last) return;
  PmiEvent event;
  event.id = sink.id;
  event.step = sink.step;
  if (fence_too_big_) {
    fence_too_big_ = false;
    event.kind = PmiEvent::Kind::kFailure;
    event.code = 1;
    event.data = "this node's part of PMI fence " + std::to_string(frame.seq) +
                 " passed the limit of " + std::to_string(sink.max_kvs_bytes) +
                 " bytes ([agent] pmi_max_kvs_bytes)";
  } else {
    event.seq = frame.seq;
    event.nodes = pmi_nodes;
    event.world = pmi_node_ranks;
    event.data = std::exchange(fence_data_, {});
  }
  sink.events.push_back(std::move(event));
}

void ShellChannel::take_modex_frame(const Sink& sink, ModexFrame frame) {
  PmiEvent event;
  event.id = sink.id;
  event.step = sink.step;
  event.tag = frame.tag;
  if (frame.kind == ModexFrame::Kind::kRequest) {
    event.kind = PmiEvent::Kind::kModexRequest;
    event.rank = frame.rank;
    event.node = frame.node;
    sink.events.push_back(std::move(event));
    return;
  }
  std::string& data = modex_data_[frame.tag];
  data += frame.data;
  if (!frame.last) return;
  event.kind = PmiEvent::Kind::kModexData;
  event.code = frame.status;
  event.data = std::move(data);
  modex_data_.erase(frame.tag);
  sink.events.push_back(std::move(event));
}

void ShellChannel::send(std::string frame) {
  input_.push_back(std::move(frame));
  send_queued();
}

void ShellChannel::send_queued() {
  while (!input_.empty() && fd >= 0 && !awaiting_handoff) {
    const std::string& frame = input_.front();
    if (::send(fd, frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) input_.clear();  // the shell is gone
      return;                               // full: again on the next check (check_timeouts)
    }
    input_.pop_front();
  }
}

void ShellChannel::close() {
  close_fd(fd);
  close_fd(listen_fd);
}

}  // namespace hpcq::agent
