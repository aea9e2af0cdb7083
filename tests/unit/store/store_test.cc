#include "lib/store/sqlite_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "tests/unit/store/sample_jobs.h"
#include "tests/unit/store/temp_dir.h"

namespace hpcq::store {
namespace {

using testing::TempDir;

// A second, raw connection for looking behind the Store's back.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK) << path;
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  void exec(const std::string& sql) {
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
        << sql << ": " << (err ? err : "");
    sqlite3_free(err);
  }
  // The first column of the first row, as text ("" when there is none).
  std::string query(const std::string& sql) {
    std::string out;
    char* err = nullptr;
    int rc = sqlite3_exec(
        db_, sql.c_str(),
        [](void* o, int n, char** v, char**) {
          if (n > 0 && v[0] != nullptr) *static_cast<std::string*>(o) = v[0];
          return 1;  // first row only: the abort this causes is expected
        },
        &out, &err);
    EXPECT_TRUE(rc == SQLITE_OK || rc == SQLITE_ABORT) << sql << ": " << (err ? err : "");
    sqlite3_free(err);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

std::unique_ptr<SqliteStore> open_ok(const std::string& path) {
  auto store = SqliteStore::open(path);
  EXPECT_TRUE(store.is_ok()) << store.status().to_string();
  if (!store.is_ok()) return nullptr;
  return std::move(store).value();
}

TEST(Store, NewDatabaseGetsTheCurrentSchemaInWalMode) {
  TempDir dir;
  const std::string path = dir.file("hpcq.db");
  auto store = open_ok(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), SqliteStore::current_schema_version());
  EXPECT_EQ(store->path(), path);
  auto max_id = store->max_job_id();
  ASSERT_TRUE(max_id.is_ok());
  EXPECT_EQ(*max_id, 0u);

  RawDb raw(path);
  EXPECT_EQ(raw.query("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.query("PRAGMA user_version"),
            std::to_string(SqliteStore::current_schema_version()));
  for (const char* table : {"jobs", "job_events", "nodes", "meta"}) {
    EXPECT_EQ(raw.query(std::string("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                    "name = '") +
                        table + "'"),
              table);
  }
}

TEST(Store, MigrationsAreNumberedFromOneWithoutGaps) {
  auto steps = SqliteStore::migrations();
  ASSERT_FALSE(steps.empty());
  for (std::size_t i = 0; i < steps.size(); ++i)
    EXPECT_EQ(steps[i].version, static_cast<int>(i) + 1);
  EXPECT_EQ(SqliteStore::current_schema_version(), steps.back().version);
}

TEST(Store, OlderDatabaseIsMigratedAndKeepsItsRows) {
  TempDir dir;
  const std::string path = dir.file("old.db");
  {
    // A database as version 1 of the code left it.
    RawDb raw(path);
    raw.exec(SqliteStore::migrations()[0].sql);
    raw.exec("PRAGMA user_version = 1");
    raw.exec(
        "INSERT INTO jobs (id, uid, gid, user, name, state, spec, allocation, submit_time)"
        " VALUES (41, 1000, 100, 'bob', 'old', 'COMPLETED', '{\"name\": \"old\"}', '{}', 5)");
    raw.exec("INSERT INTO job_events VALUES (41, 1, 5, 'submit', '{}')");
  }
  auto store = open_ok(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), SqliteStore::current_schema_version());

  auto jobs = store->load_jobs();
  ASSERT_TRUE(jobs.is_ok()) << jobs.status().to_string();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].id, 41u);
  EXPECT_EQ((*jobs)[0].spec.name, "old");
  EXPECT_EQ((*jobs)[0].state, job::JobState::kCompleted);
  auto max_id = store->max_job_id();
  ASSERT_TRUE(max_id.is_ok());
  EXPECT_EQ(*max_id, 41u);  // rows from before the meta table counted too
  auto events = store->load_events(41);
  ASSERT_TRUE(events.is_ok());
  ASSERT_EQ(events->size(), 1u);

