// Leadership among hpcqd candidates that share an etcd store (issue 25;
// leader.store = "etcd"): exactly one acts, the others stand by.
//
// A candidate grants itself a lease of leader.lease_s seconds and campaigns
// for the key <etcd_prefix>leader: one Txn creates it, carrying the lease
// and the candidate's name, only if it is absent. While another holds it the
// candidate stands by and tries again every lease_s / 3; when the holder
// dies its lease expires and etcd deletes the key, and a standby wins.
//
// The winner's guard is the key's create revision: every store write is a
// Txn conditional on it (EtcdStore::Options::guard_key), so a deposed leader
// cannot change the state. A thread renews the lease every lease_s / 3; when
// etcd says the lease is gone, or no renewal succeeds for lease_s (etcd
// unreachable: another may have won by now), the process ends at once with
// a line in its log (lost()), since nothing it would do afterwards is
// trustworthy; a supervisor starts it again, as a standby. A clean stop
// revokes the lease, so that a standby takes over at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lib/core/config.h"
#include "lib/core/status.h"
#include "lib/etcd/etcd_client.h"

namespace hpcq::daemon {

class Leadership {
 public:
  // A candidate as the election knows it: each registers under
  // <prefix>members/NAME (kept) and <prefix>alive/NAME (with its lease).
  struct Candidate {
    std::string name;
    std::string state;  // "active", "standby" or "unreachable" (no live lease)
    std::string host;
    std::int64_t pid = 0;
    std::string endpoint;
  };

  // Campaigns until this candidate leads (then returns it) or `stopping`
  // says to give up (then null). An etcd that cannot be reached is waited
  // for like a holder; a refused request (a bad prefix) fails. `name` identifies the candidate in
  // the key's value and in logs (host:pid by default).
  static Result<std::unique_ptr<Leadership>> campaign(const ClusterConfig& config,
                                                      const std::string& name,
                                                      const std::function<bool()>& stopping);
  ~Leadership();  // stops renewing and revokes the lease
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  // Every candidate that ever registered under this prefix, by name.
  Result<std::vector<Candidate>> candidates() const;
  // How hpcqd reaches etcd ([leader] etcd_ca, etcd_cert, etcd_key), for the
  // election and the store alike.
  static etcd::EtcdClient::Options etcd_options(const ClusterConfig& config);
  // This process as a candidate named `name`, in `state`.
  static Candidate self(const ClusterConfig& config, const std::string& name, std::string state);

  // Ends the process at once, saying why in the log: what a leader that is
  // no longer one holds in memory may not be acted on.
  [[noreturn]] static void step_down(const std::string& why);

  const std::string& key() const { return key_; }
  std::int64_t revision() const { return revision_; }

  // What happens when the lease is lost: by default the process exits (1).
  // Tests may replace it; it runs on the renewal thread.
  void on_lost(std::function<void(const std::string& why)> lost) { lost_ = std::move(lost); }

 private:
  Leadership(etcd::EtcdClient client, std::string prefix, std::int64_t lease, std::int64_t ttl_s,
             std::int64_t revision);
  void renew();

  etcd::EtcdClient client_;
  std::string prefix_;
  std::string key_;
  std::int64_t lease_;
  std::int64_t ttl_s_;
  std::int64_t revision_;
  std::function<void(const std::string&)> lost_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread renewer_;
};

}  // namespace hpcq::daemon
