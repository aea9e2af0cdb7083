// hpcqd's HTTP endpoint for Prometheus: `GET /metrics` (or HEAD) is answered
// with what `render` returns, in Prometheus' text format (0.0.4), gzipped
// when the scraper accepts gzip; then the connection is closed. Any other
// path is 404, any other method 405.
//
// One thread polls every connection without blocking on any: a client that
// connects and sends nothing, or half a request, or reads its answer slowly,
// holds a slot and no thread, so it cannot delay another scrape (civetweb,
// which prometheus-cpp's Exposer serves through, gives each connection a
// worker thread until its request comes: 120 silent clients held hpcqd's one
// worker for 30 s each, and every scrape behind them timed out). The limits,
// in the manner of nginx's client_header_timeout and Go's ReadHeaderTimeout:
//   - a connection has `request_timeout` from its accept to the end of its
//     request's headers, and `response_timeout` after that to take the
//     answer; it is closed when either passes;
//   - at most `max_connections` are open: a new one past it closes the oldest
//     that is still sending its request (a scraper sends its request as soon
//     as it connects, so the oldest silent one is the likeliest squatter);
//   - a request's headers are at most `max_request_bytes` (431 past it).
//
// Threads: start() and stop() from one thread; `render` is called on the
// server's own thread, and must be safe there (prometheus-cpp's Registry
// and metrics are).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "lib/core/status.h"

namespace hpcq::daemon {

// Outside MetricsServer so that `= {}` can default it there (GCC cannot use a
// nested class's member initialisers before the enclosing class is complete).
struct MetricsServerLimits {
  std::chrono::milliseconds request_timeout = std::chrono::seconds(5);
  std::chrono::milliseconds response_timeout = std::chrono::seconds(10);
  std::size_t max_connections = 64;
  std::size_t max_request_bytes = 8192;
};

class MetricsServer {
 public:
  using Limits = MetricsServerLimits;

  // `render` gives the body of a /metrics answer.
  explicit MetricsServer(std::function<std::string()> render, Limits limits = {});
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Listens on `listen` ("ADDR:PORT", ADDR a host name, an IPv4 address or a
  // bracketed IPv6 one; PORT 0 picks a free one) and serves until stop().
  // An error (kUnavailable) if it cannot resolve or bind.
  Status start(const std::string& listen);
  void stop();
  // The port it listens on; 0 before start().
  int port() const { return port_; }

 private:
  struct Connection;
  void serve_loop();
  // Accepts the connections waiting (at most max_connections a turn).
  void accept_all(std::vector<Connection>& connections);
  // Reads what has come; answers once the request's headers are whole.
  // False when the connection is done with (closed by the peer, or failed).
  bool read_request(Connection& c);
  // Sends what the socket takes; false once all is sent or the peer is gone.
  bool send_answer(Connection& c);
  std::string answer(const std::string& request);

  std::function<std::string()> render_;
  Limits limits_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  // serve_loop's: when it last logged closing connections past the cap.
  std::chrono::steady_clock::time_point last_evicted_log_{};
  std::size_t evicted_since_log_ = 0;
};

}  // namespace hpcq::daemon
