// The tasks' output of the jobs launched with forward_output (hpcq run) and
// of batch jobs' steps, behind WatchOutput (hpcq run, hpcq attach). Each
// job's and each step's output is a stream of its own (step 0: the job's).
//
// The leader's loop thread appends what the agents send (Output messages) and
// marks a job's output ended at the job's end; gRPC threads read with a
// timeout. Offsets count the bytes of a job's output from its first; each job
// keeps its most recent `bytes_per_job` bytes, and the output of the last
// `ended_kept` ended jobs is kept for `hpcq attach --all`. A job's entry is
// made by whichever comes first: its output, its end or a reader.
//
// Each chunk says where it starts in what its task wrote to that stream (the
// agent counts it); a copy the agent sends again after the tree healed is
// skipped. What fills a gap (an earlier chunk lost on one way and sent again
// after a later one came another way) is taken when it comes: chunks carry
// their stream offsets so that readers can put them in order (hpcq run
// does). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "lib/core/ids.h"

namespace hpcq::daemon {

class JobOutput {
 public:
  JobOutput(std::size_t bytes_per_job, std::size_t ended_kept)
      : bytes_per_job_(bytes_per_job), ended_kept_(ended_kept) {}

  struct Chunk {
    std::uint64_t offset = 0;  // of its first byte in the job's output
    int rank = 0;
    bool is_stderr = false;
    std::string data;
    std::uint32_t attempt = 0;
    std::uint64_t stream_offset = 0;  // of its first byte in its task's stream
  };

  // Where a chunk comes from.
  struct Source {
    std::uint64_t incarnation = 0;  // of the agent process that counted `offset`
    std::uint32_t attempt = 0;
    int rank = 0;
    bool is_stderr = false;
    std::uint64_t offset = 0;  // of the chunk's first byte in the task's stream
  };

  // Loop thread.
  void append(JobId id, std::uint32_t step, const Source& source, std::string data);
  void end(JobId id, std::uint32_t step);
  void shutdown();  // wakes every reader

  struct Batch {
    std::vector<Chunk> chunks;
    std::uint64_t dropped = 0;  // bytes from `from` that are no longer held
    std::uint64_t next = 0;     // where the next read starts
    bool ended = false;         // and nothing after `next` will come
    bool shut_down = false;
  };
  // Output from offset `from` on (`from_now`: from the end of what has come so
  // far), waiting up to `timeout` for some.
  Batch read(JobId id, std::uint32_t step, std::uint64_t from, bool from_now,
             std::chrono::milliseconds timeout);

 private:
  struct Entry {
    std::deque<Chunk> chunks;
    std::uint64_t begin = 0;  // offset of the first byte held
    std::uint64_t end = 0;    // offset after the last byte appended
    std::size_t held = 0;     // bytes in `chunks`
    bool ended = false;
    struct Received {
      std::uint64_t incarnation = 0;
      std::map<std::uint64_t, std::uint64_t> ranges;  // [begin, end) taken, merged
    };
    // By task stream: (attempt, rank, stderr).
    std::map<std::tuple<std::uint32_t, int, bool>, Received> received;
  };
  using Key = std::pair<JobId, std::uint32_t>;
  std::shared_ptr<Entry> entry(Key key);  // made if missing; mutex_ held
  void add_chunk(Entry& e, Chunk chunk);  // mutex_ held
  const std::size_t bytes_per_job_;
  const std::size_t ended_kept_;
  std::mutex mutex_;
  std::condition_variable changed_;
  // Shared: a reader waiting on an entry keeps it while an end drops it.
  std::map<Key, std::shared_ptr<Entry>> entries_;  // guarded by mutex_
  std::deque<Key> ended_;                          // guarded by mutex_; in the order they ended
  bool shut_down_ = false;                         // guarded by mutex_
};

}  // namespace hpcq::daemon
