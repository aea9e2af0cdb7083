// The hpcq command on this node: the agent serves a unix socket ([agent]
// socket, hpcq-agent --socket) that speaks hpcqd's local wire
// (lib/api/local_wire.h), and forwards each call to the leader over the
// overlay with the caller the kernel names (SO_PEERCRED). The leader runs it
// as a call on its own socket (daemon/forwarded_calls.h) and its replies are
// written back as they come. So `hpcq` works on every node, a job's steps
// included, and reaches whichever hpcqd leads, wherever it runs (failover):
// the overlay follows the leader.
//
// A call in flight when the way to the leader changes is answered
// kUnavailable ("try again"): its replies may have been lost on the old way.
//
// Threads: an accept thread; one thread per call; on_reply() and
// on_reroute() on the agent's loop thread; `send` (the loop thread's
// overlay) is reached through `post`.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "lib/core/status.h"
#include "proto/overlay.pb.h"

namespace hpcq::agent {

class CallForwarder {
 public:
  // Runs a closure on the agent's loop thread.
  using Post = std::function<void(std::function<void()>)>;
  // Loop thread: sends an envelope to the leader; false when it cannot now.
  using Send = std::function<bool(overlay::Envelope)>;

  CallForwarder(Post post, Send send, std::size_t max_request_bytes);
  ~CallForwarder();
  CallForwarder(const CallForwarder&) = delete;
  CallForwarder& operator=(const CallForwarder&) = delete;

  // Binds `path` (mode 0666: the caller's uid is what the call carries) and
  // starts accepting.
  Status start(const std::string& path);
  // Loop thread.
  void on_reply(const overlay::ForwardedReply& reply);
  void on_reroute();

 private:
  struct Call {
    std::mutex mutex;
    std::deque<std::string> frames;  // guarded by mutex: to write to the caller
    bool end = false;                // guarded by mutex
    int wake_fd = -1;                // eventfd: frames or the end arrived
  };
  void accept_loop();
  void serve(int fd);
  // Replies to the caller as they come, until the last; false when the
  // caller went away first (it sends nothing after its call), which
  // cancels the call.
  bool relay_replies(int fd, Call& state);
  void deliver(std::uint64_t id, std::string frame, bool end);
  // Ends every call in flight with `why`.
  void fail_all(const Status& why);

  Post post_;
  Send send_;
  const std::size_t max_request_bytes_;
  std::string path_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // eventfd: the accept thread stops
  std::thread acceptor_;
  std::atomic<std::uint64_t> next_id_;

  std::mutex mutex_;
  std::condition_variable idle_;
  std::map<std::uint64_t, std::shared_ptr<Call>> calls_;  // guarded by mutex_
  int threads_ = 0;                                       // guarded by mutex_
  bool stopping_ = false;                                 // guarded by mutex_
};

}  // namespace hpcq::agent
