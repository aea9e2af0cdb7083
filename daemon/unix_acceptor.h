// hpcqd's local API socket. UnixAcceptor accepts on it, records each
// connection's SO_PEERCRED (PeerCredentials) against its fd, and hands the fd
// on by its first byte: the local wire's (lib/api/local_wire.h) to LocalApi,
// anything else to gRPC (AddInsecureChannelFromFd). One socket serves both,
// so the hpcq command and gRPC clients need the same path only.
//
// Threads: one, the acceptor's.
#pragma once

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "daemon/peer_credentials.h"
#include "lib/core/status.h"

namespace grpc {
class Server;
}

namespace hpcq::daemon {

class LocalApi;

class UnixAcceptor {
 public:
  UnixAcceptor() = default;
  ~UnixAcceptor();
  UnixAcceptor(const UnixAcceptor&) = delete;
  UnixAcceptor& operator=(const UnixAcceptor&) = delete;

  // Binds `path` (replacing a stale socket; mode 0666: every local user may
  // connect, authorisation is per call) and accepts until stop().
  Status start(const std::string& path, grpc::Server* server, LocalApi* local,
               PeerCredentials* credentials);
  void stop();

 private:
  // A connection whose first byte has not come yet.
  struct Waiting {
    int fd;
    std::chrono::steady_clock::time_point since;
  };
  void accept_loop();
  void accept_one(std::vector<Waiting>& waiting);
  void hand_on(int fd);

  std::string path_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;
  grpc::Server* server_ = nullptr;
  LocalApi* local_ = nullptr;
  PeerCredentials* credentials_ = nullptr;
  std::thread thread_;
};

}  // namespace hpcq::daemon
