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
// does).
//
// Flow (issue 45): the agents send a task stream's output only as far as
// hpcqd has granted (Credit, overlay OutputCredit), so that a slow reader
// makes the task wait rather than lose bytes. A stream's grant is what its
// readers have taken plus the stream's window: the job's `bytes_per_job`
// shared by its streams, at least kMinStreamWindow each. Readers register
// (add_reader) and each read says how far that reader has come; the
// slowest holds the grants back. With no reader the grants stand still (a
// run's output waits for its hpcq run or an attach). What no reader has
// taken is dropped only past a hard cap (an agent that does not wait for
// credit); readers are told what was dropped. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
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

  // What a task stream's shell may send before any grant (the job shell's
  // starting credit, agent/executor/output_credit.h), and the least window
  // of a stream.
  static constexpr std::uint64_t kInitialCredit = 64 << 10;
  static constexpr std::uint64_t kMinStreamWindow = 64 << 10;
  // The most one read returns (at least one chunk): readers take output in
  // steps, so that what they take is granted again while they write it.
  static constexpr std::size_t kMaxBatchBytes = 1 << 20;

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
    std::uint32_t node = 0;    // the overlay rank that sent it: where credit goes
  };

  // A stream's agent may send up to `granted`; readers have taken it up to
  // `consumed` (what the agent need not keep for sending again).
  struct Credit {
    JobId id = 0;
    std::uint32_t step = 0;
    std::uint32_t node = 0;
    std::uint32_t attempt = 0;
    int rank = 0;
    bool is_stderr = false;
    std::uint64_t granted = 0;
    std::uint64_t consumed = 0;
  };

  // Loop thread.
  void append(JobId id, std::uint32_t step, const Source& source, std::string data);
  void end(JobId id, std::uint32_t step);
  void shutdown();  // wakes every reader
  // The grants to send (to Credit::node), since the last call.
  std::vector<Credit> take_credit();
  // Loop thread, now and then: the grants of the streams that have used
  // theirs, due again (a grant may have been lost on the way).
  void credit_again();
  // Called (any thread, no lock held) when take_credit() has something.
  void on_credit_due(std::function<void()> callback);

  // A reader of a job's (or step's) output, from its first read until
  // remove_reader: the output it has not taken is held for it and its
  // streams get no credit past it. Returns its token for read().
  std::uint64_t add_reader(JobId id, std::uint32_t step);
  void remove_reader(JobId id, std::uint32_t step, std::uint64_t reader);

  struct Batch {
    std::vector<Chunk> chunks;
    std::uint64_t dropped = 0;  // bytes from `from` that are no longer held
    std::uint64_t next = 0;     // where the next read starts
    bool ended = false;         // and nothing after `next` will come
    bool shut_down = false;
  };
  // Output from offset `from` on (`from_now`: from the end of what has come so
  // far), waiting up to `timeout` for some; at most kMaxBatchBytes of it.
  // `reader` (from add_reader; 0: none) has taken everything before `from`.
  Batch read(JobId id, std::uint32_t step, std::uint64_t from, bool from_now,
             std::chrono::milliseconds timeout, std::uint64_t reader = 0);

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
      std::uint32_t node = 0;
      std::uint64_t top = 0;                   // the end of the furthest byte received
      std::uint64_t consumed = 0;              // taken by every reader up to here
      std::uint64_t granted = kInitialCredit;  // the agent may send up to here
    };
    // By task stream: (attempt, rank, stderr).
    std::map<std::tuple<std::uint32_t, int, bool>, Received> received;
    std::map<std::uint64_t, std::uint64_t> readers;  // token -> offset it has taken to
    std::uint64_t taken = 0;                         // every reader has taken the output up to here
  };
  using Key = std::pair<JobId, std::uint32_t>;
  using StreamKey = std::tuple<std::uint32_t, int, bool>;
  std::shared_ptr<Entry> entry(Key key);  // made if missing; mutex_ held
  // append's work under the lock; wakes the readers.
  void add_data(JobId id, std::uint32_t step, const Source& source, std::string data);
  void notify_credit();                   // calls credit_due_ if grants wait; mutex_ not held
  void add_chunk(Entry& e, Chunk chunk);  // mutex_ held
  // The slowest reader has moved: the streams' consumed offsets follow it.
  void readers_moved(Key key, Entry& e);  // mutex_ held
  // Grants what is due to the entry's streams (`again`: also repeats the
  // grants of those that have used theirs).
  void grant(Key key, Entry& e, bool again = false);  // mutex_ held
  std::uint64_t window(const Entry& e) const;
  std::function<void()> credit_due_;  // guarded by mutex_ (set once, before use)
  std::vector<Credit> due_;           // guarded by mutex_
  bool credit_signalled_ = false;     // guarded by mutex_; credit_due_ called since take_credit
  std::uint64_t next_reader_ = 1;     // guarded by mutex_
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
