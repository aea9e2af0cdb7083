#include "daemon/metrics_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace hpcq::daemon {

using Clock = std::chrono::steady_clock;

struct MetricsServer::Connection {
  int fd = -1;
  Clock::time_point accepted;
  Clock::time_point deadline;  // of the request until answered, then of the answer
  std::string request;         // the bytes read so far
  std::string response;        // empty until the request is whole
  std::size_t sent = 0;
  bool answering() const { return !response.empty(); }
};

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The request's headers end at the first empty line (RFC 9112 section 2.2
// lets a bare LF end a line).
std::size_t headers_end(const std::string& request) {
  const std::size_t crlf = request.find("\r\n\r\n");
  const std::size_t lf = request.find("\n\n");
  return std::min(crlf, lf);
}

// The value of header `name` (lower case) in `headers`, if it is there.
std::optional<std::string> header(std::string_view headers, std::string_view name) {
  std::size_t at = headers.find('\n');
  while (at != std::string_view::npos && at + 1 < headers.size()) {
    const std::size_t end = headers.find('\n', at + 1);
    const std::string_view line = end == std::string_view::npos
                                      ? headers.substr(at + 1)
                                      : headers.substr(at + 1, end - at - 1);
    const std::size_t colon = line.find(':');
    if (colon != std::string_view::npos && lower(line.substr(0, colon)) == name) {
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
        value.remove_prefix(1);
      }
      while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) {
        value.remove_suffix(1);
      }
      return std::string(value);
    }
    at = end;
  }
  return std::nullopt;
}

// Whether Accept-Encoding lists gzip without refusing it ("gzip;q=0").
bool accepts_gzip(std::string_view headers) {
  const std::optional<std::string> accept = header(headers, "accept-encoding");
  if (!accept) return false;
  std::string value = lower(*accept);
  std::erase_if(value, [](char c) { return c == ' ' || c == '\t'; });
  std::size_t start = 0;
  while (start < value.size()) {
    const std::size_t comma = std::min(value.find(',', start), value.size());
    const std::string_view coding = std::string_view(value).substr(start, comma - start);
    const std::size_t semicolon = coding.find(';');
    if (coding.substr(0, semicolon) == "gzip") {
      const std::size_t q = coding.find("q=", semicolon);
      return semicolon == std::string_view::npos || q == std::string_view::npos ||
             std::strtod(std::string(coding.substr(q + 2)).c_str(), nullptr) > 0;
    }
    start = comma + 1;
  }
  return false;
}

// `body` gzipped (RFC 1952), or nothing if zlib fails.
std::optional<std::string> gzip(const std::string& body) {
  z_stream z{};
  // 15 + 16: the largest window, with a gzip header and trailer.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return std::nullopt;
  }
  std::string out(deflateBound(&z, body.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return std::nullopt;
  return out;
}

std::string status_answer(const char* status, const char* extra_headers = "") {
  std::string body = std::string(status) + "\n";
  return std::string("HTTP/1.1 ") + status + "\r\nContent-Type: text/plain; charset=utf-8\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

// "[::1]:9464" -> ("::1", "9464"); "host:9464" -> ("host", "9464").
std::pair<std::string, std::string> split_listen(const std::string& listen) {
  const std::size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return {"", listen};
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {host, listen.substr(colon + 1)};
}

}  // namespace

MetricsServer::MetricsServer(std::function<std::string()> render, Limits limits)
    : render_(std::move(render)), limits_(limits) {}

MetricsServer::~MetricsServer() { stop(); }

Status MetricsServer::start(const std::string& listen) {
  const auto [host, service] = split_listen(listen);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc =
      ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) return unavailable("cannot resolve " + listen + ": " + ::gai_strerror(rc));
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    // A restarted hpcqd binds again while the old connections are in TIME_WAIT.
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    listen_fd_ = fd;
  }
  ::freeaddrinfo(found);
  if (listen_fd_ < 0) return unavailable("cannot listen on " + listen + ": " + error);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
    port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
    return internal_error("cannot serve " + listen + ": eventfd: " + std::strerror(errno));
  }
  thread_ = std::thread([this] { serve_loop(); });
  return Status::ok();
}

void MetricsServer::stop() {
  if (!thread_.joinable()) return;
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(stop_fd_, &one, sizeof one);
  thread_.join();
  ::close(listen_fd_);
  ::close(stop_fd_);
  listen_fd_ = stop_fd_ = -1;
}

