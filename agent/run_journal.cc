#include "agent/run_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>

#include "agent/executor/posix.h"
#include "lib/core/bytes.h"

namespace hpcq::agent {
namespace {

namespace fs = std::filesystem;

constexpr char kEntry = 'E', kForget = 'F';
constexpr std::size_t kHeaderBytes = 8;       // length, checksum
constexpr std::size_t kBodyMinBytes = 1 + 8;  // kind, seq
constexpr std::uint32_t kBodyMaxBytes = 1 << 24;
constexpr char kJournalName[] = "journal";

std::uint32_t fnv1a(std::string_view bytes) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : bytes) h = (h ^ c) * 16777619u;
  return h;
}

std::string record(char kind, std::uint64_t seq, std::string_view payload = {}) {
  std::string body(1, kind);
  put_u64(body, seq);
  body += payload;
  std::string out;
  put_u32(out, static_cast<std::uint32_t>(body.size()));
  put_u32(out, fnv1a(body));
  return out + body;
}

Status sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return internal_error(dir + ": " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  return rc == 0 ? Status::ok() : internal_error(dir + ": " + std::strerror(saved));
}

// An older agent's "<seq>-<job>.pb" -> seq, or 0 for any other name.
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

template <typename Message>
Result<std::unique_ptr<RunJournal<Message>>> RunJournal<Message>::open(
    const std::string& dir, std::string name, bool sync, std::uint64_t compact_bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return internal_error(name + " " + dir + ": " + ec.message());
  std::unique_ptr<RunJournal> journal(new RunJournal(dir, std::move(name), sync, compact_bytes));
  const std::string path = dir + "/" + kJournalName;

  // An older agent's files, one per end; taken into the journal below.
  std::vector<fs::path> old_files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == kJournalName) continue;
    const std::uint64_t seq = seq_of(name);
    Message old;
    std::ifstream in(entry.path(), std::ios::binary);
    if (seq != 0 && in && old.ParseFromIstream(&in)) {
      journal->remember(seq, old);
      old_files.push_back(entry.path());
    } else {  // a temporary file of a write that never finished, or damage
      spdlog::warn("{}: removing {}", journal->name_, entry.path().string());
      fs::remove(entry.path(), ec);
    }
  }
  if (ec) return internal_error(journal->name_ + " " + dir + ": " + ec.message());

  const std::string bytes = read_whole(path);
  journal->load(bytes);

  journal->fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (journal->fd_ < 0) return internal_error(path + ": " + std::strerror(errno));
  // A torn tail is cut off, so that the next record follows the last whole one.
  if (journal->file_bytes_ < bytes.size() &&
      ::ftruncate(journal->fd_, static_cast<off_t>(journal->file_bytes_)) != 0) {
    return internal_error(path + ": " + std::strerror(errno));
  }
  if (!old_files.empty() || journal->damaged_) {
    HPCQ_RETURN_IF_ERROR(journal->rewrite());
    for (const fs::path& file : old_files) fs::remove(file, ec);
  }
  // The journal's own name is durable before any end relies on it.
  HPCQ_RETURN_IF_ERROR(sync_dir(dir));
  return journal;
}

template <typename Message>
RunJournal<Message>::~RunJournal() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// The record at the start of `bytes`, if a whole one is there: its size, its
// kind and seq, and for an entry its message.
template <typename Message>
struct Parsed {
  std::size_t size = 0;
  char kind = 0;
  std::uint64_t seq = 0;
  Message entry;
};
template <typename Message>
std::optional<Parsed<Message>> parse_record(std::string_view bytes) {
  if (bytes.size() < kHeaderBytes) return std::nullopt;
  const std::uint32_t length = get_u32(bytes);
  if (length < kBodyMinBytes || length > kBodyMaxBytes || bytes.size() - kHeaderBytes < length) {
    return std::nullopt;
  }
  const std::string_view body = bytes.substr(kHeaderBytes, length);
  if (fnv1a(body) != get_u32(bytes.substr(4))) return std::nullopt;
  Parsed<Message> p;
  p.size = kHeaderBytes + length;
  p.kind = body[0];
  p.seq = get_u64(body.substr(1));
  if (p.kind == kEntry) {
    if (!p.entry.ParseFromArray(body.data() + kBodyMinBytes,
                                static_cast<int>(body.size() - kBodyMinBytes))) {
      return std::nullopt;
    }
  } else if (p.kind != kForget) {
    return std::nullopt;
  }
  return p;
}

}  // namespace

