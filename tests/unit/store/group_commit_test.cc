#include "lib/store/group_commit.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "lib/store/sqlite_store.h"
#include "tests/unit/store/temp_dir.h"

namespace hpcq::store {
namespace {

using testing::TempDir;

job::Job make_job(JobId id) {
  job::Job j;
  j.id = id;
  j.uid = 1000;
  j.gid = 1000;
  j.user = "u";
  j.spec.name = "j" + std::to_string(id);
  j.spec.argv = {"/bin/true"};
  j.submit_time = static_cast<TimeUs>(id);
  return j;
}

// What the leader writes for a submission: the job and its first event.
WriteBatch submission(JobId id) {
  WriteBatch b;
  b.insert_job(make_job(id));
  b.append_event(id, static_cast<TimeUs>(id), "submit", "{}");
  return b;
}

std::unique_ptr<SqliteStore> open_ok(const std::string& path) {
  auto store = SqliteStore::open(path);
  EXPECT_TRUE(store.is_ok()) << store.status().to_string();
  if (!store.is_ok()) return nullptr;
  return std::move(store).value();
}

std::set<JobId> stored_ids(const std::string& path) {
  std::set<JobId> ids;
  auto store = open_ok(path);
  if (store == nullptr) return ids;
  auto jobs = store->load_jobs();
  EXPECT_TRUE(jobs.is_ok()) << jobs.status().to_string();
  if (!jobs.is_ok()) return ids;
  for (const auto& j : *jobs) ids.insert(j.id);
  return ids;
}

// Holds the writer thread inside a `done` callback until open() is called,
// so that whatever is submitted meanwhile queues up behind it.
class Gate {
 public:
  // Submits an empty batch whose `done` blocks; returns once the writer is
  // parked there.
  void close(GroupCommitter& committer) {
    std::promise<void> parked;
    auto parked_future = parked.get_future();
    committer.submit(WriteBatch{}, [this, &parked](Status) {
      parked.set_value();
      released_.wait();
    });
    parked_future.wait();
  }
  void open() { release_.set_value(); }

 private:
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
};

TEST(GroupCommitter, ConcurrentSubmittersAreAllDurableAndShareTransactions) {
  TempDir dir;
  const std::string path = dir.file("hpcq.db");
  constexpr int kThreads = 8;
  constexpr int kPerThread = 500;
  constexpr int kTotal = kThreads * kPerThread;

  std::vector<std::atomic<int>> calls(kTotal + 1);
  std::vector<std::atomic<int>> failures(kTotal + 1);
  // Each thread's callbacks must come in that thread's submission order.
  std::vector<int> last_seen(kThreads, -1);
  std::atomic<int> order_violations{0};
  std::uint64_t transactions = 0;
  std::uint64_t batches = 0;
  {
    auto store = open_ok(path);
    ASSERT_NE(store, nullptr);
    GroupCommitter committer(std::move(store));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          JobId id = static_cast<JobId>(t * kPerThread + i + 1);
          committer.submit(submission(id), [&, id, t, i](Status s) {
            calls[id].fetch_add(1);
            if (!s.is_ok()) failures[id].fetch_add(1);
            // Only the writer thread touches last_seen.
            if (last_seen[static_cast<std::size_t>(t)] >= i) order_violations.fetch_add(1);
            last_seen[static_cast<std::size_t>(t)] = i;
          });
        }
      });
    }
    for (auto& th : threads) th.join();
    // A waited submission after all of them: the callbacks of everything
    // before it have run when it returns.
    ASSERT_TRUE(committer.submit_and_wait(WriteBatch{}).is_ok());
    transactions = committer.transactions();
    batches = committer.batches();
  }
  for (JobId id = 1; id <= kTotal; ++id) {
    ASSERT_EQ(calls[id].load(), 1) << "job " << id;
    ASSERT_EQ(failures[id].load(), 0) << "job " << id;
  }
  EXPECT_EQ(order_violations.load(), 0);
  EXPECT_EQ(batches, static_cast<std::uint64_t>(kTotal) + 1);
  // Group commit: far fewer transactions (fsyncs) than submissions.
  EXPECT_GE(transactions, 1u);
  EXPECT_LT(transactions * 10, static_cast<std::uint64_t>(kTotal))
      << transactions << " transactions for " << kTotal << " submissions";

  std::set<JobId> ids = stored_ids(path);
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kTotal));
  auto store = open_ok(path);
  ASSERT_NE(store, nullptr);
  auto events = store->load_events(kTotal);
  ASSERT_TRUE(events.is_ok());
  EXPECT_EQ(events->size(), 1u);
}

