#include "daemon/node_entry.h"

namespace hpcq::daemon {

bool schedulable(const NodeEntry& node) {
  return node.state == NodeState::kUp && !node.unresponsive && !node.drained;
}

}  // namespace hpcq::daemon
