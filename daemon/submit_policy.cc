#include "daemon/submit_policy.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "daemon/node_entry.h"
#include "lib/core/hostlist.h"
#include "lib/core/units.h"

namespace hpcq::daemon {
namespace {

template <typename T, typename NameOf>
std::string names_of(const T& items, NameOf name_of) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += name_of(item);
  }
  return out;
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
        "--account: unknown account " + quote(spec.account) +
        (site.accounts.empty()
             ? " (no accounts are configured)"
             : " (known: " + names_of(site.accounts, [](const auto& a) { return a.name; }) + ")"));
  }
  if (!associations.empty() &&
      std::none_of(associations.begin(), associations.end(),
                   [&](const UserShare* u) { return u->account == spec.account; })) {
    return invalid_argument("--account: user " + std::to_string(uid) +
                            " is not associated with account " + quote(spec.account));
  }
  return Status::ok();
}

Status check_queue_limits(const QueueConfig* queue, const job::JobSpec& spec) {
  if (queue == nullptr) return Status::ok();
  const QueueLimits& l = queue->limits;
  const std::int64_t nodes = spec.request.nodes;
  const std::int64_t cores =
      static_cast<std::int64_t>(spec.request.ntasks) * spec.request.cpus_per_task;
  const std::string of = " of queue '" + queue->name + "'";
  for (const auto& [limit, per_user] :
       {std::pair{l.max_nodes, false}, std::pair{l.max_nodes_per_user, true}}) {
    if (limit > 0 && nodes > limit) {
      return invalid_argument("--nodes: " + std::to_string(nodes) + " nodes exceed the limit" + of +
                              " (" + std::to_string(limit) + (per_user ? " per user)" : ")"));
    }
  }
  for (const auto& [limit, per_user] :
       {std::pair{l.max_cores, false}, std::pair{l.max_cores_per_user, true}}) {
    if (limit > 0 && cores > limit) {
      return invalid_argument("--ntasks: " + std::to_string(cores) + " cores exceed the limit" +
                              of + " (" + std::to_string(limit) + (per_user ? " per user)" : ")"));
    }
  }
  return Status::ok();
}

// --gres: each name some node has, and enough nodes the job may run on with
// each count (per node, as Slurm's) to hold its -N. `queue` names the
// queue's node set in messages (empty: every node).
Status check_gres(const ClusterConfig& config, const NodeFilter& filter, const std::string& queue,
                  const job::JobSpec& spec) {
  const std::map<std::string, int>& asked = spec.request.gres;
  if (asked.empty()) return Status::ok();
  const auto first_node = config.ranks.begin() + (config.ranks.empty() ? 0 : 1);
  std::set<std::string> known;
  for (auto r = first_node; r != config.ranks.end(); ++r) {
    for (const auto& [name, count] : r->gres) known.insert(name);
  }
  for (const auto& [name, count] : asked) {
    if (!known.contains(name)) {
      return invalid_argument(
          "--gres: unknown generic resource " + quote(name) + " (known: " +
          (known.empty() ? std::string("none") : names_of(known, [](const auto& n) { return n; })) +
          ")");
    }
  }
  std::int64_t holding = 0;
  std::map<std::string, int> most;  // the most of each that one eligible node has
  for (auto r = first_node; r != config.ranks.end(); ++r) {
    if (!may_run_on(r->name, r->features, filter)) continue;
    bool all = true;
    for (const auto& [name, count] : asked) {
      const auto has = r->gres.find(name);
      const int n = has != r->gres.end() ? has->second : 0;
      most[name] = std::max(most[name], n);
      all = all && n >= count;
    }
    if (all) ++holding;
  }
  const std::string of_queue = queue.empty() ? "" : " of queue " + quote(queue);
  for (const auto& [name, count] : asked) {
    if (most[name] < count) {
      return invalid_argument(
          "--gres: " + name + ":" + std::to_string(count) + ": no node" + of_queue +
          " the job may run on has that many (the most: " + std::to_string(most[name]) + ")");
    }
  }
  if (holding == 0) {
    return invalid_argument("--gres: no node" + of_queue +
                            " the job may run on has all of what it asks");
  }
  if (spec.request.nodes > holding) {
    return invalid_argument("--nodes: " + std::to_string(spec.request.nodes) + " nodes, --gres " +
                            "leaves " + std::to_string(holding));
  }
  return Status::ok();
}

}  // namespace

