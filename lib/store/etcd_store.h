// The store in etcd (issue 25): the leader's state replicated by etcd's Raft
// on 3 or 5 members, so that losing the leader's host or disk loses nothing
// acknowledged and another hpcqd can take over (store.h gives the promises).
//
// Layout, under a prefix (default "/hpcq/"): jobs/<id>, events/<id>/<seq>,
// nodes/<rank> (numbers zero-padded to 20 digits, so keys sort as numbers),
// records/<kind>/<key>, meta/max_job_id. A value is its row's columns, each
// length-prefixed (the job's spec and allocation in codec.h's JSON), so that
// bytes that are not UTF-8 (a reason quoting a command) come back as they
// went in.
//
// Each write_all() is one etcd Txn: all or nothing, durable once etcd has
// acknowledged it (a majority of members fsync'd it). The Txn's compares
// carry the SQLite engine's constraints (no duplicate job, no update or event
// for a job that is not there) and, when the store is guarded, that the
// guard key (the leader's election key) still has the create revision this
// leader won it with: a deposed leader's write fails as a whole with
// kFailedPrecondition and changes nothing (no split brain in the state).
//
// With a Sealer (Options::sealer, [leader] store_key), every value carries a
// MAC over it and its key that only hpcqd can make (seal.h): rows written by
// anyone else are refused at load.
//
// Limits of etcd's defaults that a site raises: one Txn holds at most
// --max-txn-ops operations (128; hpcq start runs etcd with 16384) and one
// request at most --max-request-bytes (1.5 MiB; hpcq start: 64 MiB). A batch
// past them fails with etcd's error (kInvalidArgument), and hpcqd's group
// commit keeps its batches at max_ops() and its JSON small.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/etcd/etcd_client.h"
#include "lib/store/seal.h"
#include "lib/store/store.h"

namespace hpcq::store {

class EtcdStore final : public Store {
 public:
  struct Options {
    std::string prefix = "/hpcq/";
    // When set, every write also requires that `guard_key` was created at
    // `guard_revision` (this leader's election) and still is.
    std::string guard_key;
    std::int64_t guard_revision = 0;
    // Called (on the writing thread) when a write found the guard gone,
    // before that write returns kFailedPrecondition: hpcqd exits there.
    std::function<void(const std::string& why)> on_deposed;
    // When set, every value is sealed on write and opened on load (seal.h);
    // a row whose seal fails is left out of what loads return and reported
    // to on_refused (hpcqd logs it), never acted on.
    std::optional<Sealer> sealer;
    std::function<void(const std::string& key, const std::string& why)> on_refused;
  };

  // Reads the store's high-water mark (the first call to etcd: an etcd that
  // cannot be reached fails here with kUnavailable).
  static Result<std::unique_ptr<EtcdStore>> open(etcd::EtcdClient client, Options options);

  Status write_all(std::span<const WriteBatch> batches) override;
  Result<std::vector<job::Job>> load_jobs() override;
  Result<JobId> max_job_id() override;
  Result<std::vector<EventRecord>> load_events(JobId job_id) override;
  Result<std::vector<NodeRecord>> load_nodes() override;
  Result<std::vector<std::pair<std::string, std::string>>> load_records(
      const std::string& kind) override;
  std::string place() const override { return "etcd " + client_.endpoints(); }

  // The most operations one write_all() may carry (GroupCommitter's max_ops).
  static constexpr std::size_t kMaxOps = 8192;

 private:
  EtcdStore(etcd::EtcdClient client, Options options)
      : client_(std::move(client)), options_(std::move(options)) {}

  std::string job_key(JobId id) const;
  std::string events_prefix(JobId id) const;
  // The next seq of `id`'s events: from etcd on the job's first event since
  // open, then counted here (one writer: the leader).
  Result<std::int64_t> next_event_seq(JobId id);
  // Why a Txn whose compares failed did: the guard, or the first row check.
  Status explain_failure(const std::map<std::string, bool>& must_exist,
                         const std::map<std::string, std::string>& what);
  Status error(const std::string& what, const Status& s) const;
  // The values under `prefix`, opened: rows whose seal fails are reported
  // and left out.
  Result<std::vector<etcd::KeyValue>> range_opened(const std::string& prefix);
  Result<std::optional<std::string>> get_opened(const std::string& key);

  etcd::EtcdClient client_;
  Options options_;
  JobId max_job_id_ = 0;
  std::map<JobId, std::int64_t> next_seq_;
};

}  // namespace hpcq::store
