// A single-threaded event loop over ZeroMQ sockets, file descriptors and timers.
//
// hpcqd and hpcq-agent each run one: the loop thread owns all mutable state
// (STYLE.md rule 5). Other threads (gRPC, store writer) hand work to it with
// post(), the only thread-safe member. Callbacks run on the loop thread, one
// at a time, in the order their sources became ready; posted closures run in
// posting order.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include <zmq.hpp>

namespace hpcq::overlay {

class EventLoop {
 public:
  using Callback = std::function<void()>;
  using TimerId = std::uint64_t;

  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Loop thread only. `socket` must outlive its registration.
  void watch_socket(zmq::socket_t& socket, Callback on_readable);
  void watch_fd(int fd, Callback on_readable);
  void unwatch_socket(zmq::socket_t& socket);
  void unwatch_fd(int fd);
  TimerId run_after(std::chrono::milliseconds delay, Callback callback);
  TimerId run_every(std::chrono::milliseconds period, Callback callback);
  void cancel_timer(TimerId id);

  // Any thread: run `closure` on the loop thread soon.
  void post(Callback closure);

  // Runs until stop(); stop() may be called from any thread.
  void run();
  void stop();

 private:
  struct Timer {
    std::chrono::steady_clock::time_point due;
    std::chrono::milliseconds period;  // zero: one-shot
    Callback callback;
  };
  void run_posted();
  void run_due_timers();
  int poll_timeout_ms() const;

  int wake_fd_;  // eventfd: posted work or stop
  std::mutex mutex_;
  std::deque<Callback> posted_;  // guarded by mutex_
  bool stop_requested_ = false;  // guarded by mutex_

  struct Source {
    zmq::socket_t* socket;
    int fd;
    Callback callback;
    std::uint64_t id = 0;  // unique per registration
  };
  std::vector<Source> sources_;
  std::uint64_t next_source_ = 1;
  std::map<TimerId, Timer> timers_;
  TimerId next_timer_ = 1;
};

}  // namespace hpcq::overlay
