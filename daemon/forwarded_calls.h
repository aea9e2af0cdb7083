// Calls of the hpcq command made on the nodes and forwarded by their agents
// (agent/call_forwarder.h). Each runs through LocalApi exactly as a call on
// hpcqd's own socket: over a socketpair whose one end LocalApi serves, with
// the caller the agent's socket saw recorded for it, and whose other end a
// relay thread here feeds the Call and reads the Replies from, sending each
// back to the agent as it comes. An agent vouches for its node's callers as
// its reports are trusted: it holds a key of the overlay's allow-list.
//
// Threads: on_call() and on_cancel() on the leader's loop thread; one relay
// thread per call; `send` must be safe from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

#include "daemon/local_api.h"
#include "daemon/peer_credentials.h"
#include "lib/core/ids.h"
#include "proto/overlay.pb.h"

namespace hpcq::daemon {

class ForwardedCalls {
 public:
  using Send = std::function<void(overlay::Envelope)>;
  ForwardedCalls(LocalApi& local, PeerCredentials& credentials, Send send);
  ~ForwardedCalls();
  ForwardedCalls(const ForwardedCalls&) = delete;
  ForwardedCalls& operator=(const ForwardedCalls&) = delete;

  void on_call(Rank from, const overlay::ForwardedCall& call);
  void on_cancel(Rank from, const overlay::ForwardedCancel& cancel);

 private:
  using Key = std::pair<Rank, std::uint64_t>;
  void relay(Rank from, std::uint64_t id, int fd);

  LocalApi& local_;
  PeerCredentials& credentials_;
  Send send_;
  std::mutex mutex_;
  std::condition_variable idle_;
  std::map<Key, int> relays_;  // guarded by mutex_: each call's relay end
  bool stopping_ = false;      // guarded by mutex_
};

}  // namespace hpcq::daemon
