#include "agent/output_spool.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>

#include "agent/executor/posix.h"
#include "lib/core/bytes.h"

namespace hpcq::agent {
namespace {

constexpr std::size_t kHeaderBytes = 4 + 1 + 4 + 8 + 8 + 4;

std::string record_of(const OutputLog::Chunk& chunk) {
  std::string record;
  record.reserve(kHeaderBytes + chunk.data.size());
  put_u32(record, static_cast<std::uint32_t>(chunk.rank));
  record += chunk.is_stderr ? '\1' : '\0';
  put_u32(record, chunk.attempt);
  put_u64(record, chunk.offset);
  put_u64(record, chunk.incarnation);
  put_u32(record, static_cast<std::uint32_t>(chunk.data.size()));
  record += chunk.data;
  return record;
}

// The whole records of a file's bytes; a torn or damaged tail is dropped.
std::vector<OutputLog::Chunk> records_in(std::string_view bytes, JobId id, std::uint32_t step) {
  std::vector<OutputLog::Chunk> chunks;
  while (bytes.size() >= kHeaderBytes) {
    const std::uint32_t length = get_u32(bytes.substr(25));
    if (bytes.size() - kHeaderBytes < length || bytes[4] > 1) break;
    OutputLog::Chunk chunk;
    chunk.id = id;
    chunk.step = step;
    chunk.rank = static_cast<int>(get_u32(bytes));
    chunk.is_stderr = bytes[4] == 1;
    chunk.attempt = get_u32(bytes.substr(5));
    chunk.offset = get_u64(bytes.substr(9));
    chunk.incarnation = get_u64(bytes.substr(17));
    chunk.data = std::string(bytes.substr(kHeaderBytes, length));
    chunks.push_back(std::move(chunk));
    bytes.remove_prefix(kHeaderBytes + length);
  }
  return chunks;
}

// "<job>.<step>" as a run, else nullopt.
std::optional<OutputSpool::Run> run_of(std::string_view name) {
  JobId id = 0;
  std::uint32_t step = 0;
  const char* end = name.data() + name.size();
  auto [dot, bad_id] = std::from_chars(name.data(), end, id);
  if (bad_id != std::errc() || dot == end || *dot != '.') return std::nullopt;
  auto [rest, bad_step] = std::from_chars(dot + 1, end, step);
  if (bad_step != std::errc() || rest != end || dot + 1 == end) return std::nullopt;
  return OutputSpool::Run{id, step};
}

}  // namespace

OutputSpool::OutputSpool(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) spdlog::warn("output spool {}: {}", dir_, ec.message());
}

OutputSpool::~OutputSpool() {
  for (auto& [run, file] : files_) close(file.fd);
}

std::string OutputSpool::path_of(Run run) const {
  return dir_ + "/" + std::to_string(run.first) + "." + std::to_string(run.second);
}

std::vector<OutputLog::Chunk> OutputSpool::take(const std::set<Run>& runs) {
  std::map<Run, std::string> taken;  // in order of runs
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::optional<Run> run = run_of(entry.path().filename().string());
    if (run && runs.count(*run)) {
      taken.emplace(*run, entry.path());
    } else {
      std::filesystem::remove(entry.path(), ec);
    }
  }
  std::vector<OutputLog::Chunk> chunks;
  for (const auto& [run, path] : taken) {
    std::vector<OutputLog::Chunk> left = records_in(read_whole(path), run.first, run.second);
    // Appended from here on: the torn tail goes.
    rewrite(run, left);
    (void)file_of(run);  // open, so that forget() finds it
    chunks.insert(chunks.end(), std::make_move_iterator(left.begin()),
                  std::make_move_iterator(left.end()));
  }
  return chunks;
}

OutputSpool::File* OutputSpool::file_of(Run run) {
  auto it = files_.find(run);
  if (it != files_.end()) return &it->second;
  const std::string path = path_of(run);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    spdlog::warn("output spool {}: {}", path, errno_text(errno));
    return nullptr;
  }
  const off_t size = lseek(fd, 0, SEEK_END);
  return &files_.emplace(run, File{fd, size < 0 ? 0 : static_cast<std::uint64_t>(size)})
              .first->second;
}

bool OutputSpool::append(const OutputLog::Chunk& chunk) {
  File* file = file_of({chunk.id, chunk.step});
  if (file == nullptr) return false;
  const std::string record = record_of(chunk);
  if (write(file->fd, record.data(), record.size()) != static_cast<ssize_t>(record.size())) {
    spdlog::warn("output spool of job {}: {}", chunk.id, errno_text(errno));
    return false;
  }
  file->bytes += record.size();
  return file->bytes > kCompactBytes;
}

void OutputSpool::rewrite(Run run, const std::vector<OutputLog::Chunk>& kept) {
  auto it = files_.find(run);
  if (it != files_.end()) close_file(it, /*remove=*/false);
  std::string bytes;
  for (const OutputLog::Chunk& chunk : kept) bytes += record_of(chunk);
  Status written = replace_file(path_of(run), bytes);
  if (!written.is_ok()) spdlog::warn("output spool: {}", written.message());
}

void OutputSpool::forget(JobId id, std::uint32_t step) {
  for (auto it = files_.lower_bound({id, step}); it != files_.end() && it->first.first == id;) {
    if (step != 0 && it->first.second != step) break;
    const auto next = std::next(it);
    close_file(it, /*remove=*/true);
    it = next;
  }
}

void OutputSpool::close_file(std::map<Run, File>::iterator it, bool remove) {
  close(it->second.fd);
  if (remove) unlink(path_of(it->first).c_str());
  files_.erase(it);
}

}  // namespace hpcq::agent