  // Later steps really ran: version 2 adds the indexes.
  RawDb raw(path);
  EXPECT_EQ(raw.query("SELECT name FROM sqlite_master WHERE name = 'jobs_by_state'"),
            "jobs_by_state");
  EXPECT_EQ(raw.query("PRAGMA user_version"),
            std::to_string(SqliteStore::current_schema_version()));
}

TEST(Store, DatabaseNewerThanTheCodeIsRefused) {
  TempDir dir;
  const std::string path = dir.file("future.db");
  { ASSERT_NE(open_ok(path), nullptr); }
  {
    RawDb raw(path);
    raw.exec("PRAGMA user_version = " + std::to_string(SqliteStore::current_schema_version() + 1));
  }
  auto store = SqliteStore::open(path);
  ASSERT_FALSE(store.is_ok());
  EXPECT_EQ(store.status().code(), Code::kFailedPrecondition);
  const std::string msg = store.status().message();
  EXPECT_EQ(msg.rfind("store " + path + ": schema version " +
                          std::to_string(SqliteStore::current_schema_version() + 1) + " is newer",
                      0),
            0u)
      << msg;
}

TEST(Store, OpenErrorNamesTheFileAndTheReason) {
  TempDir dir;
  const std::string path = dir.file("no/such/dir/hpcq.db");
  auto store = SqliteStore::open(path);
  ASSERT_FALSE(store.is_ok());
  EXPECT_EQ(store.status().message(), "store " + path + ": open: No such file or directory");
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// The store holds jobs' environments (API tokens among them): no other user
// may read it, whatever the umask of whoever started the daemon.
TEST(Store, FilesAreTheOwnersOnlyWhateverTheUmask) {
  TempDir dir;
  const std::string path = dir.file("hpcq.db");
  const mode_t old_umask = umask(0);
  {
    auto store = open_ok(path);
    ASSERT_NE(store, nullptr);
    WriteBatch batch;
    batch.insert_job(sample_job(1));
    ASSERT_TRUE(store->write(batch).is_ok());
    EXPECT_EQ(mode_of(path), 0600u);
    EXPECT_EQ(mode_of(path + "-wal"), 0600u);
  }
  umask(old_umask);
}

TEST(Store, AnOlderLaxDatabaseIsTightened) {
  TempDir dir;
  const std::string path = dir.file("hpcq.db");
  { ASSERT_NE(open_ok(path), nullptr); }
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  { ASSERT_NE(open_ok(path), nullptr); }
  EXPECT_EQ(mode_of(path), 0600u);
}

TEST(Store, JobRoundTripsThroughInsertUpdateAndReopen) {
  TempDir dir;
  const std::string path = dir.file("hpcq.db");
  job::Job job = sample_job(7);
  {
    auto store = open_ok(path);
    ASSERT_NE(store, nullptr);
    WriteBatch batch;
    batch.insert_job(job);
    EXPECT_EQ(batch.size(), 1u);
    ASSERT_TRUE(store->write(batch).is_ok());
    EXPECT_EQ(store->commits(), 1u);

    auto loaded = store->load_jobs();
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    ASSERT_EQ(loaded->size(), 1u);
    expect_same_job(job, (*loaded)[0]);

    job.state = job::JobState::kRunning;
    job.allocation = sample_allocation();
    job.start_time = job.submit_time + 1000;
    job.reason = "";
    job.requeue_count = 2;
    job.held = true;
    job.spec.time_limit_s = 1200;
    job.cpu_time_us = 1'500'000;
    job.max_memory_bytes = 3ULL << 30;
    job.spec.batch = true;
    job.spec.warn_signal = 10;
    job.spec.warn_seconds = 90;
    WriteBatch update;
    update.update_job(job);
    ASSERT_TRUE(store->write(update).is_ok());
    loaded = store->load_jobs();
    ASSERT_TRUE(loaded.is_ok());
    ASSERT_EQ(loaded->size(), 1u);
    expect_same_job(job, (*loaded)[0]);
  }
  // A new Store on the same file (as after a restart) sees the same thing.
  auto store = open_ok(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->commits(), 0u);
  auto loaded = store->load_jobs();
  ASSERT_TRUE(loaded.is_ok());
  ASSERT_EQ(loaded->size(), 1u);
  expect_same_job(job, (*loaded)[0]);
  auto max_id = store->max_job_id();
  ASSERT_TRUE(max_id.is_ok());
  EXPECT_EQ(*max_id, 7u);
}

TEST(Store, JobsLoadInAscendingIdOrder) {
  TempDir dir;
  auto store = open_ok(dir.file("hpcq.db"));
  ASSERT_NE(store, nullptr);
  WriteBatch batch;
  for (JobId id : {5u, 3u, 9u, 1u}) batch.insert_job(sample_job(id));
  ASSERT_TRUE(store->write(batch).is_ok());
  auto jobs = store->load_jobs();
  ASSERT_TRUE(jobs.is_ok());
  std::vector<JobId> ids;
  for (const auto& j : *jobs) ids.push_back(j.id);
  EXPECT_EQ(ids, (std::vector<JobId>{1, 3, 5, 9}));
}

TEST(Store, EventsKeepTheirAppendOrderPerJob) {
  TempDir dir;
  auto store = open_ok(dir.file("hpcq.db"));
  ASSERT_NE(store, nullptr);
  WriteBatch setup;
  setup.insert_job(sample_job(1));
  setup.insert_job(sample_job(2));
  ASSERT_TRUE(store->write(setup).is_ok());

  // Interleaved across jobs and spread over several transactions; times out
  // of order on purpose: order is append order, not time.
  const char* names[] = {"submit", "alloc", "start", "finish", "clean"};
  for (int round = 0; round < 5; ++round) {
    WriteBatch b;
    b.append_event(1, 100 - round, names[round], "{\"round\": " + std::to_string(round) + "}");
    b.append_event(2, 200 + round, std::string(names[round]) + "-2", "{}");
    ASSERT_TRUE(store->write(b).is_ok());
  }
  auto events = store->load_events(1);
  ASSERT_TRUE(events.is_ok()) << events.status().to_string();
  ASSERT_EQ(events->size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const EventRecord& e = (*events)[static_cast<std::size_t>(i)];
    EXPECT_EQ(e.job_id, 1u);
    EXPECT_EQ(e.seq, i + 1);
    EXPECT_EQ(e.time, 100 - i);
    EXPECT_EQ(e.name, names[i]);
    EXPECT_EQ(e.detail_json, "{\"round\": " + std::to_string(i) + "}");
  }
  auto other = store->load_events(2);
  ASSERT_TRUE(other.is_ok());
  ASSERT_EQ(other->size(), 5u);
  EXPECT_EQ((*other)[4].name, "clean-2");
  auto none = store->load_events(3);
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->empty());
}

TEST(Store, NodesAreUpsertedByRank) {
  TempDir dir;
  auto store = open_ok(dir.file("hpcq.db"));
  ASSERT_NE(store, nullptr);
  WriteBatch b;
  b.upsert_node(2, "node002", "up", "{\"cores\": 8}", 10);
  b.upsert_node(1, "node001", "up", "{}", 11);
  ASSERT_TRUE(store->write(b).is_ok());
  WriteBatch c;
  c.upsert_node(2, "node002", "down", "{\"cores\": 8}", 20);
  ASSERT_TRUE(store->write(c).is_ok());

  auto nodes = store->load_nodes();
  ASSERT_TRUE(nodes.is_ok()) << nodes.status().to_string();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].rank, 1u);
  EXPECT_EQ((*nodes)[0].name, "node001");
  EXPECT_EQ((*nodes)[0].updated_time, 11);
  EXPECT_EQ((*nodes)[1].rank, 2u);
  EXPECT_EQ((*nodes)[1].state, "down");
  EXPECT_EQ((*nodes)[1].topology_json, "{\"cores\": 8}");
  EXPECT_EQ((*nodes)[1].updated_time, 20);
}

