#include "daemon/node_entry.h"

#include <limits>

namespace hpcq::daemon {

bool schedulable(const NodeEntry& node) {
  return node.state == NodeState::kUp && !node.unresponsive && !node.drained;
}

bool may_run_on(const std::string& name, const std::vector<std::string>& pool,
                const std::vector<std::string>& nodelist, const std::vector<std::string>& exclude) {
  const auto in = [&](const std::vector<std::string>& names) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  return (pool.empty() || in(pool)) && (nodelist.empty() || in(nodelist)) && !in(exclude);
}

std::vector<Rank> eligible_ranks(const NodeMap& nodes, const std::vector<std::string>& pool,
                                 const std::vector<std::string>& nodelist,
                                 const std::vector<std::string>& exclude) {
  if (pool.empty() && nodelist.empty() && exclude.empty()) return {};
  std::vector<Rank> ranks;
  for (const auto& [rank, node] : nodes) {
    if (may_run_on(node.name, pool, nodelist, exclude)) ranks.push_back(rank);
  }
  if (ranks.empty()) ranks.push_back(std::numeric_limits<Rank>::max());
  return ranks;
}

}  // namespace hpcq::daemon
