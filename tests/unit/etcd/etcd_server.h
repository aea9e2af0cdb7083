// A real single-member etcd (/usr/bin/etcd, Debian's etcd-server) for unit
// tests: started on free loopback ports in a temporary directory, waited for
// with bounded polls of the client itself, killed and removed at the end.
// Tests skip (GTEST_SKIP, with the reason) where etcd is not installed.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lib/etcd/etcd_client.h"

namespace hpcq::etcd::testing {

inline constexpr char kEtcdPath[] = "/usr/bin/etcd";

// A TCP socket on 127.0.0.1 at a port the kernel chose (bind to port 0).
class Socket {
 public:
  Socket() : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot bind a socket on 127.0.0.1";
    }
    port_ = ntohs(addr.sin_port);
  }
  ~Socket() { close(fd_); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int port() const { return port_; }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  // Connections complete in the kernel's backlog but are never accepted:
  // an endpoint that never answers.
  void listen_silently() { ::listen(fd_, 16); }

 private:
  int fd_;
  int port_ = 0;
};

inline std::string read_tail(const std::string& path, std::size_t n) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  return s.size() > n ? s.substr(s.size() - n) : s;
}

// An etcd serving its clients over TLS: its certificate and key, and the CA
// whose certificates it requires of clients (--client-cert-auth). The
// server's certificate must name 127.0.0.1. `client` is how the server's own
// readiness probe and client() connect.
struct EtcdTls {
  std::string cert_file, key_file, client_ca_file;
  EtcdClient::Options client;
};

class EtcdServer {
 public:
  // Starts etcd and waits (at most 30 s) until it answers a read; error()
  // says why not when it could not.
  explicit EtcdServer(const EtcdTls* tls = nullptr) {
    if (!installed()) return;
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/hpcq-etcd-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      error_ = "mkdtemp " + pattern + " failed";
      return;
    }
    dir_ = pattern;
    int client_port = 0, peer_port = 0;
    {
      // Both held at once, so that they differ.
      Socket client, peer;
      client_port = client.port();
      peer_port = peer.port();
    }
    endpoint_ = "127.0.0.1:" + std::to_string(client_port);
    const std::string client_url = (tls ? "https://" : "http://") + endpoint_;
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer_port);
    std::vector<std::string> args = {kEtcdPath,
                                     "--name=t",
                                     "--data-dir=" + dir_ + "/data",
                                     "--listen-client-urls=" + client_url,
                                     "--advertise-client-urls=" + client_url,
                                     "--listen-peer-urls=" + peer_url,
                                     "--initial-advertise-peer-urls=" + peer_url,
                                     "--initial-cluster=t=" + peer_url,
                                     "--max-txn-ops=16384"};
    if (tls) {
      args.insert(args.end(), {"--cert-file=" + tls->cert_file, "--key-file=" + tls->key_file,
                               "--trusted-ca-file=" + tls->client_ca_file, "--client-cert-auth"});
      options_ = tls->client;
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = dir_ + "/etcd.log";
    const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_ = fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls between fork and exec. etcd dies with us.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
      execv(kEtcdPath, argv.data());
      _exit(127);
    }
    close(log_fd);
    if (pid_ < 0) {
      error_ = "fork failed";
      return;
    }
    // Ready when it answers a read; it needs about a second to elect itself.
    using namespace std::chrono_literals;
    EtcdClient::Options options = options_;
    options.deadline = 300ms;
    Result<EtcdClient> client = EtcdClient::connect({endpoint_}, options);
    const auto give_up = std::chrono::steady_clock::now() + 30s;
    Status last;
    for (;;) {
      last = client->get("ready").status();
      if (last.is_ok()) return;
      int wstatus = 0;
      if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
        pid_ = -1;
        error_ = "etcd exited at start; its log ends: " + read_tail(log, 3000);
        return;
      }
      if (std::chrono::steady_clock::now() > give_up) break;
      std::this_thread::sleep_for(50ms);
    }
    error_ = "etcd did not answer within 30 s (" + last.message() +
             "); its log ends: " + read_tail(log, 3000);
  }

  ~EtcdServer() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  static bool installed() { return access(kEtcdPath, X_OK) == 0; }
  const std::string& error() const { return error_; }
  const std::string& endpoint() const { return endpoint_; }

  // A client with the server's TLS options, if any, and `options`' deadline
  // and page size.
  EtcdClient client(EtcdClient::Options options = {}) const {
    options.ca_file = options_.ca_file;
    options.cert_file = options_.cert_file;
    options.key_file = options_.key_file;
    Result<EtcdClient> c = EtcdClient::connect({endpoint_}, options);
    EXPECT_TRUE(c.is_ok()) << c.status().to_string();
    return std::move(c).value();
  }

 private:
  pid_t pid_ = -1;
  EtcdClient::Options options_;  // how clients connect (TLS or not)
  std::string dir_;
  std::string endpoint_;
  std::string error_;
};

// In a test's SetUp: skips where etcd is not installed, fails where it did
// not start.
#define HPCQ_NEED_ETCD(server)                                   \
  do {                                                           \
    if (!::hpcq::etcd::testing::EtcdServer::installed()) {       \
      GTEST_SKIP() << ::hpcq::etcd::testing::kEtcdPath           \
                   << " is not installed (Debian: etcd-server)"; \
    }                                                            \
    ASSERT_EQ((server).error(), "");                             \
  } while (0)

}  // namespace hpcq::etcd::testing