TEST(Store, JobIdHighWaterMarkSurvivesDeletes) {
  TempDir dir;
  const std::string path = dir.file("hpcq.db");
  {
    auto store = open_ok(path);
    ASSERT_NE(store, nullptr);
    WriteBatch b;
    b.insert_job(sample_job(12));
    b.insert_job(sample_job(4));  // a lower id later does not lower the mark
    ASSERT_TRUE(store->write(b).is_ok());
  }
  {
    RawDb raw(path);
    raw.exec("DELETE FROM jobs");
  }
  auto store = open_ok(path);
  ASSERT_NE(store, nullptr);
  auto max_id = store->max_job_id();
  ASSERT_TRUE(max_id.is_ok());
  EXPECT_EQ(*max_id, 12u);
}

TEST(Store, BatchIsAllOrNothing) {
  TempDir dir;
  const std::string path = dir.file("hpcq.db");
  auto store = open_ok(path);
  ASSERT_NE(store, nullptr);

  WriteBatch bad;
  bad.insert_job(sample_job(1));
  bad.append_event(1, 1, "submit", "{}");
  bad.upsert_node(1, "n1", "up", "{}", 1);
  bad.append_event(99, 1, "submit", "{}");  // no job 99: foreign key
  Status s = store->write(bad);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "store " + path + ": append event 'submit' to job 99: FOREIGN KEY constraint failed");
  EXPECT_EQ(store->commits(), 0u);

  auto jobs = store->load_jobs();
  ASSERT_TRUE(jobs.is_ok());
  EXPECT_TRUE(jobs->empty());
  auto nodes = store->load_nodes();
  ASSERT_TRUE(nodes.is_ok());
  EXPECT_TRUE(nodes->empty());
  auto max_id = store->max_job_id();
  ASSERT_TRUE(max_id.is_ok());
  EXPECT_EQ(*max_id, 0u);

  // The Store is usable after a failed batch.
  WriteBatch good;
  good.insert_job(sample_job(1));
  ASSERT_TRUE(store->write(good).is_ok());
  EXPECT_EQ(store->commits(), 1u);
}

