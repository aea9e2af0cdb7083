#include "daemon/node_entry.h"

#include <limits>

namespace hpcq::daemon {

bool schedulable(const NodeEntry& node) {
  return node.state == NodeState::kUp && !node.unresponsive && !node.drained;
}

std::vector<Rank> eligible_ranks(const NodeMap& nodes, const std::vector<std::string>& nodelist,
                                 const std::vector<std::string>& exclude) {
  if (nodelist.empty() && exclude.empty()) return {};
  std::vector<Rank> ranks;
  for (const auto& [rank, node] : nodes) {
    const bool listed = nodelist.empty() ||
                        std::find(nodelist.begin(), nodelist.end(), node.name) != nodelist.end();
    if (listed && std::find(exclude.begin(), exclude.end(), node.name) == exclude.end()) {
      ranks.push_back(rank);
    }
  }
  if (ranks.empty()) ranks.push_back(std::numeric_limits<Rank>::max());
  return ranks;
}

}  // namespace hpcq::daemon
