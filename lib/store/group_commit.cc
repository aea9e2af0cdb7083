#include "lib/store/group_commit.h"

#include <chrono>
#include <future>
#include <utility>
#include <vector>

namespace hpcq::store {

GroupCommitter::GroupCommitter(std::unique_ptr<Store> store, std::size_t max_ops,
                               CommitObserver observer)
    : max_ops_(max_ops),
      observer_(std::move(observer)),
      store_(std::move(store)),
      writer_([this] { run(); }) {}

GroupCommitter::~GroupCommitter() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  writer_.join();
}

void GroupCommitter::submit(WriteBatch batch, Done done) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(Pending{std::move(batch), std::move(done)});
  }
  wake_.notify_one();
}

Status GroupCommitter::submit_and_wait(WriteBatch batch) {
  std::promise<Status> promise;
  std::future<Status> result = promise.get_future();
  submit(std::move(batch), [&promise](Status s) { promise.set_value(std::move(s)); });
  return result.get();
}

void GroupCommitter::run() {
  for (;;) {
    std::deque<Pending> group;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything is committed
      std::size_t ops = 0;
      while (!queue_.empty()) {
        std::size_t n = queue_.front().batch.size();
        if (!group.empty() && ops + n > max_ops_) break;
        ops += n;
        group.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    commit_group(group);
  }
}

void GroupCommitter::commit_group(std::deque<Pending>& group) {
  std::vector<WriteBatch> batches;
  batches.reserve(group.size());
  for (Pending& p : group) batches.push_back(std::move(p.batch));

  const std::uint64_t commits_before = store_->commits();
  const auto start = std::chrono::steady_clock::now();
  std::vector<Status> results(batches.size());
  Status merged = store_->write_all(batches);
  if (merged.is_ok() || batches.size() == 1) {
    for (Status& r : results) r = merged;
  } else {
    // Which batch broke the transaction is unknown (and a transient error
    // may have hit any of them): give each one its own chance.
    for (std::size_t i = 0; i < batches.size(); ++i) results[i] = store_->write(batches[i]);
  }
  if (observer_) {
    observer_(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  transactions_.fetch_add(store_->commits() - commits_before, std::memory_order_relaxed);
  batches_.fetch_add(batches.size(), std::memory_order_relaxed);

  // Only now, after the commit (and its fsync), is anyone told.
  for (std::size_t i = 0; i < group.size(); ++i) {
    if (group[i].done) group[i].done(std::move(results[i]));
  }
}

}  // namespace hpcq::store