Status check_fits(const std::vector<std::optional<NodeShape>>& nodes, const job::JobSpec& spec) {
  if (nodes.empty() ||
      std::any_of(nodes.begin(), nodes.end(), [](const auto& n) { return !n.has_value(); })) {
    return Status::ok();
  }
  const resource::ResourceRequest& r = spec.request;
  int most_cores = 0, most_gpus = 0;
  std::uint64_t most_memory = 0;
  std::vector<std::int64_t> tasks_on;  // whole tasks each node can hold
  for (const auto& n : nodes) {
    most_cores = std::max(most_cores, n->cores);
    most_gpus = std::max(most_gpus, n->gpus);
    most_memory = std::max(most_memory, n->memory_bytes);
    tasks_on.push_back(r.cpus_per_task > 0 ? n->cores / r.cpus_per_task : 0);
  }
  const std::string largest = "the largest node has ";
  if (r.cpus_per_task > most_cores) {
    return invalid_argument("--cpus-per-task: " + std::to_string(r.cpus_per_task) +
                            " cores for one task, " + largest + std::to_string(most_cores));
  }
  if (r.mem_per_node_bytes > most_memory) {
    return invalid_argument("--mem: " + format_memory(r.mem_per_node_bytes) + ", " + largest +
                            format_memory(most_memory));
  }
  const std::uint64_t task_memory =
      r.mem_per_cpu_bytes * static_cast<std::uint64_t>(r.cpus_per_task);
  if (task_memory > most_memory) {
    return invalid_argument("--mem-per-cpu: " + format_memory(task_memory) + " for one task, " +
                            largest + format_memory(most_memory));
  }
  const int gpus = std::max(r.gpus_per_node, r.gpus_per_task);
  if (gpus > most_gpus) {
    return invalid_argument(
        std::string(r.gpus_per_node >= r.gpus_per_task ? "--gpus-per-node: "
                                                       : "--gpus-per-task: ") +
        std::to_string(gpus) + " GPUs, " +
        (most_gpus == 0 ? std::string("no node has GPUs") : largest + std::to_string(most_gpus)));
  }
  if (r.oversubscribe) return Status::ok();  // shared cores: no count rules it out
  // The most tasks it could get: on its -N largest nodes, or on all.
  std::sort(tasks_on.rbegin(), tasks_on.rend());
  const std::size_t using_nodes =
      r.nodes > 0 ? std::min<std::size_t>(tasks_on.size(), static_cast<std::size_t>(r.nodes))
                  : tasks_on.size();
  std::int64_t room = 0;
  for (std::size_t i = 0; i < using_nodes; ++i) room += tasks_on[i];
  if (r.ntasks > room) {
    return invalid_argument(
        "--ntasks: " + std::to_string(r.ntasks) + " tasks of " + std::to_string(r.cpus_per_task) +
        " cores do not fit on " +
        (r.nodes > 0 ? "the " + std::to_string(using_nodes) + " largest nodes" : "the cluster") +
        " (room for " + std::to_string(room) + ")");
  }
  return Status::ok();
}

