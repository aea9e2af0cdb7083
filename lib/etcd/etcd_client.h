// hpcq::etcd::EtcdClient: a small client for etcd 3.4's v3 gRPC API (KV and
// Lease; proto/etcd.proto), for the leader's replicated state (issue 25).
//
// Endpoints are "host:port" of the members' client URLs, over plain
// (insecure) gRPC; TLS and etcd's auth are not done. Every call has a
// deadline (Options::deadline): without one, a write in flight when etcd's
// leader dies waits out etcd's own request timeout (7 s, docs/failover.md).
// Each try waits for its endpoint to connect, up to the deadline, so a dead
// member costs one deadline. A try that fails with UNAVAILABLE or
// DEADLINE_EXCEEDED is followed by one on the next endpoint (round robin
// from the one that last answered, where the next call starts too), at most
// once per endpoint; then the call returns kUnavailable. So a call takes at
// most deadline x endpoints.
//
// A write that timed out may still have been applied (etcd received it; the
// answer was lost), and retrying it on the next endpoint applies it again:
// callers make their writes idempotent or guard them with a Txn compare. A
// retried grant() may leave an unused lease behind (it expires by its TTL).
//
// Errors are one line: "etcd ENDPOINTS: OPERATION: ...", with codes:
// kUnavailable (no endpoint answered, or etcd has no leader), kNotFound (a
// lease that is not there), kInvalidArgument (a request etcd refused, e.g.
// a too large one), kResourceExhausted (etcd's space quota, or too many
// requests), kOutOfRange (a compacted revision), kInternal (other).
//
// Threads: thread-safe; any number of threads may call one client at once
// (gRPC's stubs are; the client's own state is one atomic endpoint index).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/core/status.h"

namespace hpcq::etcd {

// etcd's range_end for all keys starting with `prefix`: the prefix with its
// last byte below 0xff incremented and what follows it dropped; "\0" (all
// keys from the start key on) when there is no such byte (empty, all 0xff).
std::string prefix_end(const std::string& prefix);

struct KeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;  // the revision that created the key
  std::int64_t mod_revision = 0;     // the revision that last changed it
  std::int64_t version = 0;          // changes since it was created, from 1
  std::int64_t lease = 0;            // the lease it is attached to, 0 if none
};

// A guarded transaction: if every compare holds, the ops are applied, all in
// one revision; if any fails, nothing is. A key that is not there compares
// as version, create_revision, mod_revision and lease 0 (so "create_revision
// == 0" means "absent"), and fails every value compare.
struct Txn {
  enum class Target { kValue, kVersion, kCreateRevision, kModRevision, kLease };
  struct Compare {
    std::string key;
    Target target = Target::kVersion;
    bool equal = true;        // equal; not equal when false
    std::int64_t number = 0;  // every target but kValue
    std::string value;        // kValue
  };
  struct Op {
    enum class Kind { kPut, kErase, kErasePrefix };
    Kind kind = Kind::kPut;
    std::string key;  // the prefix for kErasePrefix
    std::string value;
    std::int64_t lease = 0;
  };

  Txn& if_equal(std::string key, Target target, std::int64_t number);
  Txn& if_not_equal(std::string key, Target target, std::int64_t number);
  Txn& if_value_equal(std::string key, std::string value);
  Txn& if_value_not_equal(std::string key, std::string value);
  Txn& put(std::string key, std::string value, std::int64_t lease = 0);
  Txn& erase(std::string key);
  Txn& erase_prefix(std::string prefix);

  std::vector<Compare> compares;
  std::vector<Op> ops;  // etcd refuses more than --max-txn-ops (128 by default)
};

struct TxnResult {
  bool succeeded = false;  // the compares held and the ops were applied
  std::int64_t revision = 0;
};

struct Lease {
  std::int64_t id = 0;
  std::int64_t ttl_seconds = 0;  // as etcd granted it (at least its minimum, 2 s by default)
};

class EtcdClient {
 public:
  struct Options {
    // For each try on one endpoint.
    std::chrono::milliseconds deadline{1000};
    // Keys per Range request of range(): bounds the size of one answer
    // (etcd bounds requests, 1.5 MiB by default, not answers).
    std::int64_t page_size = 500;
    // TLS (etcd's https client URLs): the PEM file of the CA that signed the
    // members' certificates; empty: plain gRPC. With cert_file and key_file,
    // this client's certificate and key, for etcd's --client-cert-auth.
    std::string ca_file, cert_file, key_file;
  };

  // Channels connect lazily: this fails only on a malformed argument or an
  // unreadable TLS file, and an etcd that is down shows as kUnavailable from
  // the first call.
  static Result<EtcdClient> connect(std::vector<std::string> endpoints, Options options);
  static Result<EtcdClient> connect(std::vector<std::string> endpoints) {
    return connect(std::move(endpoints), Options());
  }

  EtcdClient(EtcdClient&&) noexcept;
  EtcdClient& operator=(EtcdClient&&) noexcept;
  ~EtcdClient();

  // The key's current value, or nullopt when it is not there.
  Result<std::optional<KeyValue>> get(const std::string& key) const;
  // All keys starting with `prefix` ("" for all keys), ascending, as of one
  // revision (paged with Options::page_size; a page past a compaction of
  // that revision gives kOutOfRange).
  Result<std::vector<KeyValue>> range(const std::string& prefix) const;
  // These return the revision of the write. erase_prefix("") erases every key.
  Result<std::int64_t> put(const std::string& key, const std::string& value,
                           std::int64_t lease = 0) const;
  Result<std::int64_t> erase(const std::string& key) const;
  Result<std::int64_t> erase_prefix(const std::string& prefix) const;
  Result<TxnResult> txn(const Txn& txn) const;

  // Leases: keys put with one are deleted when it is revoked or expires (no
  // keep-alive within its TTL).
  Result<Lease> grant(std::int64_t ttl_seconds) const;
  Status revoke(std::int64_t id) const;  // kNotFound if it is not there
  // Renews the lease once; its TTL afterwards. kNotFound when it expired or
  // was revoked (then its keys are gone).
  Result<std::int64_t> keep_alive_once(std::int64_t id) const;

  const std::string& endpoints() const;  // "a:2379,b:2379", as in errors

 private:
  struct Impl;
  explicit EtcdClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hpcq::etcd
