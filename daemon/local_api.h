// The local wire's server (lib/api/local_wire.h): hpcqd's API for the hpcq
// command, on the same unix socket as gRPC. UnixAcceptor hands it each
// connection whose first byte is the wire's; a thread of its own reads the
// one Call, asks the Authenticator who the caller is (the credentials the
// acceptor recorded for the fd), runs the call on Api and writes the Replies.
//
// Threads: serve() from the acceptor; one thread per connection after that.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "daemon/api.h"
#include "daemon/authenticator.h"

namespace hpcq::daemon {

class LocalApi {
 public:
  // Calls at once; one more is refused (kResourceExhausted) rather than queued.
  static constexpr int kMaxCalls = 4096;

  LocalApi(Api& api, Authenticator& authenticator, std::size_t max_request_bytes);
  ~LocalApi();
  LocalApi(const LocalApi&) = delete;
  LocalApi& operator=(const LocalApi&) = delete;

  // Takes fd (its credentials already recorded) and serves its call.
  void serve(int fd);
  // Refuses new calls, ends streams and cuts every connection, then waits a
  // bounded time for the calls in flight (one blocked in the Leader after its
  // loop stopped would never end).
  void stop();

 private:
  // Runs one call whose request is `request`, writing its Replies to fd.
  using Handler = std::function<void(const Caller& caller, const std::string& request, int fd)>;

  template <class Request, class Response>
  void add(const char* method, Status (Api::*call)(const Caller&, const Request&, Response*));
  template <class Request, class Message>
  void add(const char* method, Status (Api::*call)(const Caller&, const Request&, Sink<Message>&));
  void run(int fd);
  bool stopping() const;

  Api& api_;
  Authenticator& authenticator_;
  const std::size_t max_request_bytes_;
  std::map<std::string, Handler, std::less<>> handlers_;  // by method; fixed after construction

  mutable std::mutex mutex_;
  std::condition_variable idle_;
  std::set<int> open_;     // guarded by mutex_: the fds of calls in flight
  bool stopping_ = false;  // guarded by mutex_
};

}  // namespace hpcq::daemon
