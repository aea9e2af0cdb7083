#include "daemon/submit_policy.h"

#include <algorithm>
#include <string>

namespace hpcq::daemon {
namespace {

template <typename T, typename NameOf>
std::string names_of(const std::vector<T>& items, NameOf name_of) {
  std::string out;
  for (const T& item : items) {
    if (!out.empty()) out += ", ";
    out += name_of(item);
  }
  return out;
}

const QueueConfig* find_queue(const SitePolicy& site, const std::string& name) {
  if (site.queues.empty()) return nullptr;
  const std::string& wanted =
      !name.empty() ? name
                    : (!site.default_queue.empty() ? site.default_queue : site.queues[0].name);
  for (const auto& q : site.queues) {
    if (q.name == wanted) return &q;
  }
  return nullptr;
}

Status apply_time_limit(const ClusterConfig& config, const QueueConfig* queue, job::JobSpec& spec) {
  const std::int64_t queue_max = queue != nullptr ? queue->limits.max_time_limit_s : 0;
  const std::int64_t leader_max = config.max_time_limit_s;
  // The tighter of the two maxima that are set (0: none).
  std::int64_t max = queue_max > 0 && leader_max > 0 ? std::min(queue_max, leader_max)
                                                     : std::max(queue_max, leader_max);
  if (spec.time_limit_s == 0) {
    spec.time_limit_s = queue != nullptr && queue->default_time_limit_s > 0
                            ? queue->default_time_limit_s
                            : config.default_time_limit_s;
    if (max > 0) spec.time_limit_s = std::min(spec.time_limit_s, max);
  }
  if (spec.time_limit_s == job::JobSpec::kUnlimited) {
    // As Slurm's --time=UNLIMITED: the most the site allows; none if it sets none.
    spec.time_limit_s = max;
  }
  if (max > 0 && spec.time_limit_s > max) {
    const bool queue_bound = queue_max > 0 && queue_max == max;
    return invalid_argument("--time: " + std::to_string(spec.time_limit_s) +
                            " s exceeds the limit of " + std::to_string(max) + " s" +
                            (queue_bound ? " of queue '" + queue->name + "'" : ""));
  }
  return Status::ok();
}

Status apply_account(const SitePolicy& site, std::uint32_t uid, job::JobSpec& spec) {
  std::vector<const UserShare*> associations;
  for (const auto& u : site.users) {
    if (u.uid == uid) associations.push_back(&u);
  }
  if (spec.account.empty()) {
    // The first association is the user's default account (Slurm's
    // DefaultAccount); a user without one is charged to the root.
    if (!associations.empty()) spec.account = associations.front()->account;
    return Status::ok();
  }
  const bool known = spec.account == "root" ||
                     std::any_of(site.accounts.begin(), site.accounts.end(),
                                 [&](const AccountConfig& a) { return a.name == spec.account; });
  if (!known) {
    return invalid_argument(
        "--account: unknown account '" + spec.account + "'" +
        (site.accounts.empty()
             ? " (no accounts are configured)"
             : " (known: " + names_of(site.accounts, [](const auto& a) { return a.name; }) + ")"));
  }
  if (!associations.empty() &&
      std::none_of(associations.begin(), associations.end(),
                   [&](const UserShare* u) { return u->account == spec.account; })) {
    return invalid_argument("--account: user " + std::to_string(uid) +
                            " is not associated with account '" + spec.account + "'");
  }
  return Status::ok();
}

}  // namespace

Status apply_submit_policy(const ClusterConfig& config, std::uint32_t uid, bool is_admin,
                           job::JobSpec& spec) {
  const SitePolicy& site = config.site;
  const QueueConfig* queue = find_queue(site, spec.queue);
  if (!site.queues.empty()) {
    if (queue == nullptr) {
      return invalid_argument("--queue: unknown queue '" + spec.queue + "' (known: " +
                              names_of(site.queues, [](const auto& q) { return q.name; }) + ")");
    }
    spec.queue = queue->name;
  } else if (!spec.queue.empty()) {
    return invalid_argument("--queue: unknown queue '" + spec.queue +
                            "' (this cluster has no queues configured)");
  }
  for (const std::string& node : spec.nodelist) {
    if (std::none_of(config.ranks.begin(), config.ranks.end(),
                     [&](const RankConfig& r) { return r.name == node; })) {
      return invalid_argument("--nodelist: unknown node '" + node + "'");
    }
  }
  HPCQ_RETURN_IF_ERROR(apply_time_limit(config, queue, spec));
  HPCQ_RETURN_IF_ERROR(apply_account(site, uid, spec));
  if (!spec.qos.empty() && std::none_of(site.qos.begin(), site.qos.end(),
                                        [&](const QosConfig& q) { return q.name == spec.qos; })) {
    return invalid_argument("--qos: unknown qos '" + spec.qos + "'" +
                            (site.qos.empty() ? " (no QOS levels are configured)"
                                              : " (known: " + names_of(site.qos, [](const auto& q) {
                                                  return q.name;
                                                }) + ")"));
  }
  if (spec.priority > 0 && !is_admin) {
    return permission_denied("--priority: only an admin may raise a job's priority (" +
                             std::to_string(spec.priority) + " > 0); a user may lower it");
  }
  return Status::ok();
}

}  // namespace hpcq::daemon
