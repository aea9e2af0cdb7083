// The in-memory feed of job state changes behind WatchJobs.
//
// The leader's loop thread appends; gRPC threads read with a timeout. Holds
// the most recent `capacity` events; a reader that asks for events older
// than that learns it fell behind (and can re-read the job's current state).
// Sequence numbers grow across daemon restarts (each run starts from its
// start time in microseconds), so a reader resuming with a number from an
// earlier run learns that the events in between are gone rather than
// silently missing them. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "proto/hpcq.pb.h"

namespace hpcq::daemon {

class JobEvents {
 public:
  // `first_seq`: the first event's number (above every earlier run's).
  JobEvents(std::size_t capacity, std::uint64_t first_seq)
      : capacity_(capacity), next_seq_(first_seq) {}

  // Loop thread. Assigns and returns the event's sequence number.
  std::uint64_t append(v1::JobEvent event, std::uint32_t uid);
  std::uint64_t last_seq() const;  // first_seq - 1 before any event

  struct Batch {
    std::vector<v1::JobEvent> events;
    bool fell_behind = false;  // events after `after_seq` were already dropped
    std::uint64_t oldest = 0;  // with fell_behind: resume from the job state, then this seq
    bool closed = false;
    std::uint64_t scanned_to = 0;  // the last seq looked at: the next read starts after it
  };
  // Events with seq > after_seq visible to `uid` (all when admin), waiting up
  // to `timeout` for the first one.
  Batch read(std::uint64_t after_seq, std::uint32_t uid, bool admin, std::uint64_t job_id,
             std::chrono::milliseconds timeout) const;

  void close();  // wakes every reader (daemon shutdown)

 private:
  struct Entry {
    v1::JobEvent event;
    std::uint32_t uid;
  };
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::deque<Entry> entries_;  // guarded by mutex_; ascending seq
  std::uint64_t next_seq_;     // guarded by mutex_
  bool closed_ = false;        // guarded by mutex_
};

}  // namespace hpcq::daemon
