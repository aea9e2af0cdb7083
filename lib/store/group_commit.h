// Group commit: many threads' WriteBatches share one transaction (one fsync).
//
// A GroupCommitter owns a Store and one writer thread. submit() queues a
// batch and returns at once; the writer takes everything queued since its
// last commit (up to max_ops operations, but always at least one batch),
// writes it as ONE transaction, then calls each batch's `done` with the
// result, in submission order. So N concurrent submitters cost about one
// fsync, not N, and a `done` with an OK Status means the batch is durable
// (see store.h).
//
// When a merged transaction fails, the writer retries each of its batches in
// a transaction of its own, so that one bad batch (say an event for an
// unknown job) fails only its own `done`, not its neighbours'.
//
// Threads: submit() and submit_and_wait() may be called from any thread,
// concurrently. `done` runs on the writer thread: it must be quick and must
// not call submit_and_wait() (that would wait for itself); it may call
// submit(). The Store is touched only by the writer thread once the
// constructor returns.
//
// Shutdown: the destructor lets the writer commit everything still queued
// (including batches that `done` callbacks submit while it drains), call
// every `done`, and exit; then it joins it. No submit() may start once the
// destructor has begun.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "lib/core/status.h"
#include "lib/store/store.h"

// Clang's -Wthread-safety checks these; other compilers see plain comments.
#if defined(__clang__)
#define HPCQ_GUARDED_BY(x) __attribute__((guarded_by(x)))
#else
#define HPCQ_GUARDED_BY(x)
#endif

namespace hpcq::store {

class GroupCommitter {
 public:
  using Done = std::function<void(Status)>;

  // Bounds one transaction, so a burst cannot make a single commit (and the
  // time its submitters wait) arbitrarily long.
  static constexpr std::size_t kDefaultMaxOps = 4096;

  // Told, on the writer thread, how long each group's commit took (hpcqd's
  // metrics); may be empty.
  using CommitObserver = std::function<void(double seconds)>;

  explicit GroupCommitter(std::unique_ptr<Store> store, std::size_t max_ops = kDefaultMaxOps,
                          CommitObserver observer = {});
  ~GroupCommitter();
  GroupCommitter(const GroupCommitter&) = delete;
  GroupCommitter& operator=(const GroupCommitter&) = delete;

  // Any thread. `done` (may be empty) is called exactly once, on the writer
  // thread, after the batch is committed or has failed.
  void submit(WriteBatch batch, Done done);
  // Any thread but the writer's: submit() and wait for the result.
  Status submit_and_wait(WriteBatch batch);

  // Any thread. Transactions committed (merged groups plus lone retries) and
  // batches completed, successfully or not, since construction.
  std::uint64_t transactions() const { return transactions_.load(std::memory_order_relaxed); }
  std::uint64_t batches() const { return batches_.load(std::memory_order_relaxed); }

 private:
  struct Pending {
    WriteBatch batch;
    Done done;
  };

  void run();  // the writer thread's loop
  void commit_group(std::deque<Pending>& group);

  const std::size_t max_ops_;
  const CommitObserver observer_;
  std::unique_ptr<Store> store_;  // writer thread only (after construction)

  std::mutex mutex_;
  std::condition_variable wake_;  // signalled on submit and on shutdown
  std::deque<Pending> queue_ HPCQ_GUARDED_BY(mutex_);
  bool stopping_ HPCQ_GUARDED_BY(mutex_) = false;

  std::atomic<std::uint64_t> transactions_{0};
  std::atomic<std::uint64_t> batches_{0};

  std::thread writer_;  // last: starts after every member above exists
};

}  // namespace hpcq::store
