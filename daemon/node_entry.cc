#include "daemon/node_entry.h"

#include <limits>

namespace hpcq::daemon {

bool schedulable(const NodeEntry& node) {
  return node.state == NodeState::kUp && !node.unresponsive && !node.drained;
}

bool may_run_on(const std::string& name, const std::vector<std::string>& features,
                const NodeFilter& filter) {
  const auto in = [&](const std::vector<std::string>& names) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  return (filter.pool.empty() || in(filter.pool)) &&
         (filter.nodelist.empty() || in(filter.nodelist)) && !in(filter.exclude) &&
         filter.constraint.matches(features);
}

std::vector<Rank> eligible_ranks(const NodeMap& nodes, const NodeFilter& filter) {
  if (filter.pool.empty() && filter.nodelist.empty() && filter.exclude.empty() &&
      filter.constraint.empty()) {
    return {};
  }
  std::vector<Rank> ranks;
  for (const auto& [rank, node] : nodes) {
    if (may_run_on(node.name, node.features, filter)) ranks.push_back(rank);
  }
  if (ranks.empty()) ranks.push_back(std::numeric_limits<Rank>::max());
  return ranks;
}

std::vector<Rank> job_eligible_ranks(const NodeMap& nodes, const SitePolicy& site,
                                     const job::JobSpec& spec) {
  const QueueConfig* queue = site.find_queue(spec.queue);
  const std::vector<std::string> none;
  const auto constraint = job::parse_constraint(spec.constraint);
  const job::Constraint never{{{""}}};
  return eligible_ranks(nodes, {queue != nullptr ? queue->nodes : none, spec.nodelist, spec.exclude,
                                constraint.is_ok() ? *constraint : never});
}

}  // namespace hpcq::daemon
