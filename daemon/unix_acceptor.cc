#include "daemon/unix_acceptor.h"

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

#include "daemon/local_api.h"
#include "lib/api/local_wire.h"

namespace hpcq::daemon {

UnixAcceptor::~UnixAcceptor() { stop(); }

Status UnixAcceptor::start(const std::string& path, grpc::Server* server, LocalApi* local,
                           PeerCredentials* credentials) {
  path_ = path;
  server_ = server;
  local_ = local;
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

namespace {

// How long a connection may stay silent before its first byte says which
// protocol it speaks; how many may wait at once.
constexpr auto kFirstByteTimeout = std::chrono::seconds(10);
constexpr std::size_t kMaxWaiting = 1024;

}  // namespace

void UnixAcceptor::accept_loop() {
  std::vector<Waiting> waiting;
  std::vector<pollfd> fds;
  while (true) {
    fds.assign({{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}});
    for (const Waiting& w : waiting) fds.push_back({w.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), waiting.empty() ? -1 : 1000) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("api: poll failed: {}", std::strerror(errno));
      break;
    }
    if (fds[1].revents) break;
    const auto now = std::chrono::steady_clock::now();
    std::vector<Waiting> still;
    for (std::size_t i = 0; i < waiting.size(); ++i) {
      if (fds[i + 2].revents) {
        hand_on(waiting[i].fd);
      } else if (now - waiting[i].since > kFirstByteTimeout) {
        ::close(waiting[i].fd);
      } else {
        still.push_back(waiting[i]);
      }
    }
    waiting = std::move(still);
    if (fds[0].revents) accept_one(waiting);
  }
  for (const Waiting& w : waiting) ::close(w.fd);
}

void UnixAcceptor::accept_one(std::vector<Waiting>& waiting) {
  int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
      spdlog::warn("api: accept failed: {}", std::strerror(errno));
    }
    return;
  }
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    spdlog::warn("api: SO_PEERCRED failed: {}", std::strerror(errno));
    ::close(fd);
    return;
  }
  if (waiting.size() >= kMaxWaiting) {
    spdlog::warn("api: {} connections have sent nothing yet; refusing one from pid {}",
                 waiting.size(), cred.pid);
    ::close(fd);
    return;
  }
  // Recorded before gRPC or LocalApi sees the fd, so no call on it can miss
  // its caller; a reused fd number is overwritten here before its first call.
  Caller caller;
  caller.uid = cred.uid;
  caller.gid = cred.gid;
  caller.pid = cred.pid;
  credentials_->record(fd, caller);
  waiting.push_back({fd, std::chrono::steady_clock::now()});
}

void UnixAcceptor::hand_on(int fd) {
  char first = 0;
  ssize_t n = ::recv(fd, &first, 1, MSG_PEEK);
  if (n != 1) {
    ::close(fd);  // gone before saying anything
  } else if (first == api::local_wire::kMagic[0]) {
    local_->serve(fd);
  } else {
    grpc::AddInsecureChannelFromFd(server_, fd);
  }
}

}  // namespace hpcq::daemon