TEST(Store, DuplicateInsertAndUpdateOfMissingJobFail) {
  TempDir dir;
  auto store = open_ok(dir.file("hpcq.db"));
  ASSERT_NE(store, nullptr);
  WriteBatch b;
  b.insert_job(sample_job(1));
  ASSERT_TRUE(store->write(b).is_ok());

  Status dup = store->write(b);
  ASSERT_FALSE(dup.is_ok());
  EXPECT_EQ(dup.code(), Code::kFailedPrecondition);
  EXPECT_NE(dup.message().find("insert job 1: UNIQUE constraint failed"), std::string::npos)
      << dup.message();

  WriteBatch missing;
  missing.update_job(sample_job(2));
  Status s = store->write(missing);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("update job 2: no such job"), std::string::npos) << s.message();
}

TEST(Store, RecordsArePutReplacedDeletedAndSurviveReopen) {
  TempDir dir;
  {
    auto store = open_ok(dir.file("hpcq.db"));
    ASSERT_NE(store, nullptr);
    WriteBatch b;
    b.put_record("reservation", "maint", R"({"v":1})");
    b.put_record("reservation", "alpha", R"({"v":2})");
    b.put_record("usage", "ledger", "[]");
    b.put_record("reservation", "maint", R"({"v":3})");  // replaces
    ASSERT_TRUE(store->write(b).is_ok());
    WriteBatch d;
    d.delete_record("reservation", "alpha");
    ASSERT_TRUE(store->write(d).is_ok());
  }
  auto store = open_ok(dir.file("hpcq.db"));
  ASSERT_NE(store, nullptr);
  auto reservations = store->load_records("reservation");
  ASSERT_TRUE(reservations.is_ok()) << reservations.status().message();
  ASSERT_EQ(reservations->size(), 1u);
  EXPECT_EQ((*reservations)[0].first, "maint");
  EXPECT_EQ((*reservations)[0].second, R"({"v":3})");
  auto usage = store->load_records("usage");
  ASSERT_TRUE(usage.is_ok());
  ASSERT_EQ(usage->size(), 1u);
  auto none = store->load_records("nothing");
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->empty());
}

TEST(Store, EmptyWriteIsNotATransaction) {
  TempDir dir;
  auto store = open_ok(dir.file("hpcq.db"));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->write(WriteBatch{}).is_ok());
  EXPECT_EQ(store->commits(), 0u);
}

TEST(Store, UndecodableRowIsAnErrorNamingTheJob) {
  TempDir dir;
  const std::string path = dir.file("hpcq.db");
  auto store = open_ok(path);
  ASSERT_NE(store, nullptr);
  WriteBatch b;
  b.insert_job(sample_job(3));
  ASSERT_TRUE(store->write(b).is_ok());
  {
    RawDb raw(path);
    raw.exec("UPDATE jobs SET allocation = 'not json' WHERE id = 3");
  }
  auto jobs = store->load_jobs();
  ASSERT_FALSE(jobs.is_ok());
  EXPECT_EQ(jobs.status().message(), "store " + path + ": job 3: allocation: not valid JSON");
  {
    RawDb raw(path);
    raw.exec("UPDATE jobs SET allocation = '{}', state = 'SLEEPING' WHERE id = 3");
  }
  jobs = store->load_jobs();
  ASSERT_FALSE(jobs.is_ok());
  EXPECT_EQ(jobs.status().message(), "store " + path + ": job 3: unknown job state 'SLEEPING'");
}

TEST(WriteBatch, AppendKeepsOrderAndEmptiesTheOther) {
  WriteBatch a;
  a.append_event(1, 1, "a", "{}");
  WriteBatch b;
  b.append_event(1, 2, "b", "{}");
  b.upsert_node(1, "n", "up", "{}", 3);
  a.append(std::move(b));
  EXPECT_EQ(a.size(), 3u);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move): append() leaves it empty
  EXPECT_EQ(std::get<WriteBatch::AppendEvent>(a.ops()[1]).name, "b");
  EXPECT_TRUE(std::holds_alternative<WriteBatch::UpsertNode>(a.ops()[2]));

  WriteBatch empty;
  empty.append(std::move(a));
  EXPECT_EQ(empty.size(), 3u);
}

}  // namespace
}  // namespace hpcq::store
