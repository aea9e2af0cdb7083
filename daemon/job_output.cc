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
      received = {source.incarnation, source.offset};  // an agent that (re)started counts anew
    }
    const std::uint64_t after = source.offset + data.size();
    if (after <= received.bytes) return;  // had it all
    if (source.offset < received.bytes) data.erase(0, received.bytes - source.offset);
    received.bytes = after;
    const std::size_t size = data.size();
    e.chunks.push_back({e.end, source.rank, source.is_stderr, std::move(data)});
    e.end += size;
    e.held += size;
    while (e.held > bytes_per_job_ && e.chunks.size() > 1) {
      e.held -= e.chunks.front().data.size();
      e.chunks.pop_front();
      e.begin = e.chunks.front().offset;
    }
  }
  changed_.notify_all();
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