TEST(GroupCommitter, WaitingSubmittersShareTransactions) {
  TempDir dir;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 100;
  auto store = open_ok(dir.file("hpcq.db"));
  ASSERT_NE(store, nullptr);
  GroupCommitter committer(std::move(store));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        Status s =
            committer.submit_and_wait(submission(static_cast<JobId>(t * kPerThread + i + 1)));
        if (!s.is_ok()) failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(committer.batches(), static_cast<std::uint64_t>(kThreads * kPerThread));
  // While one fsync runs the others queue, so groups form even though each
  // thread has at most one submission in flight.
  EXPECT_LT(committer.transactions(), static_cast<std::uint64_t>(kThreads * kPerThread));
}

TEST(GroupCommitter, DoneIsCalledInSubmissionOrder) {
  TempDir dir;
  auto store = open_ok(dir.file("hpcq.db"));
  ASSERT_NE(store, nullptr);
  std::vector<int> order;  // written by the writer thread only
  {
    GroupCommitter committer(std::move(store));
    for (int i = 0; i < 1000; ++i) {
      WriteBatch b;
      if (i % 3 != 0) b = submission(static_cast<JobId>(i + 1));  // some empty batches too
      committer.submit(std::move(b), [&order, i](Status s) {
        EXPECT_TRUE(s.is_ok()) << s.to_string();
        order.push_back(i);
      });
    }
  }  // the destructor drains and joins: `order` is complete and ours again
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
}

TEST(GroupCommitter, TheObserverIsToldEachCommitsTime) {
  TempDir dir;
  auto store = open_ok(dir.file("hpcq.db"));
  ASSERT_NE(store, nullptr);
  std::vector<double> times;  // written by the writer thread only
  std::uint64_t transactions = 0;
  {
    GroupCommitter committer(std::move(store), GroupCommitter::kDefaultMaxOps,
                             [&times](double seconds) { times.push_back(seconds); });
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(committer.submit_and_wait(submission(static_cast<JobId>(i + 1))).is_ok());
    }
    transactions = committer.transactions();
  }
  ASSERT_EQ(times.size(), transactions);
  for (double t : times) EXPECT_GE(t, 0.0);
}

TEST(GroupCommitter, BadBatchFailsAloneAndItsNeighboursCommit) {
  TempDir dir;
  const std::string path = dir.file("hpcq.db");
  Status first;
  Status bad;
  Status last;
  std::uint64_t transactions = 0;
  {
    auto store = open_ok(path);
    ASSERT_NE(store, nullptr);
    Gate gate;  // declared first: it must outlive the committer's callbacks
    GroupCommitter committer(std::move(store));
    gate.close(committer);
    // These three are queued together, so they go into one merged transaction.
    committer.submit(submission(1), [&](Status s) { first = s; });
    WriteBatch broken;
    broken.append_event(77, 1, "submit", "{}");  // no job 77
    committer.submit(std::move(broken), [&](Status s) { bad = s; });
    committer.submit(submission(2), [&](Status s) { last = s; });
    gate.open();
    ASSERT_TRUE(committer.submit_and_wait(WriteBatch{}).is_ok());
    transactions = committer.transactions();
  }
  EXPECT_TRUE(first.is_ok()) << first.to_string();
  EXPECT_TRUE(last.is_ok()) << last.to_string();
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.code(), Code::kFailedPrecondition);
  EXPECT_NE(bad.message().find("job 77: FOREIGN KEY constraint failed"), std::string::npos)
      << bad.message();
  // The merged attempt rolled back; then each good batch committed alone.
  EXPECT_EQ(transactions, 2u);
  EXPECT_EQ(stored_ids(path), (std::set<JobId>{1, 2}));
}

TEST(GroupCommitter, TransactionsAreBoundedByMaxOps) {
  TempDir dir;
  const std::string path = dir.file("hpcq.db");
  {
    auto store = open_ok(path);
    ASSERT_NE(store, nullptr);
    Gate gate;
    GroupCommitter committer(std::move(store), /*max_ops=*/10);
    gate.close(committer);
    // 50 batches of 2 ops: 5 per transaction.
    for (JobId id = 1; id <= 50; ++id) committer.submit(submission(id), nullptr);
    // One batch over the limit on its own still commits (alone).
    WriteBatch big;
    for (JobId id = 51; id <= 70; ++id) big.insert_job(make_job(id));
    committer.submit(std::move(big), nullptr);
    gate.open();
    ASSERT_TRUE(committer.submit_and_wait(WriteBatch{}).is_ok());
    EXPECT_EQ(committer.transactions(), 11u);
  }
  EXPECT_EQ(stored_ids(path).size(), 70u);
}

