#include "lib/store/sqlite_store.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string_view>
#include <utility>

#include "lib/store/codec.h"

namespace hpcq::store {
namespace {

// How long a statement waits for another process's lock (e.g. an operator's
// `sqlite3` shell) before failing with kUnavailable.
constexpr int kBusyTimeoutMs = 5000;

// Schema history. Never edit a step that has shipped: add a new one.
constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE jobs (
  id            INTEGER PRIMARY KEY,
  uid           INTEGER NOT NULL,
  gid           INTEGER NOT NULL,
  user          TEXT    NOT NULL,
  name          TEXT    NOT NULL,
  state         TEXT    NOT NULL,
  exit_code     INTEGER NOT NULL DEFAULT 0,
  reason        TEXT    NOT NULL DEFAULT '',
  spec          TEXT    NOT NULL,
  allocation    TEXT    NOT NULL,
  submit_time   INTEGER NOT NULL,
  start_time    INTEGER NOT NULL DEFAULT 0,
  end_time      INTEGER NOT NULL DEFAULT 0,
  requeue_count INTEGER NOT NULL DEFAULT 0
);
-- Append-only: a job's life, replayable. seq counts from 1 per job.
CREATE TABLE job_events (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  seq    INTEGER NOT NULL,
  time   INTEGER NOT NULL,
  name   TEXT    NOT NULL,
  detail TEXT    NOT NULL,
  PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
CREATE TABLE nodes (
  rank         INTEGER PRIMARY KEY,
  name         TEXT    NOT NULL,
  state        TEXT    NOT NULL,
  topology     TEXT    NOT NULL,
  updated_time INTEGER NOT NULL
);
-- value has no declared type so that integers stay integers (MAX() below).
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value
) WITHOUT ROWID;
)sql"},
    // `hpcq queue` filters by state and per-user limits count a user's jobs;
    // neither should scan the whole history.
    {2, R"sql(
CREATE INDEX jobs_by_state ON jobs(state, id);
CREATE INDEX jobs_by_uid ON jobs(uid, id);
)sql"},
    // hpcq hold / release.
    {3, R"sql(
ALTER TABLE jobs ADD COLUMN held INTEGER NOT NULL DEFAULT 0;
)sql"},
    // Small leader state that is neither a job nor a node: advance
    // reservations, fair-share usage; one JSON value per (kind, key).
    {4, R"sql(
CREATE TABLE records (
  kind TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (kind, key)
);
)sql"},
    // Measured usage of a job's last run (sacct's TotalCPU and MaxRSS).
    {5, R"sql(
ALTER TABLE jobs ADD COLUMN cpu_time_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN max_memory_bytes INTEGER NOT NULL DEFAULT 0;
)sql"},
};

