// Who is on the other end of each local API connection (SO_PEERCRED).
//
// gRPC offers no access to a unix socket's peer credentials, so hpcqd accepts
// connections itself: UnixAcceptor accepts on the socket, reads SO_PEERCRED,
// records it against the connection's fd, and hands the fd to gRPC
// (AddInsecureChannelFromFd), whose per-call peer string is then "fd:N".
// A caller's uid therefore comes from the kernel, never from the request.
//
// Thread-safe: the acceptor thread records, gRPC threads look up.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "lib/core/status.h"

namespace grpc {
class Server;
}

namespace hpcq::daemon {

// Who makes a call: a local user (pid set) or a portal acting for a user.
struct Caller {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
  bool admin = false;  // an admin user or group of hpcq.toml ([api] admin_*)
  std::string portal;  // the portal's name, for calls over TCP
  bool is_admin() const { return uid == 0 || admin; }
};

class PeerCredentials {
 public:
  void record(int fd, const Caller& caller);
  // From a gRPC peer string ("fd:12"); nullopt for any other kind of peer.
  std::optional<Caller> lookup(const std::string& peer) const;

 private:
  mutable std::mutex mutex_;
  std::map<int, Caller> by_fd_;  // guarded by mutex_
};

class UnixAcceptor {
 public:
  UnixAcceptor() = default;
  ~UnixAcceptor();
  UnixAcceptor(const UnixAcceptor&) = delete;
  UnixAcceptor& operator=(const UnixAcceptor&) = delete;

  // Binds `path` (replacing a stale socket; mode 0666: every local user may
  // connect, authorisation is per call) and accepts until stop().
  Status start(const std::string& path, grpc::Server* server, PeerCredentials* credentials);
  void stop();

 private:
  void accept_loop();

  std::string path_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;
  grpc::Server* server_ = nullptr;
  PeerCredentials* credentials_ = nullptr;
  std::thread thread_;
};

}  // namespace hpcq::daemon
