#include "daemon/job_output.h"

namespace hpcq::daemon {

std::shared_ptr<JobOutput::Entry> JobOutput::entry(Key key) {
  std::shared_ptr<Entry>& e = entries_[key];
  if (!e) e = std::make_shared<Entry>();
  return e;
}

void JobOutput::append(JobId id, std::uint32_t step, const Source& source, std::string data) {
  if (data.empty()) return;
  {
    std::lock_guard lock(mutex_);
    Entry& e = *entry({id, step});  // the map holds it
    if (e.ended) return;            // a late copy after the end: the job's output is closed
    Entry::Received& received = e.received[{source.attempt, source.rank, source.is_stderr}];
    if (received.incarnation != source.incarnation) {
      received = {source.incarnation, {}};  // an agent that (re)started counts anew
    }
    // Each part of [begin, end) not taken yet becomes a chunk.
    const std::uint64_t begin = source.offset, end = begin + data.size();
    std::uint64_t at = begin;
    auto next = received.ranges.upper_bound(begin);
    if (next != received.ranges.begin() && std::prev(next)->second > at) {
      at = std::prev(next)->second;
    }
    while (at < end) {
      const std::uint64_t stop = next == received.ranges.end() ? end : std::min(end, next->first);
      if (at < stop) {
        add_chunk(e, {0, source.rank, source.is_stderr, data.substr(at - begin, stop - at),
                      source.attempt, at});
      }
      if (next == received.ranges.end()) break;
      at = std::max(at, next->second);
      ++next;
    }
    // Taken: merge [begin, end) into the ranges.
    std::uint64_t lo = begin, hi = end;
    auto it = received.ranges.upper_bound(lo);
    if (it != received.ranges.begin() && std::prev(it)->second >= lo) --it;
    while (it != received.ranges.end() && it->first <= hi) {
      lo = std::min(lo, it->first);
      hi = std::max(hi, it->second);
      it = received.ranges.erase(it);
    }
    received.ranges.emplace(lo, hi);
  }
  changed_.notify_all();
}

void JobOutput::add_chunk(Entry& e, Chunk chunk) {
  const std::size_t size = chunk.data.size();
  chunk.offset = e.end;
  e.chunks.push_back(std::move(chunk));
  e.end += size;
  e.held += size;
  while (e.held > bytes_per_job_ && e.chunks.size() > 1) {
    e.held -= e.chunks.front().data.size();
    e.chunks.pop_front();
    e.begin = e.chunks.front().offset;
  }
}

void JobOutput::end(JobId id, std::uint32_t step) {
  {
    std::lock_guard lock(mutex_);
    Entry& e = *entry({id, step});  // the map holds it
    if (e.ended) return;
    e.ended = true;
    ended_.push_back({id, step});
    while (ended_.size() > ended_kept_) {
      entries_.erase(ended_.front());
      ended_.pop_front();
    }
  }
  changed_.notify_all();
}

void JobOutput::shutdown() {
  {
    std::lock_guard lock(mutex_);
    shut_down_ = true;
  }
  changed_.notify_all();
}

JobOutput::Batch JobOutput::read(JobId id, std::uint32_t step, std::uint64_t from, bool from_now,
                                 std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const std::shared_ptr<Entry> held = entry({id, step});
  Entry& e = *held;
  if (from_now) from = e.end;
  changed_.wait_for(lock, timeout, [&] { return shut_down_ || e.ended || e.end > from; });
  Batch batch;
  batch.shut_down = shut_down_;
  if (from < e.begin) {
    batch.dropped = e.begin - from;
    from = e.begin;
  }
  for (const Chunk& c : e.chunks) {
    if (c.offset >= from) batch.chunks.push_back(c);
  }
  batch.next = e.end;
  batch.ended = e.ended;
  return batch;
}

}  // namespace hpcq::daemon
