#include "daemon/job_output.h"

#include <algorithm>
#include <utility>

namespace hpcq::daemon {

std::shared_ptr<JobOutput::Entry> JobOutput::entry(Key key) {
  std::shared_ptr<Entry>& e = entries_[key];
  if (!e) e = std::make_shared<Entry>();
  return e;
}

void JobOutput::append(JobId id, std::uint32_t step, const Source& source, std::string data) {
  if (data.empty()) return;
  add_data(id, step, source, std::move(data));
  notify_credit();
}

void JobOutput::add_data(JobId id, std::uint32_t step, const Source& source, std::string data) {
  {
    std::lock_guard lock(mutex_);
    Entry& e = *entry({id, step});  // the map holds it
    if (e.ended) return;            // a late copy after the end: the job's output is closed
    auto [stream, first] = e.received.try_emplace({source.attempt, source.rank, source.is_stderr});
    Entry::Received& received = stream->second;
    if (!first && received.incarnation != source.incarnation) {
      received = {};  // an agent that (re)started counts anew
      first = true;
    }
    if (first) {
      received.incarnation = source.incarnation;
      // A stream first seen past its start (this hpcqd restarted): what came
      // before is not here, and what the agent was granted is not known.
      received.consumed = source.offset;
      if (source.offset > 0) received.granted = source.offset;
    }
    received.node = source.node;
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
    received.top = std::max(received.top, end);
    grant({id, step}, e);
  }
  changed_.notify_all();
}

void JobOutput::add_chunk(Entry& e, Chunk chunk) {
  const std::size_t size = chunk.data.size();
  chunk.offset = e.end;
  e.chunks.push_back(std::move(chunk));
  e.end += size;
  e.held += size;
  // Past bytes_per_job what every reader has taken goes; what one has not
  // stays, up to a cap that streams within their credit never reach.
  const std::size_t cap = 4 * bytes_per_job_ + e.received.size() * kMinStreamWindow;
  while (e.held > bytes_per_job_ && e.chunks.size() > 1) {
    const Chunk& front = e.chunks.front();
    const bool taken = front.offset + front.data.size() <= e.taken;
    if (!taken && e.held <= cap) break;
    if (!taken) {  // nobody will have it: its stream's credit goes on
      auto s = e.received.find({front.attempt, front.rank, front.is_stderr});
      if (s != e.received.end()) {
        s->second.consumed = std::max(s->second.consumed, front.stream_offset + front.data.size());
      }
    }
    e.held -= front.data.size();
    e.chunks.pop_front();
    e.begin = e.chunks.front().offset;
  }
}

std::uint64_t JobOutput::window(const Entry& e) const {
  const std::uint64_t streams = std::max<std::size_t>(1, e.received.size());
  return std::max<std::uint64_t>(kMinStreamWindow, bytes_per_job_ / streams);
}

void JobOutput::readers_moved(Key key, Entry& e) {
  if (e.readers.empty()) return;  // the grants stand still until one comes
  std::uint64_t slowest = e.end;
  for (const auto& [token, at] : e.readers) slowest = std::min(slowest, at);
  if (slowest <= e.taken) return;
  // The chunks in [taken, slowest): their streams are taken that far.
  auto it = std::lower_bound(
      e.chunks.begin(), e.chunks.end(), e.taken,
      [](const Chunk& c, std::uint64_t at) { return c.offset + c.data.size() <= at; });
  for (; it != e.chunks.end() && it->offset < slowest; ++it) {
    auto s = e.received.find({it->attempt, it->rank, it->is_stderr});
    if (s == e.received.end()) continue;
    const std::uint64_t upto =
        it->stream_offset + std::min<std::uint64_t>(it->data.size(), slowest - it->offset);
    s->second.consumed = std::max(s->second.consumed, upto);
  }
  e.taken = slowest;
  grant(key, e);
}

void JobOutput::grant(Key key, Entry& e, bool again) {
  if (e.ended) return;
  const std::uint64_t w = window(e);
  for (auto& [stream, s] : e.received) {
    const std::uint64_t target = s.consumed + w;
    const bool waiting = s.top >= s.granted;  // the agent has used its grant
    // Not a message per chunk: a grant when a quarter of the window is free,
    // or at once for a stream that waits.
    const bool due = target > s.granted && (waiting || target - s.granted >= w / 4);
    if (!due && !(again && waiting)) continue;
    s.granted = std::max(s.granted, target);
    due_.push_back({key.first, key.second, s.node, std::get<0>(stream), std::get<1>(stream),
                    std::get<2>(stream), s.granted, s.consumed});
  }
}

std::vector<JobOutput::Credit> JobOutput::take_credit() {
  std::lock_guard lock(mutex_);
  credit_signalled_ = false;
  return std::exchange(due_, {});
}

void JobOutput::credit_again() {
  std::lock_guard lock(mutex_);
  for (auto& [key, e] : entries_) grant(key, *e, /*again=*/true);
}

void JobOutput::on_credit_due(std::function<void()> callback) {
  std::lock_guard lock(mutex_);
  credit_due_ = std::move(callback);
}

void JobOutput::notify_credit() {
  std::function<void()> callback;
  {
    std::lock_guard lock(mutex_);
    if (due_.empty() || credit_signalled_ || !credit_due_) return;
    credit_signalled_ = true;
    callback = credit_due_;
  }
  callback();
}

std::uint64_t JobOutput::add_reader(JobId id, std::uint32_t step) {
  std::lock_guard lock(mutex_);
  Entry& e = *entry({id, step});
  const std::uint64_t token = next_reader_++;
  e.readers[token] = e.taken;  // holds back nothing until its first read
  return token;
}

void JobOutput::remove_reader(JobId id, std::uint32_t step, std::uint64_t reader) {
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find({id, step});
    if (it == entries_.end()) return;
    it->second->readers.erase(reader);
    readers_moved({id, step}, *it->second);
  }
  notify_credit();
}