void MetricsServer::serve_loop() {
  std::vector<Connection> connections;
  std::vector<pollfd> fds;
  while (true) {
    fds.assign({{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}});
    Clock::time_point next_deadline = Clock::time_point::max();
    for (const Connection& c : connections) {
      fds.push_back({c.fd, static_cast<short>(c.answering() ? POLLOUT : POLLIN), 0});
      next_deadline = std::min(next_deadline, c.deadline);
    }
    int timeout_ms = -1;
    if (!connections.empty()) {
      const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_deadline - Clock::now());
      timeout_ms = static_cast<int>(std::max<std::chrono::milliseconds::rep>(0, wait.count()));
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("metrics: poll failed: {}", std::strerror(errno));
      break;
    }
    if (fds[1].revents) break;
    const Clock::time_point now = Clock::now();
    std::vector<Connection> still;
    still.reserve(connections.size());
    for (std::size_t i = 0; i < connections.size(); ++i) {
      Connection& c = connections[i];
      bool open = true;
      if (fds[i + 2].revents) open = c.answering() ? send_answer(c) : read_request(c);
      if (open && now >= c.deadline) open = false;
      if (open) {
        still.push_back(std::move(c));
      } else {
        ::close(c.fd);
      }
    }
    connections = std::move(still);
    if (fds[0].revents) accept_all(connections);
  }
  for (const Connection& c : connections) ::close(c.fd);
}

void MetricsServer::accept_all(std::vector<Connection>& connections) {
  // Bounded, so that a flood of connects cannot keep the open ones from being served.
  for (std::size_t accepted = 0; accepted < limits_.max_connections; ++accepted) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        spdlog::warn("metrics: accept failed: {}", std::strerror(errno));
      }
      return;
    }
    if (connections.size() >= limits_.max_connections) {
      auto oldest = connections.end();
      for (auto it = connections.begin(); it != connections.end(); ++it) {
        if (!it->answering() && (oldest == connections.end() || it->accepted < oldest->accepted)) {
          oldest = it;
        }
      }
      ++evicted_since_log_;
      const Clock::time_point now = Clock::now();
      if (now - last_evicted_log_ >= std::chrono::minutes(1)) {
        spdlog::warn(
            "metrics: {} connections open, the most served at once: closed {} "
            "(the oldest that had not sent a request) for newer ones",
            limits_.max_connections, evicted_since_log_);
        last_evicted_log_ = now;
        evicted_since_log_ = 0;
      }
      if (oldest == connections.end()) {  // all are taking answers: refuse the new one
        ::close(fd);
        continue;
      }
      ::close(oldest->fd);
      connections.erase(oldest);
    }
    Connection c;
    c.fd = fd;
    c.accepted = Clock::now();
    c.deadline = c.accepted + limits_.request_timeout;
    // A scraper's request is usually here already: answering it now takes it
    // out of reach of the eviction above.
    if (read_request(c)) {
      connections.push_back(std::move(c));
    } else {
      ::close(fd);
    }
  }
}

bool MetricsServer::read_request(Connection& c) {
  char buffer[4096];
  while (true) {
    const ssize_t n = ::recv(c.fd, buffer, sizeof buffer, 0);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.request.append(buffer, static_cast<std::size_t>(n));
    const std::size_t end = headers_end(c.request);
    if (end != std::string::npos) {
      c.response = answer(c.request.substr(0, end));
      break;
    }
    if (c.request.size() > limits_.max_request_bytes) {
      c.response = status_answer("431 Request Header Fields Too Large");
      break;
    }
  }
  c.request.clear();
  c.deadline = Clock::now() + limits_.response_timeout;
  return send_answer(c);
}

bool MetricsServer::send_answer(Connection& c) {
  while (c.sent < c.response.size()) {
    const ssize_t n =
        ::send(c.fd, c.response.data() + c.sent, c.response.size() - c.sent, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.sent += static_cast<std::size_t>(n);
  }
  // All sent: a FIN, and what the client may have sent past its headers is
  // read away, so that closing does not reset the connection (a reset can
  // drop the answer's tail before the client reads it).
  ::shutdown(c.fd, SHUT_WR);
  char buffer[4096];
  while (::recv(c.fd, buffer, sizeof buffer, 0) > 0) {
  }
  return false;
}

std::string MetricsServer::answer(const std::string& request) {
  // "GET /metrics?x=y HTTP/1.1"
  const std::string_view line = std::string_view(request).substr(0, request.find('\n'));
  const std::size_t space = line.find(' ');
  const std::size_t space2 = space == std::string_view::npos ? space : line.find(' ', space + 1);
  if (space2 == std::string_view::npos || !line.substr(space2 + 1).starts_with("HTTP/1.")) {
    return status_answer("400 Bad Request");
  }
  const std::string_view method = line.substr(0, space);
  std::string_view target = line.substr(space + 1, space2 - space - 1);
  target = target.substr(0, target.find('?'));
  if (target != "/metrics") return status_answer("404 Not Found");
  if (method != "GET" && method != "HEAD") {
    return status_answer("405 Method Not Allowed", "Allow: GET, HEAD\r\n");
  }
  std::string body = render_();
  std::string encoding;
  if (accepts_gzip(request)) {
    if (std::optional<std::string> zipped = gzip(body)) {
      body = std::move(*zipped);
      encoding = "Content-Encoding: gzip\r\n";
    }
  }
  std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n" + encoding +
      "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  return method == "HEAD" ? head : head + body;
}

}  // namespace hpcq::daemon
