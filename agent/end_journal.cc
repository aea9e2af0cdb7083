#include "agent/end_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace hpcq::agent {
namespace {

namespace fs = std::filesystem;

Status write_durably(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return internal_error(tmp + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return internal_error(tmp + ": " + why);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return internal_error(tmp + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return internal_error(path + ": " + std::strerror(errno));
  }
  return Status::ok();
}

// "<seq>-<job>.pb" -> seq, or 0 for any other name.
std::uint64_t seq_of(const std::string& name) {
  std::uint64_t seq = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), seq);
  if (ec != std::errc{} || end == name.data() + name.size() || *end != '-' ||
      !name.ends_with(".pb")) {
    return 0;
  }
  return seq;
}

}  // namespace

Result<std::unique_ptr<EndJournal>> EndJournal::open(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return internal_error("end journal " + dir + ": " + ec.message());
  std::unique_ptr<EndJournal> journal(new EndJournal(dir));
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::uint64_t seq = seq_of(name);
    overlay::JobUpdate update;
    std::ifstream in(entry.path(), std::ios::binary);
    if (seq == 0 || !in || !update.ParseFromIstream(&in)) {
      // A temporary file of a write that never finished, or damage.
      spdlog::warn("end journal: removing {}", entry.path().string());
      fs::remove(entry.path(), ec);
      continue;
    }
    auto known = journal->seq_of_job_.find(key_of(update));
    if (known != journal->seq_of_job_.end()) {
      if (known->second > seq) {  // an older record of the same job
        fs::remove(entry.path(), ec);
        continue;
      }
      journal->remove(known->second);
    }
    journal->by_seq_[seq] = update;
    journal->seq_of_job_[key_of(update)] = seq;
    journal->next_seq_ = std::max(journal->next_seq_, seq + 1);
  }
  if (ec) return internal_error("end journal " + dir + ": " + ec.message());
  return journal;
}

std::string EndJournal::path_of(std::uint64_t seq, const overlay::JobUpdate& update) const {
  return dir_ + "/" + std::to_string(seq) + "-" + std::to_string(update.job_id()) +
         (update.step() != 0 ? "." + std::to_string(update.step()) : "") + ".pb";
}

void EndJournal::remove(std::uint64_t seq) {
  auto it = by_seq_.find(seq);
  if (it == by_seq_.end()) return;
  std::error_code ec;
  fs::remove(path_of(seq, it->second), ec);
  seq_of_job_.erase(key_of(it->second));
  by_seq_.erase(it);
}

Status EndJournal::add(const overlay::JobUpdate& update) {
  auto known = seq_of_job_.find(key_of(update));
  if (known != seq_of_job_.end()) remove(known->second);
  const std::uint64_t seq = next_seq_++;
  by_seq_[seq] = update;
  seq_of_job_[key_of(update)] = seq;
  return write_durably(path_of(seq, update), update.SerializeAsString());
}

void EndJournal::ack(JobId job, std::uint32_t attempt, std::uint32_t step) {
  auto known = seq_of_job_.find({job, step});
  if (known == seq_of_job_.end()) return;
  if (by_seq_.at(known->second).attempt() != attempt) return;
  remove(known->second);
}

std::vector<overlay::JobUpdate> EndJournal::entries() const {
  std::vector<overlay::JobUpdate> out;
  out.reserve(by_seq_.size());
  for (const auto& [seq, update] : by_seq_) out.push_back(update);
  return out;
}

}  // namespace hpcq::agent
