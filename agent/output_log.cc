#include "agent/output_log.h"

#include <algorithm>
#include <climits>

namespace hpcq::agent {

const OutputLog::Chunk& OutputLog::add(Chunk chunk) {
  Stream& s = streams_[{chunk.id, chunk.step, chunk.rank, chunk.is_stderr}];
  if (s.attempt != chunk.attempt) {
    bytes_kept_ -= s.held;
    s = Stream{};
    s.attempt = chunk.attempt;
  }
  if (s.end == 0 && s.chunks.empty()) s.incarnation = chunk.incarnation;
  chunk.incarnation = s.incarnation;
  chunk.offset = s.end;
  s.end += chunk.data.size();
  s.held += chunk.data.size();
  bytes_kept_ += chunk.data.size();
  s.chunks.push_back(std::move(chunk));
  trim(s);
  return s.chunks.back();
}

void OutputLog::open_stream(JobId id, std::uint32_t attempt, std::uint32_t step, int rank,
                            bool is_stderr) {
  Stream& s = streams_[{id, step, rank, is_stderr}];
  if (s.attempt == attempt && s.end > 0) return;
  bytes_kept_ -= s.held;
  s = Stream{};
  s.attempt = attempt;
}

void OutputLog::restore(Chunk chunk) {
  Stream& s = streams_[{chunk.id, chunk.step, chunk.rank, chunk.is_stderr}];
  if (s.attempt != chunk.attempt) {
    bytes_kept_ -= s.held;
    s = Stream{};
    s.attempt = chunk.attempt;
  }
  if (chunk.offset < s.end) return;  // a copy
  s.incarnation = chunk.incarnation;
  s.end = chunk.offset + chunk.data.size();
  // The shell was let send this far at least.
  s.allowed = std::max<std::uint64_t>(s.allowed, s.end);
  s.held += chunk.data.size();
  bytes_kept_ += chunk.data.size();
  s.chunks.push_back(std::move(chunk));
  trim(s);
}

void OutputLog::trim(Stream& s) {
  // The newest chunk stays even when it alone is larger than the budget.
  while (s.held > kept_per_stream_ && s.chunks.size() > 1) {
    const Chunk& front = s.chunks.front();
    // What no reader has yet stays, within what credit allows (a shell that
    // does not wait for credit, a container's, is cut at kMaxUntaken).
    if (front.offset + front.data.size() > s.consumed && s.held <= kMaxUntaken) break;
    s.held -= front.data.size();
    bytes_kept_ -= front.data.size();
    s.chunks.pop_front();
  }
}

std::uint64_t OutputLog::credit(JobId id, std::uint32_t attempt, std::uint32_t step, int rank,
                                bool is_stderr, std::uint64_t granted, std::uint64_t consumed,
                                std::uint64_t initial) {
  auto it = streams_.find({id, step, rank, is_stderr});
  if (it == streams_.end() || it->second.attempt != attempt) return 0;
  Stream& s = it->second;
  s.consumed = std::max(s.consumed, consumed);
  trim(s);
  const std::uint64_t allowed = std::max(s.allowed, initial);
  s.allowed = std::max(allowed, granted);
  return s.allowed - allowed;
}

std::vector<OutputLog::Chunk> OutputLog::kept() const {
  std::vector<Chunk> all;
  for (const auto& [key, s] : streams_) all.insert(all.end(), s.chunks.begin(), s.chunks.end());
  return all;
}

std::vector<OutputLog::Chunk> OutputLog::kept(JobId id, std::uint32_t step) const {
  std::vector<Chunk> of_run;
  for (auto it = streams_.lower_bound({id, step, INT_MIN, false});
       it != streams_.end() && std::get<0>(it->first) == id && std::get<1>(it->first) == step;
       ++it) {
    of_run.insert(of_run.end(), it->second.chunks.begin(), it->second.chunks.end());
  }
  return of_run;
}

void OutputLog::forget(JobId id, std::uint32_t attempt, std::uint32_t step) {
  for (auto it = streams_.lower_bound({id, step, 0, false});
       it != streams_.end() && std::get<0>(it->first) == id;) {
    if (step != 0 && std::get<1>(it->first) != step) break;  // past the step's streams
    if (it->second.attempt != attempt) {
      ++it;
      continue;
    }
    bytes_kept_ -= it->second.held;
    it = streams_.erase(it);
  }
}

}  // namespace hpcq::agent