constexpr const char* kStatementSql[] = {
    // kInsertJob
    "INSERT INTO jobs (id, uid, gid, user, name, state, exit_code, reason, spec, allocation,"
    " submit_time, start_time, end_time, requeue_count, held, cpu_time_us, max_memory_bytes)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    // kUpdateJob
    "UPDATE jobs SET name = ?2, state = ?3, exit_code = ?4, reason = ?5, spec = ?6,"
    " allocation = ?7, start_time = ?8, end_time = ?9, requeue_count = ?10, held = ?11,"
    " cpu_time_us = ?12, max_memory_bytes = ?13 WHERE id = ?1",
    // kAppendEvent
    "INSERT INTO job_events (job_id, seq, time, name, detail)"
    " VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM job_events WHERE job_id = ?1),"
    " ?2, ?3, ?4)",
    // kUpsertNode
    "INSERT INTO nodes (rank, name, state, topology, updated_time) VALUES (?1, ?2, ?3, ?4, ?5)"
    " ON CONFLICT (rank) DO UPDATE SET name = excluded.name, state = excluded.state,"
    " topology = excluded.topology, updated_time = excluded.updated_time",
    // kRaiseHighWater: ids are never reused, even after a job row is deleted.
    "INSERT INTO meta (key, value) VALUES ('max_job_id', ?1)"
    " ON CONFLICT (key) DO UPDATE SET value = MAX(value, excluded.value)",
    // kLoadJobs
    "SELECT id, uid, gid, user, state, exit_code, reason, spec, allocation, submit_time,"
    " start_time, end_time, requeue_count, held, cpu_time_us, max_memory_bytes FROM jobs"
    " ORDER BY id",
    // kMaxJobId
    "SELECT MAX(COALESCE((SELECT value FROM meta WHERE key = 'max_job_id'), 0),"
    " COALESCE((SELECT MAX(id) FROM jobs), 0))",
    // kLoadEvents
    "SELECT job_id, seq, time, name, detail FROM job_events WHERE job_id = ?1 ORDER BY seq",
    // kLoadNodes
    "SELECT rank, name, state, topology, updated_time FROM nodes ORDER BY rank",
    // kPutRecord
    "INSERT INTO records (kind, key, value) VALUES (?1, ?2, ?3)"
    " ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value",
    // kDeleteRecord
    "DELETE FROM records WHERE kind = ?1 AND key = ?2",
    // kLoadRecords
    "SELECT key, value FROM records WHERE kind = ?1 ORDER BY key",
    // kBegin: take the write lock up front, so a busy database fails here and
    // not half-way through the batch.
    "BEGIN IMMEDIATE",
    // kCommit
    "COMMIT",
    // kRollback
    "ROLLBACK",
};

Code code_of(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return Code::kUnavailable;
    case SQLITE_FULL: return Code::kResourceExhausted;
    case SQLITE_CONSTRAINT: return Code::kFailedPrecondition;
    default: return Code::kInternal;
  }
}

std::string column_text(sqlite3_stmt* s, int col) {
  const unsigned char* text = sqlite3_column_text(s, col);
  if (text == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<std::size_t>(sqlite3_column_bytes(s, col)));
}

}  // namespace