Status apply_submit_policy(const ClusterConfig& config, std::uint32_t uid,
                           const std::vector<std::string>& groups, bool is_admin,
                           job::JobSpec& spec) {
  const SitePolicy& site = config.site;
  const QueueConfig* queue = site.find_queue(spec.queue);
  if (!site.queues.empty()) {
    if (queue == nullptr) {
      return invalid_argument("--queue: unknown queue " + quote(spec.queue) + " (known: " +
                              names_of(site.queues, [](const auto& q) { return q.name; }) + ")");
    }
    spec.queue = queue->name;
  } else if (!spec.queue.empty()) {
    return invalid_argument("--queue: unknown queue " + quote(spec.queue) +
                            " (this cluster has no queues configured)");
  }
  // Rank 0 is the leader's, not a node's.
  const auto first_node = config.ranks.begin() + (config.ranks.empty() ? 0 : 1);
  const auto known = [&](const std::string& node) {
    return std::any_of(first_node, config.ranks.end(),
                       [&](const RankConfig& r) { return r.name == node; });
  };
  for (const std::string& node : spec.nodelist) {
    if (!known(node)) return invalid_argument("--nodelist: unknown node " + quote(node));
  }
  for (const std::string& node : spec.exclude) {
    if (!known(node)) return invalid_argument("--exclude: unknown node " + quote(node));
  }
  const std::int64_t configured = std::max<std::int64_t>(0, std::ssize(config.ranks) - 1);
  if (spec.request.nodes > configured) {
    return invalid_argument("--nodes: " + std::to_string(spec.request.nodes) +
                            " nodes, the cluster has " + std::to_string(configured));
  }
  // The queue's nodes, less -x's, within -w's, with -C's features.
  const std::vector<std::string> none;
  const std::vector<std::string>& pool = queue != nullptr ? queue->nodes : none;
  const auto in = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  const job::Constraint any;
  for (const std::string& node : spec.nodelist) {
    if (!may_run_on(node, {}, {pool, none, none, any})) {
      return invalid_argument("--nodelist: node " + quote(node) + " is not in queue " +
                              quote(queue->name) + " (its nodes: " + compress_hostlist(pool) + ")");
    }
  }
  auto constraint = job::parse_constraint(spec.constraint);
  if (!constraint.is_ok()) return constraint.status();
  if (!pool.empty() || !spec.exclude.empty() || !constraint->empty()) {
    std::int64_t eligible = 0;
    for (auto r = first_node; r != config.ranks.end(); ++r) {
      if (may_run_on(r->name, r->features, {pool, spec.nodelist, spec.exclude, *constraint})) {
        ++eligible;
      }
    }
    // What narrowed the nodes down, for the refusal.
    const std::string narrowed = !constraint->empty() ? "-C/--constraint " + quote(spec.constraint)
                                 : !spec.exclude.empty() ? std::string("--exclude")
                                                         : "queue " + quote(queue->name);
    if (eligible == 0) {
      return invalid_argument(
          !constraint->empty()
              ? narrowed + ": no node " +
                    (pool.empty() ? std::string("has those features")
                                  : "of queue " + quote(queue->name) + " has those features")
              : "--exclude: no node is left to run on");
    }
    if (spec.request.nodes > eligible) {
      const bool by_queue = constraint->empty() && spec.exclude.empty();
      return invalid_argument("--nodes: " + std::to_string(spec.request.nodes) + " nodes, " +
                              narrowed + (by_queue ? " has " : " leaves ") +
                              std::to_string(eligible));
    }
  }
  for (const auto& [name, count] : spec.licenses) {
    const auto total = site.licenses.find(name);
    if (total == site.licenses.end()) {
      return invalid_argument(
          "-L/--licenses: unknown license " + quote(name) + " (known: " +
          (site.licenses.empty() ? std::string("none")
                                 : names_of(site.licenses, [](const auto& l) { return l.first; })) +
          ")");
    }
    if (count > total->second) {
      return invalid_argument("-L/--licenses: " + std::to_string(count) + " of license " +
                              quote(name) + ", the cluster has " + std::to_string(total->second));
    }
  }
  HPCQ_RETURN_IF_ERROR(check_gres(config, {pool, spec.nodelist, spec.exclude, *constraint},
                                  pool.empty() ? "" : queue->name, spec));
  HPCQ_RETURN_IF_ERROR(check_queue_limits(queue, spec));
  HPCQ_RETURN_IF_ERROR(apply_time_limit(config, queue, spec));
  HPCQ_RETURN_IF_ERROR(apply_account(site, uid, spec));
  if (queue != nullptr && !is_admin) {
    if (!queue->allow_accounts.empty() && !in(queue->allow_accounts, spec.account)) {
      return permission_denied("--queue: queue " + quote(queue->name) + " is not open to account " +
                               quote(spec.account.empty() ? "(none)" : spec.account));
    }
    if (!queue->allow_groups.empty() &&
        std::none_of(groups.begin(), groups.end(),
                     [&](const std::string& g) { return in(queue->allow_groups, g); })) {
      return permission_denied("--queue: queue " + quote(queue->name) + " is open to " +
                               (queue->allow_groups.size() == 1 ? "group " : "groups ") +
                               names_of(queue->allow_groups, [](const auto& g) { return g; }) +
                               " only");
    }
  }
  if (!spec.qos.empty() && std::none_of(site.qos.begin(), site.qos.end(),
                                        [&](const QosConfig& q) { return q.name == spec.qos; })) {
    return invalid_argument("--qos: unknown qos " + quote(spec.qos) +
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
