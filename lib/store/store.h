// The leader's durable state: jobs, their event logs, nodes, and the job-id
// high-water mark, in one SQLite database file.
//
// Durability: the database runs in WAL mode with synchronous=FULL, so a
// write() that returned OK has been fsync'd and survives kill -9 and power
// loss. Each write() is one BEGIN IMMEDIATE..COMMIT transaction: every
// operation of the WriteBatch is applied, or none is.
//
// Schema: versioned through PRAGMA user_version. open() applies, in order,
// each migration step newer than the file's version, each in its own
// transaction, so a crash mid-upgrade leaves a consistent older version that
// the next open() continues from. A file newer than this code is refused.
//
// Ownership: a Store owns its sqlite3 connection and its prepared statements
// (compiled once, reused for the Store's life). Threads: thread-compatible;
// one thread at a time may call it (it may move between threads, e.g. into
// the GroupCommitter's writer). For concurrent writers use GroupCommitter.
//
// Errors: every message starts with the file and ends with SQLite's words:
// "store /var/lib/hpcq/hpcq.db: commit: disk I/O error". Codes: kUnavailable
// when the database is busy or locked by another process, kResourceExhausted
// when the disk is full, kFailedPrecondition for a constraint violation (a
// duplicate job id, an event for an unknown job), kNotFound for update_job of
// a job that is not there, kInvalidArgument for a row that does not decode,
// kInternal for anything else (I/O errors, corruption).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "lib/job/job.h"

struct sqlite3;

namespace hpcq::store {

// One row of a job's append-only event log. `seq` counts from 1 per job.
struct EventRecord {
  JobId job_id = 0;
  std::int64_t seq = 0;
  TimeUs time = 0;
  std::string name;
  std::string detail_json;
};

struct NodeRecord {
  Rank rank = 0;
  std::string name;
  std::string state;
  std::string topology_json;
  TimeUs updated_time = 0;
};

// A list of write operations, applied in order by Store::write(). A plain
// value: build it on any thread, then hand it over.
class WriteBatch {
 public:
  struct InsertJob {
    job::Job job;
  };
  // Replaces the mutable columns: state, exit_code, reason, allocation, the
  // three times, requeue_count and spec (id, owner and submit time stay).
  struct UpdateJob {
    job::Job job;
  };
  struct AppendEvent {
    JobId job_id;
    TimeUs time;
    std::string name;
    std::string detail_json;
  };
  struct UpsertNode {
    Rank rank;
    std::string name;
    std::string state;
    std::string topology_json;
    TimeUs time;
  };
  // A small piece of leader state by (kind, key): "reservation"/NAME,
  // "usage"/"ledger". Put replaces the value.
  struct PutRecord {
    std::string kind;
    std::string key;
    std::string value_json;
  };
  struct DeleteRecord {
    std::string kind;
    std::string key;
  };
  using Op = std::variant<InsertJob, UpdateJob, AppendEvent, UpsertNode, PutRecord, DeleteRecord>;

  void insert_job(const job::Job& job);
  void update_job(const job::Job& job);
  void append_event(JobId job_id, TimeUs time, std::string name, std::string detail_json);
  void upsert_node(Rank rank, std::string name, std::string state, std::string topology_json,
                   TimeUs time);
  void put_record(std::string kind, std::string key, std::string value_json);
  void delete_record(std::string kind, std::string key);

  bool empty() const { return ops_.empty(); }
  std::size_t size() const { return ops_.size(); }
  // Moves `other`'s operations after this batch's own.
  void append(WriteBatch&& other);

  const std::vector<Op>& ops() const { return ops_; }

 private:
  std::vector<Op> ops_;
};

// One step of the schema: the SQL that takes a database from version - 1 to
// `version`. Exposed so that tests can build a database at an older version.
struct Migration {
  int version;
  const char* sql;
};

class Store {
 public:
  // The migration steps in order; the last one's version is the current one.
  static std::span<const Migration> migrations();
  static int current_schema_version();

  // Opens `path`, creating the file if needed, and migrates it to the
  // current schema.
  static Result<std::unique_ptr<Store>> open(const std::string& path);

  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // One transaction for the whole batch; all or nothing.
  Status write(const WriteBatch& batch);
  // One transaction for all of `batches`, in order (what group commit uses);
  // all or nothing across every batch.
  Status write_all(std::span<const WriteBatch> batches);

  // Every job, ascending id (what the leader rebuilds its state from).
  Result<std::vector<job::Job>> load_jobs();
  // The highest job id ever inserted, even if that row is gone; 0 on a new
  // database. The next job gets max_job_id() + 1.
  Result<JobId> max_job_id();
  // The job's events in the order they were appended (ascending seq).
  Result<std::vector<EventRecord>> load_events(JobId job_id);
  // Every node, ascending rank.
  Result<std::vector<NodeRecord>> load_nodes();
  // (key, value) of every record of `kind`, ascending key.
  Result<std::vector<std::pair<std::string, std::string>>> load_records(const std::string& kind);

  int schema_version() const { return schema_version_; }
  const std::string& path() const { return path_; }
  // Write transactions committed by write()/write_all() since open().
  std::uint64_t commits() const { return commits_; }

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

  Store(std::string path, sqlite3* db);
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
  std::uint64_t commits_ = 0;
};

}  // namespace hpcq::store