TEST(GroupCommitter, DestructorCommitsEverythingQueued) {
  TempDir dir;
  const std::string path = dir.file("hpcq.db");
  std::atomic<int> ok{0};
  Gate gate;
  std::thread opener;
  {
    auto store = open_ok(path);
    ASSERT_NE(store, nullptr);
    GroupCommitter committer(std::move(store));
    gate.close(committer);
    for (JobId id = 1; id <= 200; ++id) {
      committer.submit(submission(id), [&ok, &committer, id](Status s) {
        if (s.is_ok()) ok.fetch_add(1);
        // A follow-up submitted from a callback while the destructor drains.
        if (id == 200) {
          WriteBatch follow_up;
          follow_up.append_event(200, 201, "follow-up", "{}");
          committer.submit(std::move(follow_up), [&ok](Status f) {
            if (f.is_ok()) ok.fetch_add(1);
          });
        }
      });
    }
    // Destroy with the queue full: open the gate from another thread once
    // the destructor has begun waiting.
    opener = std::thread([&gate] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      gate.open();
    });
  }
  opener.join();
  EXPECT_EQ(ok.load(), 201);
  EXPECT_EQ(stored_ids(path).size(), 200u);
  auto store = open_ok(path);
  ASSERT_NE(store, nullptr);
  auto events = store->load_events(200);
  ASSERT_TRUE(events.is_ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].name, "follow-up");
}

// Writes all of `text` to `fd`, or exits (only used in the forked child).
void write_all_or_die(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) _exit(3);
    done += static_cast<std::size_t>(n);
  }
}

// The child: 4 threads submit jobs through a GroupCommitter; each id is
// written to `fd` from its `done`, i.e. once the commit is acknowledged.
[[noreturn]] void run_child(const std::string& path, int fd) {
  auto opened = SqliteStore::open(path);
  if (!opened.is_ok()) _exit(2);
  GroupCommitter committer(std::move(opened).value());
  constexpr int kThreads = 4;
  constexpr JobId kPerThread = 1'000'000;  // far more than time allows: killed first
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&committer, fd, t] {
      std::atomic<int> in_flight{0};
      for (JobId i = 0; i < kPerThread; ++i) {
        JobId id = static_cast<JobId>(t) * kPerThread + i + 1;
        // A little backpressure keeps the queue (and the child's memory) small.
        while (in_flight.load() > 64) std::this_thread::yield();
        in_flight.fetch_add(1);
        committer.submit(submission(id), [fd, id, &in_flight](Status s) {
          if (!s.is_ok()) _exit(4);
          write_all_or_die(fd, std::to_string(id) + "\n");
          in_flight.fetch_sub(1);
        });
      }
      while (in_flight.load() > 0) std::this_thread::yield();
    });
  }
  for (auto& th : threads) th.join();
  _exit(0);
}

TEST(GroupCommitter, NoAcknowledgedWriteIsLostToKill9) {
  TempDir dir;
  const std::string path = dir.file("hpcq.db");
  { ASSERT_NE(open_ok(path), nullptr); }  // schema created before the race

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::fflush(nullptr);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    run_child(path, fds[1]);
  }
  close(fds[1]);

  // Read acknowledgements until enough have arrived, then kill mid-stream.
  constexpr std::size_t kKillAfter = 2000;
  std::string received;
  std::size_t lines = 0;
  char buf[4096];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (lines < kKillAfter && std::chrono::steady_clock::now() < deadline) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    received.append(buf, static_cast<std::size_t>(n));
    for (ssize_t i = 0; i < n; ++i) lines += buf[i] == '\n';
  }
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
      << "the child ended on its own (status " << wstatus << ") before it was killed";
  // Whatever was acknowledged before the kill is still in the pipe.
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) {
    received.append(buf, static_cast<std::size_t>(n));
  }
  close(fds[0]);

  std::set<JobId> acknowledged;
  std::size_t start = 0;
  for (std::size_t nl; (nl = received.find('\n', start)) != std::string::npos; start = nl + 1) {
    acknowledged.insert(std::stoull(received.substr(start, nl - start)));
  }
  ASSERT_GE(acknowledged.size(), kKillAfter);

  std::set<JobId> stored = stored_ids(path);
  std::size_t lost = 0;
  for (JobId id : acknowledged) lost += stored.count(id) == 0;
  EXPECT_EQ(lost, 0u) << "of " << acknowledged.size() << " acknowledged jobs";
  EXPECT_GE(stored.size(), acknowledged.size());
}

}  // namespace
}  // namespace hpcq::store
