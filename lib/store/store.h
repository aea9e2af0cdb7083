// The leader's durable state: jobs, their event logs, nodes, the job-id
// high-water mark and small records, behind one interface with two
// engines: one SQLite file on the leader's disk (SqliteStore,
// sqlite_store.h; the default), or etcd, replicated (EtcdStore,
// etcd_store.h; issue 25's failover).
//
// Every engine gives the same promises: a write() that returned OK is
// durable (survives kill -9 and power loss of the leader), each write() or
// write_all() applies every operation or none, and the loads see every
// acknowledged write. Errors are one line naming the engine's place (the
// file, the endpoints) and the operation, with the same codes: kUnavailable
// (busy, unreachable), kResourceExhausted (disk or quota full),
// kFailedPrecondition (a duplicate job id, an event for an unknown job, or
// etcd: this leader no longer holds its lease), kNotFound (update_job of a
// job that is not there), kInvalidArgument (a row that does not decode),
// kInternal (anything else).
//
// Threads: thread-compatible; one thread at a time may call a Store (it may
// move between threads, e.g. into the GroupCommitter's writer). For
// concurrent writers use GroupCommitter.
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

class Store {
 public:
  virtual ~Store() = default;

  // One transaction for the whole batch; all or nothing.
  virtual Status write(const WriteBatch& batch) { return write_all(std::span(&batch, 1)); }
  // One transaction for all of `batches`, in order (what group commit uses);
  // all or nothing across every batch.
  virtual Status write_all(std::span<const WriteBatch> batches) = 0;

  // Every job, ascending id (what the leader rebuilds its state from).
  virtual Result<std::vector<job::Job>> load_jobs() = 0;
  // The highest job id ever inserted, even if that row is gone; 0 on a new
  // store. The next job gets max_job_id() + 1.
  virtual Result<JobId> max_job_id() = 0;
  // The job's events in the order they were appended (ascending seq).
  virtual Result<std::vector<EventRecord>> load_events(JobId job_id) = 0;
  // Every node, ascending rank.
  virtual Result<std::vector<NodeRecord>> load_nodes() = 0;
  // (key, value) of every record of `kind`, ascending key.
  virtual Result<std::vector<std::pair<std::string, std::string>>> load_records(
      const std::string& kind) = 0;

  // Where the state lives, for messages: the file, or "etcd ENDPOINTS".
  virtual std::string place() const = 0;
  // Write transactions committed by write()/write_all() since open.
  std::uint64_t commits() const { return commits_; }

 protected:
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  std::uint64_t commits_ = 0;
};

}  // namespace hpcq::store
