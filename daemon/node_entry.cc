#include "daemon/node_entry.h"

#include <limits>

namespace hpcq::daemon {

bool schedulable(const NodeEntry& node) {
  return node.state == NodeState::kUp && !node.unresponsive && !node.drained;
}

std::vector<Rank> eligible_ranks(const NodeMap& nodes, const std::vector<std::string>& pool,
                                 const std::vector<std::string>& nodelist,
                                 const std::vector<std::string>& exclude) {
  if (pool.empty() && nodelist.empty() && exclude.empty()) return {};
  const auto in = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::vector<Rank> ranks;
  for (const auto& [rank, node] : nodes) {
    if ((pool.empty() || in(pool, node.name)) && (nodelist.empty() || in(nodelist, node.name)) &&
        !in(exclude, node.name)) {
      ranks.push_back(rank);
    }
  }
  if (ranks.empty()) ranks.push_back(std::numeric_limits<Rank>::max());
  return ranks;
}

}  // namespace hpcq::daemon
