// The CURVE allow-list of one ZeroMQ context (RFC 27, ZAP).
//
// Owns a thread that answers ZeroMQ's authentication requests for every CURVE
// server socket of `context`: a client whose public key is in the allow-list
// is accepted with the key's name as its ZAP user id (readable from each
// message's "User-Id" property); any other key is refused and the refusal is
// logged once per address and key. Construct before binding the server
// sockets; destroy before the context is closed.
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <thread>

#include <zmq.hpp>

namespace hpcq::overlay {

class ZapAuthenticator {
 public:
  // allowed: Z85 public key -> name (e.g. "rank 3").
  ZapAuthenticator(zmq::context_t& context, std::map<std::string, std::string> allowed);
  ~ZapAuthenticator();
  ZapAuthenticator(const ZapAuthenticator&) = delete;
  ZapAuthenticator& operator=(const ZapAuthenticator&) = delete;

  // Number of refused handshakes so far (for tests and metrics).
  int refused() const { return refused_.load(); }

 private:
  void serve(zmq::socket_t socket);

  const std::map<std::string, std::string> allowed_;  // immutable after construction
  std::atomic<bool> stop_{false};
  std::atomic<int> refused_{0};
  std::thread thread_;
};

}  // namespace hpcq::overlay