void JobOutput::end(JobId id, std::uint32_t step) {
  {
    std::lock_guard lock(mutex_);
    Entry& e = *entry({id, step});  // the map holds it
    if (e.ended) return;
    e.ended = true;
    // Ended: nothing more is granted; it keeps its last bytes_per_job.
    while (e.held > bytes_per_job_ && e.chunks.size() > 1) {
      e.held -= e.chunks.front().data.size();
      e.chunks.pop_front();
      e.begin = e.chunks.front().offset;
    }
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
                                 std::chrono::milliseconds timeout, std::uint64_t reader) {
  std::unique_lock lock(mutex_);
  const std::shared_ptr<Entry> held = entry({id, step});
  Entry& e = *held;
  if (from_now) from = e.end;
  if (auto r = e.readers.find(reader); r != e.readers.end()) {
    r->second = std::max(from, e.begin);  // the reader has taken all before
    readers_moved({id, step}, e);
    lock.unlock();
    notify_credit();
    lock.lock();
  }
  changed_.wait_for(lock, timeout, [&] { return shut_down_ || e.ended || e.end > from; });
  Batch batch;
  batch.shut_down = shut_down_;
  if (from < e.begin) {
    batch.dropped = e.begin - from;
    from = e.begin;
  }
  auto it = std::lower_bound(e.chunks.begin(), e.chunks.end(), from,
                             [](const Chunk& c, std::uint64_t at) { return c.offset < at; });
  std::size_t bytes = 0;
  batch.next = e.end;
  for (; it != e.chunks.end(); ++it) {
    if (bytes > 0 && bytes + it->data.size() > kMaxBatchBytes) {
      batch.next = it->offset;
      break;
    }
    bytes += it->data.size();
    batch.chunks.push_back(*it);
  }
  batch.ended = e.ended && batch.next == e.end;
  return batch;
}

}  // namespace hpcq::daemon
