#include "daemon/peer_credentials.h"

#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

UnixAcceptor::~UnixAcceptor() { stop(); }

Status UnixAcceptor::start(const std::string& path, grpc::Server* server,
                           PeerCredentials* credentials) {
  path_ = path;
  server_ = server;
  credentials_ = credentials;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return invalid_argument("socket path too long: " + path);
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return internal_error(std::string("socket: ") + std::strerror(errno));
  ::unlink(path.c_str());
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::chmod(path.c_str(), 0666) != 0 || ::listen(listen_fd_, 512) != 0) {
    Status s = unavailable("cannot listen on " + path + ": " + std::strerror(errno));
    ::close(listen_fd_);
    listen_fd_ = -1;
    return s;
  }
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this] { accept_loop(); });
  return Status::ok();
}

void UnixAcceptor::stop() {
  if (!thread_.joinable()) return;
  std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(stop_fd_, &one, sizeof one);
  thread_.join();
  ::close(listen_fd_);
  ::close(stop_fd_);
  ::unlink(path_.c_str());
}

void UnixAcceptor::accept_loop() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("api: poll failed: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        spdlog::warn("api: accept failed: {}", std::strerror(errno));
      }
      continue;
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      spdlog::warn("api: SO_PEERCRED failed: {}", std::strerror(errno));
      ::close(fd);
      continue;
    }
    // Recorded before gRPC sees the fd, so no call on it can miss its caller;
    // a reused fd number is overwritten here before its first call.
    Caller caller;
    caller.uid = cred.uid;
    caller.gid = cred.gid;
    caller.pid = cred.pid;
    credentials_->record(fd, caller);
    grpc::AddInsecureChannelFromFd(server_, fd);
  }
}

}  // namespace hpcq::daemon
