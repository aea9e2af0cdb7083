#include "lib/overlay/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace hpcq::overlay {

EventLoop::EventLoop() : wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

EventLoop::~EventLoop() { ::close(wake_fd_); }

void EventLoop::watch_socket(zmq::socket_t& socket, Callback on_readable) {
  sources_.push_back({&socket, -1, std::move(on_readable), next_source_++});
}

void EventLoop::watch_fd(int fd, Callback on_readable) {
  sources_.push_back({nullptr, fd, std::move(on_readable), next_source_++});
}

void EventLoop::unwatch_socket(zmq::socket_t& socket) {
  std::erase_if(sources_, [&](const Source& s) { return s.socket == &socket; });
}

void EventLoop::unwatch_fd(int fd) {
  std::erase_if(sources_, [fd](const Source& s) { return s.socket == nullptr && s.fd == fd; });
}

EventLoop::TimerId EventLoop::run_after(std::chrono::milliseconds delay, Callback callback) {
  TimerId id = next_timer_++;
  timers_[id] = {std::chrono::steady_clock::now() + delay, std::chrono::milliseconds(0),
                 std::move(callback)};
  return id;
}

EventLoop::TimerId EventLoop::run_every(std::chrono::milliseconds period, Callback callback) {
  TimerId id = next_timer_++;
  timers_[id] = {std::chrono::steady_clock::now() + period, period, std::move(callback)};
  return id;
}

void EventLoop::cancel_timer(TimerId id) { timers_.erase(id); }

void EventLoop::post(Callback closure) {
  {
    std::lock_guard lock(mutex_);
    posted_.push_back(std::move(closure));
  }
  std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void EventLoop::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_requested_ = true;
  }
  std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void EventLoop::run_posted() {
  std::uint64_t count;
  [[maybe_unused]] ssize_t n = ::read(wake_fd_, &count, sizeof count);
  std::deque<Callback> batch;
  {
    std::lock_guard lock(mutex_);
    batch.swap(posted_);
  }
  for (auto& closure : batch) closure();
}

int EventLoop::poll_timeout_ms() const {
  if (timers_.empty()) return 1000;
  auto now = std::chrono::steady_clock::now();
  auto next = std::min_element(timers_.begin(), timers_.end(), [](const auto& a, const auto& b) {
                return a.second.due < b.second.due;
              })->second.due;
  if (next <= now) return 0;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
  return static_cast<int>(std::min<long long>(ms, 1000));
}

void EventLoop::run_due_timers() {
  auto now = std::chrono::steady_clock::now();
  std::vector<TimerId> due;
  for (const auto& [id, timer] : timers_) {
    if (timer.due <= now) due.push_back(id);
  }
  for (TimerId id : due) {
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;  // cancelled by an earlier callback
    Callback callback = it->second.callback;
    if (it->second.period.count() > 0) {
      it->second.due = now + it->second.period;
    } else {
      timers_.erase(it);
    }
    callback();
  }
}

void EventLoop::run() {
  while (true) {
    {
      std::lock_guard lock(mutex_);
      if (stop_requested_) return;
    }
    std::vector<zmq::pollitem_t> items;
    items.push_back({nullptr, wake_fd_, ZMQ_POLLIN, 0});
    // Snapshot of the sources: callbacks may add or remove sources.
    std::vector<Source> sources = sources_;
    for (const auto& s : sources) {
      items.push_back({s.socket ? s.socket->handle() : nullptr, s.fd, ZMQ_POLLIN, 0});
    }
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(poll_timeout_ms()));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return;  // the context was terminated: nothing more can arrive
    }
    if (items[0].revents & ZMQ_POLLIN) run_posted();
    for (size_t i = 0; i < sources.size(); ++i) {
      if (!(items[i + 1].revents & ZMQ_POLLIN)) continue;
      // An earlier callback of this round may have unwatched it (and freed
      // what its callback points at): only sources still registered run.
      const std::uint64_t id = sources[i].id;
      const bool watched = std::any_of(sources_.begin(), sources_.end(),
                                       [id](const Source& s) { return s.id == id; });
      if (watched) sources[i].callback();
    }
    run_due_timers();
  }
}

}  // namespace hpcq::overlay