template <typename Message>
void RunJournal<Message>::load(const std::string& bytes) {
  std::size_t at = 0;
  while (at < bytes.size()) {
    std::optional<Parsed<Message>> p = parse_record<Message>(std::string_view(bytes).substr(at));
    if (!p) {
      // Damage (the disk's) or a torn tail (a crash mid-append): whole
      // records after it, if any, are kept, and the file is rewritten
      // without it; with none after it, it is a torn tail, cut off.
      std::size_t next = at + 1;
      while (next < bytes.size() && !parse_record<Message>(std::string_view(bytes).substr(next))) {
        ++next;
      }
      if (next == bytes.size()) {
        spdlog::warn("{}: cutting off {} bytes of a torn record at byte {} of {}/{}", name_,
                     bytes.size() - at, at, dir_, kJournalName);
        break;
      }
      spdlog::warn("{}: skipping {} damaged bytes at byte {} of {}/{}", name_, next - at, at, dir_,
                   kJournalName);
      damaged_ = true;
      at = next;
      continue;
    }
    if (p->kind == kEntry) {
      remember(p->seq, p->entry);
    } else {
      forget(p->seq);
    }
    at += p->size;
    file_bytes_ = at;  // the end of the last whole record
  }
}

template <typename Message>
void RunJournal<Message>::remember(std::uint64_t seq, const Message& entry) {
  auto known = seq_of_job_.find(key_of(entry));
  if (known != seq_of_job_.end()) {
    if (known->second > seq) return;  // an older entry of the same run
    by_seq_.erase(known->second);
  }
  by_seq_[seq] = entry;
  seq_of_job_[key_of(entry)] = seq;
  next_seq_ = std::max(next_seq_, seq + 1);
}

template <typename Message>
void RunJournal<Message>::forget(std::uint64_t seq) {
  auto it = by_seq_.find(seq);
  if (it == by_seq_.end()) return;
  seq_of_job_.erase(key_of(it->second));
  by_seq_.erase(it);
}

template <typename Message>
Status RunJournal<Message>::append(const std::string& bytes) {
  Status s = write_fully(fd_, bytes, dir_ + "/" + kJournalName);
  if (s.is_ok()) file_bytes_ += bytes.size();
  return s;
}

template <typename Message>
Status RunJournal<Message>::add(const Message& entry) {
  const std::uint64_t seq = next_seq_;
  remember(seq, entry);  // replaces an earlier entry of the run: the later record wins on load
  Status s = append(record(kEntry, seq, entry.SerializeAsString()));
  if (s.is_ok() && sync_ && ::fdatasync(fd_) != 0) {
    s = internal_error(dir_ + "/" + kJournalName + ": " + std::strerror(errno));
  }
  compact_if_large();
  return s;
}

template <typename Message>
void RunJournal<Message>::ack(JobId job, std::uint32_t attempt, std::uint32_t step) {
  auto known = seq_of_job_.find({job, step});
  if (known == seq_of_job_.end()) return;
  if (by_seq_.at(known->second).attempt() != attempt) return;
  const std::uint64_t seq = known->second;
  forget(seq);
  Status s = append(record(kForget, seq));
  if (!s.is_ok()) spdlog::warn("{}: {}", name_, s.message());
  compact_if_large();
}

template <typename Message>
void RunJournal<Message>::compact_if_large() {
  if (file_bytes_ < compact_bytes_) return;
  Status s = Status::ok();
  if (by_seq_.empty()) {
    if (::ftruncate(fd_, 0) == 0) {
      file_bytes_ = 0;
    } else {
      s = internal_error(dir_ + "/" + kJournalName + ": " + std::strerror(errno));
    }
  } else {
    s = rewrite();
  }
  if (!s.is_ok()) spdlog::warn("{}: not compacted: {}", name_, s.message());
}

template <typename Message>
Status RunJournal<Message>::rewrite() {
  std::string bytes;
  for (const auto& [seq, entry] : by_seq_) bytes += record(kEntry, seq, entry.SerializeAsString());
  const std::string path = dir_ + "/" + kJournalName, fresh = path + ".new";
  const int fd = ::open(fresh.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return internal_error(fresh + ": " + std::strerror(errno));
  Status s = write_fully(fd, bytes, fresh);
  if (s.is_ok() && ::fsync(fd) != 0) s = internal_error(fresh + ": " + std::strerror(errno));
  if (s.is_ok() && ::rename(fresh.c_str(), path.c_str()) != 0) {
    s = internal_error(path + ": " + std::strerror(errno));
  }
  if (!s.is_ok()) {
    ::close(fd);
    ::unlink(fresh.c_str());
    return s;
  }
  ::close(fd_);
  fd_ = fd;
  file_bytes_ = bytes.size();
  return sync_dir(dir_);
}

template <typename Message>
std::vector<Message> RunJournal<Message>::entries() const {
  std::vector<Message> out;
  out.reserve(by_seq_.size());
  for (const auto& [seq, entry] : by_seq_) out.push_back(entry);
  return out;
}

template class RunJournal<overlay::JobUpdate>;
template class RunJournal<overlay::Launch>;

}  // namespace hpcq::agent
