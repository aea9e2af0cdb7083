#include "daemon/node_entry.h"

#include <algorithm>

namespace hpcq::daemon {

bool schedulable(const NodeEntry& node) {
  return node.state == NodeState::kUp && !node.unresponsive && !node.drained;
}

std::vector<Rank> ranks_of(const NodeMap& nodes, const std::vector<std::string>& names) {
  std::vector<Rank> ranks;
  for (const auto& [rank, node] : nodes) {
    if (std::find(names.begin(), names.end(), node.name) != names.end()) ranks.push_back(rank);
  }
  return ranks;  // ascending: the map's order
}

}  // namespace hpcq::daemon