// A prepared statement, compiled once at open(). Use() binds nothing itself;
// its guard resets the statement and clears its bindings when the caller is
// done, so the next use starts clean whatever path the caller took.
class SqliteStore::Statement {
 public:
  explicit Statement(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  class Use {
   public:
    explicit Use(sqlite3_stmt* stmt) : stmt_(stmt) {}
    ~Use() {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

    void bind(int index, std::int64_t value) { rc_or(sqlite3_bind_int64(stmt_, index, value)); }
    void bind(int index, std::string_view text) {
      rc_or(sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT,
                                SQLITE_UTF8));
    }
    // The first bind error, or SQLITE_OK.
    int bind_rc() const { return bind_rc_; }
    int step() { return sqlite3_step(stmt_); }
    sqlite3_stmt* get() const { return stmt_; }

   private:
    void rc_or(int rc) {
      if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
    }
    sqlite3_stmt* stmt_;
    int bind_rc_ = SQLITE_OK;
  };

  Use use() { return Use(stmt_); }

 private:
  sqlite3_stmt* stmt_;
};

std::span<const Migration> SqliteStore::migrations() { return kMigrations; }

int SqliteStore::current_schema_version() { return std::end(kMigrations)[-1].version; }

Result<std::unique_ptr<SqliteStore>> SqliteStore::open(const std::string& path) {
  // The store holds jobs' environments (tokens among them): readable by its
  // owner only, whatever the umask. SQLite gives its -wal and -shm files the
  // database's mode; files of an older, laxer version are tightened.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status(Code::kInternal, "store " + path + ": open: " + std::strerror(errno));
  const bool tightened = fchmod(fd, 0600) == 0;
  const int chmod_errno = errno;
  close(fd);
  if (!tightened) {
    return Status(Code::kInternal, "store " + path + ": chmod 600: " + std::strerror(chmod_errno));
  }
  for (const char* suffix : {"-wal", "-shm"}) {
    const std::string side = path + suffix;
    if (chmod(side.c_str(), 0600) != 0 && errno != ENOENT) {
      return Status(Code::kInternal, "store " + side + ": chmod 600: " + std::strerror(errno));
    }
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  // The SqliteStore owns the handle from here on, even a failed one (sqlite hands
  // out a handle carrying the error message that must still be closed).
  std::unique_ptr<SqliteStore> store(new SqliteStore(path, db));
  if (rc != SQLITE_OK) {
    if (db == nullptr) return Status(Code::kResourceExhausted, "store " + path + ": out of memory");
    return store->error("open", rc);
  }
  HPCQ_RETURN_IF_ERROR(store->configure());
  HPCQ_RETURN_IF_ERROR(store->migrate());
  HPCQ_RETURN_IF_ERROR(store->prepare_statements());
  return store;
}

SqliteStore::SqliteStore(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}

SqliteStore::~SqliteStore() {
  // Statements first: sqlite3_close() refuses while any is unfinalized.
  statements_.clear();
  if (db_ != nullptr) sqlite3_close(db_);
}

Status SqliteStore::error(const std::string& what, int rc) const {
  std::string message = "store " + path_ + ": " + what + ": ";
  // sqlite3_errmsg describes the connection's latest error, which is `rc`'s
  // when called right after the failing call; fall back to the code's text.
  if (db_ != nullptr && (sqlite3_extended_errcode(db_) == rc || sqlite3_errcode(db_) == rc)) {
    message += sqlite3_errmsg(db_);
  } else {
    message += sqlite3_errstr(rc);
  }
  return Status(code_of(rc), std::move(message));
}

Status SqliteStore::exec(const char* what, const char* sql) {
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return error(what, rc);
  return Status::ok();
}

Status SqliteStore::configure() {
  sqlite3_extended_result_codes(db_, 1);
  int rc = sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  if (rc != SQLITE_OK) return error("busy_timeout", rc);

  // journal_mode answers with the mode in force; a file system without
  // shared memory (or a read-only one) may silently keep another mode, and
  // the durability promise above is made for WAL only.
  std::string mode;
  rc = sqlite3_exec(
      db_, "PRAGMA journal_mode=WAL",
      [](void* out, int ncol, char** values, char**) {
        if (ncol > 0 && values[0] != nullptr) *static_cast<std::string*>(out) = values[0];
        return 0;
      },
      &mode, nullptr);
  if (rc != SQLITE_OK) return error("journal_mode=WAL", rc);
  if (mode != "wal") {
    return internal_error("store " + path_ + ": journal_mode=WAL: the database stayed in '" + mode +
                          "' mode");
  }
  // FULL: the WAL is fsync'd at every commit, so an acknowledged write
  // survives power loss, not just a crash of this process.
  HPCQ_RETURN_IF_ERROR(exec("synchronous=FULL", "PRAGMA synchronous=FULL"));
  HPCQ_RETURN_IF_ERROR(exec("foreign_keys=ON", "PRAGMA foreign_keys=ON"));
  return Status::ok();
}

Status SqliteStore::migrate() {
  const int latest = current_schema_version();
  for (;;) {
    // Each step runs in its own write transaction and re-reads the version
    // inside it, so two processes opening a new file at once do not both
    // apply the same step.
    HPCQ_RETURN_IF_ERROR(exec("begin migration", "BEGIN IMMEDIATE"));
    int version = 0;
    int rc = sqlite3_exec(
        db_, "PRAGMA user_version",
        [](void* out, int ncol, char** values, char**) {
          if (ncol > 0 && values[0] != nullptr) *static_cast<int*>(out) = std::atoi(values[0]);
          return 0;
        },
        &version, nullptr);
    if (rc != SQLITE_OK) {
      Status s = error("read schema version", rc);
      rollback();
      return s;
    }
    if (version > latest) {
      rollback();
      return failed_precondition("store " + path_ + ": schema version " + std::to_string(version) +
                                 " is newer than this hpcq knows (" + std::to_string(latest) +
                                 "); run a newer hpcq or use another state_dir");
    }
    if (version < 0) {
      rollback();
      return internal_error("store " + path_ + ": bad schema version " + std::to_string(version));
    }
    if (version == latest) {
      rollback();  // nothing written: ending the read is all that is needed
      schema_version_ = version;
      return Status::ok();
    }
    const Migration& step = kMigrations[version];  // versions are 1, 2, ... in order
    assert(step.version == version + 1);
    std::string sql =
        std::string(step.sql) + "\nPRAGMA user_version = " + std::to_string(step.version) + ";";
    rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) {
      Status s = error("migration to schema version " + std::to_string(step.version), rc);
      rollback();
      return s;
    }
    Status committed = exec("commit migration", "COMMIT");
    if (!committed.is_ok()) {
      rollback();
      return committed;
    }
  }
}

Status SqliteStore::prepare_statements() {
  static_assert(std::size(kStatementSql) == kNumStatements);
  statements_.reserve(kNumStatements);
  for (const char* sql : kStatementSql) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return error(std::string("prepare '") + sql + "'", rc);
    statements_.push_back(std::make_unique<Statement>(stmt));
  }
  return Status::ok();
}

