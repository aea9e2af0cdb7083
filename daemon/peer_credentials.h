// Who is on the other end of each local API connection (SO_PEERCRED).
//
// gRPC offers no access to a unix socket's peer credentials, so hpcqd accepts
// connections itself (UnixAcceptor) and records each one's SO_PEERCRED here
// against its fd; a call's peer string is then "fd:N". A caller's uid
// therefore comes from the kernel, never from the request.
//
// Thread-safe: the acceptor thread records, gRPC and LocalApi threads look up.
#pragma once

#include <sys/types.h>

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "lib/core/status.h"

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

}  // namespace hpcq::daemon
