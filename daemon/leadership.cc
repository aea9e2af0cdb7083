#include "daemon/leadership.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "lib/core/host_name.h"

namespace hpcq::daemon {
namespace {

// A standby's tries, and the renewals, come this many times per lease.
constexpr int kTriesPerLease = 3;

// Under the prefix: each candidate's description (kept), and a key with its
// lease (alive while it is).
constexpr std::string_view kMembers = "members/";
constexpr std::string_view kAlive = "alive/";

// Issue 45: whoever reaches the store can run jobs as anyone, so hpcqd
// refuses an etcd that also answers a client without a certificate (one
// started without --client-cert-auth), unless the site said etcd_insecure.
// Asked once hpcqd's own client has been answered, so that an etcd still
// starting is not taken for one that refuses.
Status refuse_open_etcd(const ClusterConfig& config, std::chrono::milliseconds deadline) {
  etcd::EtcdClient::Options anonymous;
  anonymous.ca_file = config.etcd_ca;
  anonymous.deadline = deadline;
  auto client = etcd::EtcdClient::connect(config.etcd_endpoints, anonymous);
  if (!client.is_ok()) return client.status();
  if (client->get(config.etcd_prefix + "leader").is_ok()) {
    return failed_precondition("etcd " + client->endpoints() +
                               " answers clients without a certificate: run it with "
                               "--client-cert-auth (or set leader.etcd_insecure = true)");
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Leadership>> Leadership::campaign(const ClusterConfig& config,
                                                         const std::string& name,
                                                         const std::function<bool()>& stopping) {
  const auto period = std::chrono::milliseconds(config.lease_s * 1000 / kTriesPerLease);
  etcd::EtcdClient::Options options = etcd_options(config);
  options.deadline = period;  // a renewal or a write must fail well within the lease
  auto connected = etcd::EtcdClient::connect(config.etcd_endpoints, options);
  if (!connected.is_ok()) return connected.status();
  etcd::EtcdClient client = std::move(connected).value();
  const std::string key = config.etcd_prefix + "leader";
  const Candidate me = self(config, name, "");
  const std::string member_json =
      nlohmann::json{{"host", me.host}, {"pid", me.pid}, {"endpoint", me.endpoint}}.dump();
  std::string holder;  // the last holder logged
  std::int64_t lease = 0, ttl = 0;
  bool probed = config.etcd_insecure;
  for (;;) {
    if (stopping()) {
      if (lease != 0) (void)client.revoke(lease);
      return std::unique_ptr<Leadership>();
    }
    if (!probed) {
      // Before a lease is granted: the probe may take a deadline per member.
      auto reached = client.get(key);
      if (reached.is_ok()) {
        HPCQ_RETURN_IF_ERROR(refuse_open_etcd(config, period));
        probed = true;
      } else if (reached.status().code() != Code::kUnavailable) {
        return reached.status();
      } else {
        std::this_thread::sleep_for(period);
        continue;
      }
    }
    if (lease == 0) {
      auto granted = client.grant(config.lease_s);
      if (granted.is_ok()) {
        lease = granted->id;
        ttl = granted->ttl_seconds;
        // Known to `hpcq leaders` from now on; alive while the lease is.
        etcd::Txn registration;
        registration.put(config.etcd_prefix + std::string(kMembers) + name, member_json)
            .put(config.etcd_prefix + std::string(kAlive) + name, "", lease);
        (void)client.txn(registration);
      } else if (granted.status().code() != Code::kUnavailable) {
        return granted.status();
      }
    }

    if (lease != 0) {
      etcd::Txn txn;
      txn.if_equal(key, etcd::Txn::Target::kCreateRevision, 0).put(key, name, lease);
      auto won = client.txn(txn);
      if (won.is_ok() && won->succeeded) {
        spdlog::info("hpcqd: {} leads ({} at revision {}, lease {} s)", name, key, won->revision,
                     ttl);
        return std::unique_ptr<Leadership>(
            new Leadership(std::move(client), config.etcd_prefix, lease, ttl, won->revision));
      }
      if (!won.is_ok() && won.status().code() != Code::kUnavailable) return won.status();
      auto now = client.get(key);
      if (now.is_ok() && now->has_value() && (*now)->value != holder) {
        holder = (*now)->value;
        spdlog::info("hpcqd: {} stands by: {} leads", name, holder);
      }
      // Our lease stays alive while we wait, so that winning is immediate.
      auto renewed = client.keep_alive_once(lease);
      if (!renewed.is_ok() && renewed.status().code() == Code::kNotFound) lease = 0;
    }
    std::this_thread::sleep_for(period);
  }
}

Leadership::Leadership(etcd::EtcdClient client, std::string prefix, std::int64_t lease,
                       std::int64_t ttl_s, std::int64_t revision)
    : client_(std::move(client)),
      prefix_(std::move(prefix)),
      key_(prefix_ + "leader"),
      lease_(lease),
      ttl_s_(ttl_s),
      revision_(revision),
      lost_([](const std::string& why) { step_down("no longer the leader: " + why); }) {
  renewer_ = std::thread([this] { renew(); });
}

Leadership::~Leadership() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  // A clean stop hands over at once: the key goes with the lease.
  (void)client_.revoke(lease_);
}

etcd::EtcdClient::Options Leadership::etcd_options(const ClusterConfig& config) {
  etcd::EtcdClient::Options options;
  options.ca_file = config.etcd_ca;
  options.cert_file = config.etcd_cert;
  options.key_file = config.etcd_key;
  return options;
}

Leadership::Candidate Leadership::self(const ClusterConfig& config, const std::string& name,
                                       std::string state) {
  return {name, std::move(state), this_host_name(), getpid(),
          config.ranks.empty() ? "" : config.ranks[0].endpoint};
}

void Leadership::step_down(const std::string& why) {
  spdlog::critical("hpcqd: {}: exiting at once", why);
  spdlog::shutdown();
  _exit(1);
}

Result<std::vector<Leadership::Candidate>> Leadership::candidates() const {
  const std::string members_prefix = prefix_ + std::string(kMembers);
  const std::string alive_prefix = prefix_ + std::string(kAlive);
  auto members = client_.range(members_prefix);
  if (!members.is_ok()) return members.status();
  auto alive = client_.range(alive_prefix);
  if (!alive.is_ok()) return alive.status();
  auto leader = client_.get(key_);
  if (!leader.is_ok()) return leader.status();
  std::set<std::string> live;
  for (const etcd::KeyValue& kv : *alive) live.insert(kv.key.substr(alive_prefix.size()));
  std::vector<Candidate> out;
  for (const etcd::KeyValue& kv : *members) {
    Candidate c;
    c.name = kv.key.substr(members_prefix.size());
    const auto j = nlohmann::json::parse(kv.value, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) {
      c.host = j.value("host", "");
      c.pid = j.value("pid", std::int64_t{0});
      c.endpoint = j.value("endpoint", "");
    }
    c.state = leader->has_value() && (*leader)->value == c.name ? "active"
              : live.count(c.name)                              ? "standby"
                                                                : "unreachable";
    out.push_back(std::move(c));
  }
  return out;
}

void Leadership::renew() {
  using Clock = std::chrono::steady_clock;
  const auto period = std::chrono::milliseconds(ttl_s_ * 1000 / kTriesPerLease);
  auto last_renewed = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, period, [this] { return stop_; })) {
    lock.unlock();
    auto renewed = client_.keep_alive_once(lease_);
    lock.lock();
    if (stop_) return;
    if (renewed.is_ok()) {
      last_renewed = Clock::now();
      // A lease alive is not enough: the key may be gone (deleted by an
      // operator's mistake or a store fault), and another may have won it.
      lock.unlock();
      auto held = client_.get(key_);
      lock.lock();
      if (stop_) return;
      if (held.is_ok() && (!held->has_value() || (*held)->create_revision != revision_)) {
        lost_(key_ + (held->has_value() ? " is another's" : " is gone"));
        return;
      }
      continue;
    }
    if (renewed.status().code() == Code::kNotFound) {
      lost_("its lease expired: " + renewed.status().message());
      return;
    }
    // Unreachable: past a whole lease since the last renewal, etcd may have
    // let it expire and another candidate may lead.
    if (Clock::now() - last_renewed >= std::chrono::seconds(ttl_s_) - period / 2) {
      lost_("no renewal of its lease for " + std::to_string(ttl_s_) +
            " s: " + renewed.status().message());
      return;
    }
  }
}

}  // namespace hpcq::daemon
