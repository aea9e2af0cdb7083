#include "daemon/peer_credentials.h"

namespace hpcq::daemon {

void PeerCredentials::record(int fd, const Caller& caller) {
  std::lock_guard lock(mutex_);
  by_fd_[fd] = caller;
}

std::optional<Caller> PeerCredentials::lookup(const std::string& peer) const {
  if (peer.rfind("fd:", 0) != 0) return std::nullopt;
  int fd = 0;
  try {
    fd = std::stoi(peer.substr(3));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::lock_guard lock(mutex_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return std::nullopt;
  return it->second;
}

}  // namespace hpcq::daemon