void SqliteStore::rollback() {
  // After some errors (I/O, full disk) SQLite has already rolled back.
  if (sqlite3_get_autocommit(db_)) return;
  if (statements_.size() == kNumStatements) {
    auto use = statements_[kRollback]->use();
    (void)use.step();
  } else {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

Status SqliteStore::write_all(std::span<const WriteBatch> batches) {
  bool any = false;
  for (const WriteBatch& b : batches) any = any || !b.empty();
  if (!any) return Status::ok();

  {
    auto begin = statements_[kBegin]->use();
    int rc = begin.step();
    if (rc != SQLITE_DONE) return error("begin", rc);
  }
  for (const WriteBatch& b : batches) {
    for (const WriteBatch::Op& op : b.ops()) {
      Status s = apply(op);
      if (!s.is_ok()) {
        rollback();
        return s;
      }
    }
  }
  Status committed;
  {
    auto commit = statements_[kCommit]->use();
    int rc = commit.step();
    if (rc != SQLITE_DONE) committed = error("commit", rc);
  }
  if (!committed.is_ok()) {
    rollback();
    return committed;
  }
  ++commits_;
  return Status::ok();
}

Status SqliteStore::apply(const WriteBatch::Op& op) {
  if (const auto* insert = std::get_if<WriteBatch::InsertJob>(&op)) {
    const job::Job& j = insert->job;
    const std::string what = "insert job " + std::to_string(j.id);
    {
      auto use = statements_[kInsertJob]->use();
      use.bind(1, static_cast<std::int64_t>(j.id));
      use.bind(2, static_cast<std::int64_t>(j.uid));
      use.bind(3, static_cast<std::int64_t>(j.gid));
      use.bind(4, j.user);
      use.bind(5, j.spec.name);
      use.bind(6, encode_state(j.state));
      use.bind(7, static_cast<std::int64_t>(j.exit_code));
      use.bind(8, j.reason);
      use.bind(9, encode_spec(j.spec));
      use.bind(10, encode_allocation(j.allocation));
      use.bind(11, j.submit_time);
      use.bind(12, j.start_time);
      use.bind(13, j.end_time);
      use.bind(14, static_cast<std::int64_t>(j.requeue_count));
      use.bind(15, static_cast<std::int64_t>(j.held ? 1 : 0));
      use.bind(16, j.cpu_time_us);
      use.bind(17, static_cast<std::int64_t>(j.max_memory_bytes));
      if (use.bind_rc() != SQLITE_OK) return error(what, use.bind_rc());
      int rc = use.step();
      if (rc != SQLITE_DONE) return error(what, rc);
    }
    auto use = statements_[kRaiseHighWater]->use();
    use.bind(1, static_cast<std::int64_t>(j.id));
    int rc = use.bind_rc() != SQLITE_OK ? use.bind_rc() : use.step();
    if (rc != SQLITE_DONE) return error(what + ": job id high-water mark", rc);
    return Status::ok();
  }
  if (const auto* update = std::get_if<WriteBatch::UpdateJob>(&op)) {
    const job::Job& j = update->job;
    const std::string what = "update job " + std::to_string(j.id);
    auto use = statements_[kUpdateJob]->use();
    use.bind(1, static_cast<std::int64_t>(j.id));
    use.bind(2, j.spec.name);
    use.bind(3, encode_state(j.state));
    use.bind(4, static_cast<std::int64_t>(j.exit_code));
    use.bind(5, j.reason);
    use.bind(6, encode_spec(j.spec));
    use.bind(7, encode_allocation(j.allocation));
    use.bind(8, j.start_time);
    use.bind(9, j.end_time);
    use.bind(10, static_cast<std::int64_t>(j.requeue_count));
    use.bind(11, static_cast<std::int64_t>(j.held ? 1 : 0));
    use.bind(12, j.cpu_time_us);
    use.bind(13, static_cast<std::int64_t>(j.max_memory_bytes));
    if (use.bind_rc() != SQLITE_OK) return error(what, use.bind_rc());
    int rc = use.step();
    if (rc != SQLITE_DONE) return error(what, rc);
    if (sqlite3_changes(db_) == 0)
      return not_found("store " + path_ + ": " + what + ": no such job");
    return Status::ok();
  }
  if (const auto* event = std::get_if<WriteBatch::AppendEvent>(&op)) {
    const std::string what =
        "append event '" + event->name + "' to job " + std::to_string(event->job_id);
    auto use = statements_[kAppendEvent]->use();
    use.bind(1, static_cast<std::int64_t>(event->job_id));
    use.bind(2, event->time);
    use.bind(3, event->name);
    use.bind(4, event->detail_json);
    if (use.bind_rc() != SQLITE_OK) return error(what, use.bind_rc());
    int rc = use.step();
    if (rc != SQLITE_DONE) return error(what, rc);
    return Status::ok();
  }
  if (const auto* put = std::get_if<WriteBatch::PutRecord>(&op)) {
    const std::string what = "put " + put->kind + " '" + put->key + "'";
    auto use = statements_[kPutRecord]->use();
    use.bind(1, put->kind);
    use.bind(2, put->key);
    use.bind(3, put->value_json);
    if (use.bind_rc() != SQLITE_OK) return error(what, use.bind_rc());
    int rc = use.step();
    if (rc != SQLITE_DONE) return error(what, rc);
    return Status::ok();
  }
  if (const auto* del = std::get_if<WriteBatch::DeleteRecord>(&op)) {
    const std::string what = "delete " + del->kind + " '" + del->key + "'";
    auto use = statements_[kDeleteRecord]->use();
    use.bind(1, del->kind);
    use.bind(2, del->key);
    if (use.bind_rc() != SQLITE_OK) return error(what, use.bind_rc());
    int rc = use.step();
    if (rc != SQLITE_DONE) return error(what, rc);
    return Status::ok();
  }
  const auto& node = std::get<WriteBatch::UpsertNode>(op);
  const std::string what = "upsert node " + std::to_string(node.rank);
  auto use = statements_[kUpsertNode]->use();
  use.bind(1, static_cast<std::int64_t>(node.rank));
  use.bind(2, node.name);
  use.bind(3, node.state);
  use.bind(4, node.topology_json);
  use.bind(5, node.time);
  if (use.bind_rc() != SQLITE_OK) return error(what, use.bind_rc());
  int rc = use.step();
  if (rc != SQLITE_DONE) return error(what, rc);
  return Status::ok();
}

Result<std::vector<job::Job>> SqliteStore::load_jobs() {
  std::vector<job::Job> jobs;
  auto use = statements_[kLoadJobs]->use();
  sqlite3_stmt* s = use.get();
  int rc;
  while ((rc = use.step()) == SQLITE_ROW) {
    job::Job j;
    j.id = static_cast<JobId>(sqlite3_column_int64(s, 0));
    j.uid = static_cast<std::uint32_t>(sqlite3_column_int64(s, 1));
    j.gid = static_cast<std::uint32_t>(sqlite3_column_int64(s, 2));
    j.user = column_text(s, 3);
    const std::string where = "store " + path_ + ": job " + std::to_string(j.id) + ": ";
    auto state = decode_state(column_text(s, 4));
    if (!state.is_ok()) return invalid_argument(where + state.status().message());
    j.state = *state;
    j.exit_code = sqlite3_column_int(s, 5);
    j.reason = column_text(s, 6);
    auto spec = decode_spec(column_text(s, 7));
    if (!spec.is_ok()) return invalid_argument(where + spec.status().message());
    j.spec = std::move(spec).value();
    auto allocation = decode_allocation(column_text(s, 8));
    if (!allocation.is_ok()) return invalid_argument(where + allocation.status().message());
    j.allocation = std::move(allocation).value();
    j.submit_time = sqlite3_column_int64(s, 9);
    j.start_time = sqlite3_column_int64(s, 10);
    j.end_time = sqlite3_column_int64(s, 11);
    j.requeue_count = sqlite3_column_int(s, 12);
    j.held = sqlite3_column_int(s, 13) != 0;
    j.cpu_time_us = sqlite3_column_int64(s, 14);
    j.max_memory_bytes = static_cast<std::uint64_t>(sqlite3_column_int64(s, 15));
    jobs.push_back(std::move(j));
  }
  if (rc != SQLITE_DONE) return error("load jobs", rc);
  return jobs;
}

Result<JobId> SqliteStore::max_job_id() {
  auto use = statements_[kMaxJobId]->use();
  int rc = use.step();
  if (rc != SQLITE_ROW) return error("max job id", rc);
  return static_cast<JobId>(sqlite3_column_int64(use.get(), 0));
}

Result<std::vector<EventRecord>> SqliteStore::load_events(JobId job_id) {
  std::vector<EventRecord> events;
  auto use = statements_[kLoadEvents]->use();
  use.bind(1, static_cast<std::int64_t>(job_id));
  sqlite3_stmt* s = use.get();
  int rc = use.bind_rc();
  if (rc == SQLITE_OK) {
    while ((rc = use.step()) == SQLITE_ROW) {
      EventRecord e;
      e.job_id = static_cast<JobId>(sqlite3_column_int64(s, 0));
      e.seq = sqlite3_column_int64(s, 1);
      e.time = sqlite3_column_int64(s, 2);
      e.name = column_text(s, 3);
      e.detail_json = column_text(s, 4);
      events.push_back(std::move(e));
    }
  }
  if (rc != SQLITE_DONE) return error("load events of job " + std::to_string(job_id), rc);
  return events;
}

Result<std::vector<NodeRecord>> SqliteStore::load_nodes() {
  std::vector<NodeRecord> nodes;
  auto use = statements_[kLoadNodes]->use();
  sqlite3_stmt* s = use.get();
  int rc;
  while ((rc = use.step()) == SQLITE_ROW) {
    NodeRecord n;
    n.rank = static_cast<Rank>(sqlite3_column_int64(s, 0));
    n.name = column_text(s, 1);
    n.state = column_text(s, 2);
    n.topology_json = column_text(s, 3);
    n.updated_time = sqlite3_column_int64(s, 4);
    nodes.push_back(std::move(n));
  }
  if (rc != SQLITE_DONE) return error("load nodes", rc);
  return nodes;
}

Result<std::vector<std::pair<std::string, std::string>>> SqliteStore::load_records(
    const std::string& kind) {
  std::vector<std::pair<std::string, std::string>> records;
  auto use = statements_[kLoadRecords]->use();
  use.bind(1, kind);
  sqlite3_stmt* s = use.get();
  int rc = use.bind_rc();
  if (rc != SQLITE_OK) return error("load " + kind, rc);
  while ((rc = use.step()) == SQLITE_ROW)
    records.emplace_back(column_text(s, 0), column_text(s, 1));
  if (rc != SQLITE_DONE) return error("load " + kind, rc);
  return records;
}

}  // namespace hpcq::store
