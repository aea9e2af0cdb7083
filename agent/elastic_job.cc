#include "agent/elastic_job.h"

#include "shell/contract.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "agent/executor/posix.h"

namespace hpcq::agent {
namespace {

const char* kind_word(overlay::Resize::Kind kind) {
  return kind == overlay::Resize::SHRINK ? "shrink" : "expand";
}

}  // namespace

std::string ElasticJob::nodelist_text(const NodeAllocs& allocation) {
  std::string text;
  for (const overlay::NodeAlloc& a : allocation) text += a.node() + "\n";
  return text;
}

std::string ElasticJob::hostfile_text(const NodeAllocs& allocation) {
  std::string text;
  for (const overlay::NodeAlloc& a : allocation) {
    text += a.node() + " slots=" + std::to_string(a.ntasks()) + "\n";
  }
  return text;
}

ElasticJob::ElasticJob(overlay::EventLoop& loop, std::string dir)
    : loop_(loop), dir_(std::move(dir)) {
  nodelist_ = dir_ + "/nodelist";
  hostfile_ = dir_ + "/hostfile";
  hostfile_mpich_ = dir_ + "/hostfile.mpich";
  socket_ = dir_ + "/resize.sock";
}

Result<std::unique_ptr<ElasticJob>> ElasticJob::create(overlay::EventLoop& loop, std::string dir,
                                                       uid_t uid, gid_t gid,
                                                       const NodeAllocs& allocation) {
  std::unique_ptr<ElasticJob> job(new ElasticJob(loop, std::move(dir)));
  if (mkdir(job->dir_.c_str(), 0755) != 0 || chmod(job->dir_.c_str(), 0755) != 0) {
    return internal_error("mkdir " + job->dir_ + ": " + errno_text(errno));
  }
  HPCQ_RETURN_IF_ERROR(job->write_files(allocation));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (job->socket_.size() >= sizeof address.sun_path) {
    return invalid_argument("resize socket path " + job->socket_ + " is too long");
  }
  std::memcpy(address.sun_path, job->socket_.c_str(), job->socket_.size() + 1);
  job->listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (job->listen_fd_ < 0) return internal_error("socket: " + errno_text(errno));
  if (bind(job->listen_fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      chown(job->socket_.c_str(), uid, gid) != 0 || chmod(job->socket_.c_str(), 0600) != 0 ||
      listen(job->listen_fd_, 4) != 0) {
    return internal_error("resize socket " + job->socket_ + ": " + errno_text(errno));
  }
  ElasticJob* self = job.get();
  loop.watch_fd(job->listen_fd_, [self] { self->on_accept(); });
  return job;
}

ElasticJob::~ElasticJob() {
  if (notice_ && notice_->timer != 0) loop_.cancel_timer(notice_->timer);
  drop_client();
  if (listen_fd_ >= 0) {
    loop_.unwatch_fd(listen_fd_);
    close(listen_fd_);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

Status ElasticJob::write_files(const NodeAllocs& allocation) {
  HPCQ_RETURN_IF_ERROR(replace_file(nodelist_, nodelist_text(allocation)));
  HPCQ_RETURN_IF_ERROR(replace_file(hostfile_, hostfile_text(allocation)));
  HPCQ_RETURN_IF_ERROR(replace_file(hostfile_mpich_, mpich_hostfile(hostfile_text(allocation))));
  current_ = allocation;
  return Status::ok();
}

void ElasticJob::notify(overlay::Resize::Kind kind, const NodeAllocs& allocation,
                        std::chrono::milliseconds timeout, Answer answer, bool forced) {
  if (notice_) finish(overlay::ResizeDone::FAILED, "replaced by a newer resize notice");
  auto notice = std::make_unique<Notice>();
  notice->kind = kind;
  notice->forced = forced;
  notice->before = current_;
  notice->answer = std::move(answer);
  Status written = write_files(allocation);
  if (!written.is_ok()) {
    (void)write_files(notice->before);  // best effort: the old list stands
    notice->answer(overlay::ResizeDone::FAILED, written.message(), 0);
    return;
  }
  notice->line = std::string(kind_word(kind)) + " " + std::to_string(allocation.size()) + " " +
                 nodelist_ + "\n";
  notice->sent = std::chrono::steady_clock::now();
  notice->timer = loop_.run_after(timeout, [this] {
    if (!notice_) return;
    notice_->timer = 0;
    finish(overlay::ResizeDone::TIMED_OUT, "the application did not answer in time");
  });
  notice_ = std::move(notice);
  send_notice();
}

void ElasticJob::send_notice() {
  if (!notice_ || client_fd_ < 0) return;  // sent when the application connects
  const std::string& line = notice_->line;
  // One short line into an empty socket buffer: it fits; a client that has
  // left unread lines behind loses this one (it gets the signal and the
  // files, and times out at worst).
  const ssize_t n = send(client_fd_, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n != static_cast<ssize_t>(line.size())) {
    spdlog::warn("elastic {}: resize notice not written whole: {}", dir_,
                 n < 0 ? errno_text(errno) : "short write");
  }
}

void ElasticJob::on_accept() {
  const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return;  // EAGAIN, or a client that left already
  drop_client();       // the newest connection is the application's
  client_fd_ = fd;
  ucred peer{};
  socklen_t len = sizeof peer;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 && peer.pid > 0) {
    client_pid_ = peer.pid;  // in our PID namespace: the kernel translates it
  }
  input_.clear();
  loop_.watch_fd(client_fd_, [this] { on_client_readable(); });
  send_notice();
}

void ElasticJob::drop_client() {
  if (client_fd_ < 0) return;
  loop_.unwatch_fd(client_fd_);
  close(client_fd_);
  client_fd_ = -1;
  client_pid_ = -1;
  input_.clear();
}

void ElasticJob::on_client_readable() {
  char buf[512];
  for (;;) {
    const ssize_t n = recv(client_fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      input_.append(buf, static_cast<std::size_t>(n));
      if (input_.size() > 4096) input_.erase(0, input_.size() - 4096);  // no unbounded growth
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    drop_client();  // closed or broken: a notice stays outstanding until its timeout
    return;
  }
  std::size_t eol;
  while ((eol = input_.find('\n')) != std::string::npos) {
    std::string line = input_.substr(0, eol);
    input_.erase(0, eol + 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!notice_) continue;  // an answer to nothing (late, or repeated)
    if (line == "ack") {
      finish(overlay::ResizeDone::ACKNOWLEDGED, "");
    } else if (line == "decline") {
      finish(overlay::ResizeDone::DECLINED, "");
    }
    // Anything else is not an answer; the timeout still holds.
  }
}

void ElasticJob::finish(overlay::ResizeDone::Outcome outcome, const std::string& reason) {
  std::unique_ptr<Notice> notice = std::move(notice_);
  if (notice->timer != 0) loop_.cancel_timer(notice->timer);
  const bool undo =
      !notice->forced &&
      (outcome == overlay::ResizeDone::DECLINED || outcome == overlay::ResizeDone::FAILED ||
       (outcome == overlay::ResizeDone::TIMED_OUT && notice->kind == overlay::Resize::SHRINK));
  if (undo) {
    Status restored = write_files(notice->before);
    if (!restored.is_ok()) spdlog::error("elastic {}: {}", dir_, restored.message());
  }
  double seconds = 0;
  if (outcome == overlay::ResizeDone::ACKNOWLEDGED || outcome == overlay::ResizeDone::DECLINED) {
    const auto waited = std::chrono::steady_clock::now() - notice->sent;
    seconds = std::chrono::duration<double>(waited).count();
  }
  notice->answer(outcome, reason, seconds);
}

}  // namespace hpcq::agent
