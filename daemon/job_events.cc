#include "daemon/job_events.h"

#include <algorithm>

namespace hpcq::daemon {

std::uint64_t JobEvents::append(v1::JobEvent event, std::uint32_t uid) {
  std::uint64_t seq;
  {
    std::lock_guard lock(mutex_);
    seq = next_seq_++;
    event.set_seq(seq);
    entries_.push_back({std::move(event), uid});
    if (entries_.size() > capacity_) entries_.pop_front();
  }
  changed_.notify_all();
  return seq;
}

std::uint64_t JobEvents::last_seq() const {
  std::lock_guard lock(mutex_);
  return next_seq_ - 1;
}

void JobEvents::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  changed_.notify_all();
}

JobEvents::Batch JobEvents::read(std::uint64_t after_seq, std::uint32_t uid, bool admin,
                                 std::uint64_t job_id, std::chrono::milliseconds timeout) const {
  Batch batch;
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return closed_ || next_seq_ - 1 > after_seq; });
  batch.closed = closed_;
  batch.scanned_to = next_seq_ - 1;
  // Gone: dropped from the ring, or from before this run of the daemon.
  const std::uint64_t oldest = entries_.empty() ? next_seq_ : entries_.front().event.seq();
  if (after_seq != 0 && after_seq + 1 < oldest) {
    batch.fell_behind = true;
    batch.oldest = oldest;
    return batch;
  }
  if (entries_.empty()) return batch;
  // Sequence numbers are contiguous, so the first unread entry is found by offset.
  std::uint64_t first = entries_.front().event.seq();
  std::size_t start = after_seq + 1 > first ? static_cast<std::size_t>(after_seq + 1 - first) : 0;
  for (std::size_t i = start; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (!admin && e.uid != uid) continue;
    if (job_id != 0 && e.event.id() != job_id) continue;
    batch.events.push_back(e.event);
  }
  return batch;
}

}  // namespace hpcq::daemon
