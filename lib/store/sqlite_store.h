// The store in one SQLite database file on the leader's disk: the default
// engine (store.h gives the interface's promises).
//
// Durability: the database runs in WAL mode with synchronous=FULL, so a
// write() that returned OK has been fsync'd and survives kill -9 and power
// loss. Each write_all() is one BEGIN IMMEDIATE..COMMIT transaction.
//
// Schema: versioned through PRAGMA user_version. open() applies, in order,
// each migration step newer than the file's version, each in its own
// transaction, so a crash mid-upgrade leaves a consistent older version that
// the next open() continues from. A file newer than this code is refused.
//
// Ownership: a SqliteStore owns its sqlite3 connection and its prepared
// statements (compiled once, reused for its life).
//
// Errors: every message starts with the file and ends with SQLite's words:
// "store /var/lib/hpcq/hpcq.db: commit: disk I/O error"; kUnavailable when
// the database is busy or locked by another process.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lib/store/store.h"

struct sqlite3;

namespace hpcq::store {

// One step of the schema: the SQL that takes a database from version - 1 to
// `version`. Exposed so that tests can build a database at an older version.
struct Migration {
  int version;
  const char* sql;
};

class SqliteStore final : public Store {
 public:
  // The migration steps in order; the last one's version is the current one.
  static std::span<const Migration> migrations();
  static int current_schema_version();

  // Opens `path`, creating the file if needed, and migrates it to the
  // current schema.
  static Result<std::unique_ptr<SqliteStore>> open(const std::string& path);

  ~SqliteStore() override;

  Status write_all(std::span<const WriteBatch> batches) override;
  Result<std::vector<job::Job>> load_jobs() override;
  Result<JobId> max_job_id() override;
  Result<std::vector<EventRecord>> load_events(JobId job_id) override;
  Result<std::vector<NodeRecord>> load_nodes() override;
  Result<std::vector<std::pair<std::string, std::string>>> load_records(
      const std::string& kind) override;
  std::string place() const override { return path_; }

  int schema_version() const { return schema_version_; }
  const std::string& path() const { return path_; }

 private:
  class Statement;
  enum StatementId : std::size_t {
    kInsertJob,
    kUpdateJob,
    kAppendEvent,
    kUpsertNode,
    kRaiseHighWater,
    kLoadJobs,
    kMaxJobId,
    kLoadEvents,
    kLoadNodes,
    kPutRecord,
    kDeleteRecord,
    kLoadRecords,
    kBegin,
    kCommit,
    kRollback,
    kNumStatements,
  };

  SqliteStore(std::string path, sqlite3* db);
  Status configure();
  Status migrate();
  Status prepare_statements();
  Status apply(const WriteBatch::Op& op);
  Status exec(const char* what, const char* sql);
  void rollback();
  // "store <path>: <what>: <sqlite's message>" with a Code chosen from `rc`.
  Status error(const std::string& what, int rc) const;

  std::string path_;
  sqlite3* db_;
  std::vector<std::unique_ptr<Statement>> statements_;
  int schema_version_ = 0;
};

}  // namespace hpcq::store
