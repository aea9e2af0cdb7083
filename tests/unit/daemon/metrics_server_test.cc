// MetricsServer (daemon/metrics_server.h) over real loopback sockets: the
// answers, and the limits that keep silent clients from holding up scrapes.
#include "daemon/metrics_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace hpcq::daemon {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

const std::string kBody = "# TYPE hpcq_test gauge\nhpcq_test 1\n";

class Client {
 public:
  explicit Client(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    timeval five{5, 0};  // no test waits longer for a byte
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &five, sizeof five);
  }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }
  void send(const std::string& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Everything until the server closes; "<timeout>" if it does not in 5 s.
  std::string read_all() {
    std::string out;
    char buffer[4096];
    while (true) {
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n == 0) return out;
      if (n < 0) return errno == ECONNRESET ? out : "<timeout>";
      out.append(buffer, static_cast<std::size_t>(n));
    }
  }

 private:
  int fd_;
  bool connected_ = false;
};

std::string body_of(const std::string& answer) {
  const std::size_t end = answer.find("\r\n\r\n");
  return end == std::string::npos ? "" : answer.substr(end + 4);
}

std::string gunzip(const std::string& zipped) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::string out(1 << 16, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zipped.data()));
  z.avail_in = static_cast<uInt>(zipped.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  inflateEnd(&z);
  return out;
}

struct Served {
  MetricsServer server;
  explicit Served(MetricsServer::Limits limits = {}) : server([] { return kBody; }, limits) {
    EXPECT_TRUE(server.start("127.0.0.1:0").is_ok());
  }
  std::string get(const std::string& request) {
    Client c(server.port());
    c.send(request);
    return c.read_all();
  }
};

TEST(MetricsServerTest, AnswersMetricsAndRefusesTheRest) {
  Served s;
  const std::string ok = s.get("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(ok.starts_with("HTTP/1.1 200 OK\r\n")) << ok;
  EXPECT_NE(ok.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << ok;
  EXPECT_NE(ok.find("Content-Length: " + std::to_string(kBody.size())), std::string::npos) << ok;
  EXPECT_EQ(body_of(ok), kBody);
  EXPECT_EQ(body_of(s.get("GET /metrics?name[]=x HTTP/1.0\n\n")), kBody);  // bare LFs
  const std::string head = s.get("HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(head.starts_with("HTTP/1.1 200 OK\r\n")) << head;
  EXPECT_EQ(body_of(head), "");
  EXPECT_TRUE(s.get("GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
  EXPECT_TRUE(s.get("POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405 "));
  EXPECT_TRUE(s.get("hello\r\n\r\n").starts_with("HTTP/1.1 400 "));
  EXPECT_TRUE(
      s.get("GET /metrics HTTP/1.1\r\nX: " + std::string(10000, 'x')).starts_with("HTTP/1.1 431 "));
}

TEST(MetricsServerTest, GzipsForAScraperThatAcceptsIt) {
  Served s;
  const std::string zipped =
      s.get("GET /metrics HTTP/1.1\r\nAccept-Encoding: gzip\r\nHost: x\r\n\r\n");
  EXPECT_NE(zipped.find("Content-Encoding: gzip\r\n"), std::string::npos) << zipped;
  EXPECT_EQ(gunzip(body_of(zipped)), kBody);
  const std::string refused = s.get("GET /metrics HTTP/1.1\r\naccept-encoding: gzip;q=0\r\n\r\n");
  EXPECT_EQ(refused.find("Content-Encoding"), std::string::npos) << refused;
  EXPECT_EQ(body_of(refused), kBody);
}

TEST(MetricsServerTest, SilentAndHalfRequestsDoNotHoldUpAScrape) {
  // A long request timeout: only the server's not waiting on them can answer in time.
  Served s({.request_timeout = std::chrono::seconds(30), .max_connections = 256});
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 120; ++i) {
    idle.push_back(std::make_unique<Client>(s.server.port()));
    ASSERT_TRUE(idle.back()->connected());
    if (i % 20 == 0) idle.back()->send("GET /metrics HTTP/1.1\r\nHost: x\r\n");
  }
  const Clock::time_point start = Clock::now();
  EXPECT_EQ(body_of(s.get("GET /metrics HTTP/1.1\r\n\r\n")), kBody);
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
}

TEST(MetricsServerTest, ASilentConnectionIsClosedAtTheRequestTimeout) {
  Served s({.request_timeout = milliseconds(200)});
  Client silent(s.server.port());
  Client half(s.server.port());
  half.send("GET /metrics HTTP/1.1\r\n");
  const Clock::time_point start = Clock::now();
  EXPECT_EQ(silent.read_all(), "");
  EXPECT_EQ(half.read_all(), "");
  EXPECT_GE(Clock::now() - start, milliseconds(150));
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
}

TEST(MetricsServerTest, PastTheCapTheOldestSilentConnectionIsClosed) {
  Served s({.request_timeout = std::chrono::seconds(30), .max_connections = 2});
  Client oldest(s.server.port());
  Client second(s.server.port());
  ASSERT_TRUE(oldest.connected() && second.connected());
  EXPECT_EQ(body_of(s.get("GET /metrics HTTP/1.1\r\n\r\n")), kBody);  // the third
  EXPECT_EQ(oldest.read_all(), "");                                   // closed for it
  second.send("GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(body_of(second.read_all()), kBody);
}

TEST(MetricsServerTest, AnAddressItCannotBindIsAnError) {
  MetricsServer server([] { return kBody; });
  const Status s = server.start("192.0.2.1:0");  // TEST-NET-1: not this host's
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("192.0.2.1:0"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace hpcq::daemon
