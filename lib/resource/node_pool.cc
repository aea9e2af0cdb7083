#include "lib/resource/node_pool.h"

#include <algorithm>
#include <utility>

namespace hpcq::resource {
namespace {

std::string where(const NodeState& node) {
  return "node " + node.name() + " (rank " + std::to_string(node.rank()) + ")";
}

Status check_topology(const NodeTopology& topo) {
  for (std::size_t i = 0; i < topo.numa.size(); ++i) {
    if (topo.numa[i].id != static_cast<int>(i)) {
      return invalid_argument("NUMA domain at index " + std::to_string(i) + " has id " +
                              std::to_string(topo.numa[i].id));
    }
  }
  for (std::size_t i = 0; i < topo.cores.size(); ++i) {
    const Core& core = topo.cores[i];
    if (core.id != static_cast<int>(i)) {
      return invalid_argument("core at index " + std::to_string(i) + " has id " +
                              std::to_string(core.id));
    }
    if (core.numa < 0 || core.numa >= static_cast<int>(topo.numa.size())) {
      return invalid_argument("core " + std::to_string(i) + " names NUMA domain " +
                              std::to_string(core.numa) + " of " +
                              std::to_string(topo.numa.size()));
    }
  }
  return Status::ok();
}

}  // namespace

int NodeState::free_cores_in_numa(int numa) const {
  if (numa < 0 || numa >= static_cast<int>(numa_free_.size())) return 0;
  return numa_free_[static_cast<std::size_t>(numa)];
}

bool NodeState::core_free(int core) const {
  return core >= 0 && core < total_cores() && !used_[static_cast<std::size_t>(core)];
}

Status NodePool::add_node(Rank rank, std::string name, NodeTopology topology, bool schedulable) {
  if (find(rank) != nullptr) {
    return {Code::kAlreadyExists, "rank " + std::to_string(rank) + " is already in the pool"};
  }
  Status valid = check_topology(topology);
  if (!valid.is_ok()) {
    return invalid_argument("node " + name + " (rank " + std::to_string(rank) +
                            "): bad topology: " + valid.message());
  }
  NodeState node;
  node.rank_ = rank;
  node.name_ = std::move(name);
  node.schedulable_ = schedulable;
  node.used_.assign(topology.cores.size(), false);
  node.numa_free_.assign(topology.numa.size(), 0);
  for (const Core& core : topology.cores) node.numa_free_[static_cast<std::size_t>(core.numa)]++;
  node.free_cores_ = topology.num_cores();
  node.topology_ = std::make_shared<const NodeTopology>(std::move(topology));
  auto pos = std::lower_bound(nodes_.begin(), nodes_.end(), rank,
                              [](const NodeState& n, Rank r) { return n.rank_ < r; });
  nodes_.insert(pos, std::move(node));
  return Status::ok();
}

bool NodePool::remove_node(Rank rank) {
  auto pos = std::lower_bound(nodes_.begin(), nodes_.end(), rank,
                              [](const NodeState& n, Rank r) { return n.rank_ < r; });
  if (pos == nodes_.end() || pos->rank_ != rank) return false;
  nodes_.erase(pos);
  return true;
}

bool NodePool::set_schedulable(Rank rank, bool schedulable) {
  NodeState* node = find_mutable(rank);
  if (node == nullptr) return false;
  node->schedulable_ = schedulable;
  return true;
}

const NodeState* NodePool::find(Rank rank) const {
  auto pos = std::lower_bound(nodes_.begin(), nodes_.end(), rank,
                              [](const NodeState& n, Rank r) { return n.rank_ < r; });
  return pos != nodes_.end() && pos->rank_ == rank ? &*pos : nullptr;
}

NodeState* NodePool::find_mutable(Rank rank) {
  return const_cast<NodeState*>(std::as_const(*this).find(rank));
}

int NodePool::free_cores(Rank rank) const {
  const NodeState* node = find(rank);
  return node != nullptr ? node->free_cores() : 0;
}

int NodePool::free_cores_in_numa(Rank rank, int numa) const {
  const NodeState* node = find(rank);
  return node != nullptr ? node->free_cores_in_numa(numa) : 0;
}

std::uint64_t NodePool::free_memory(Rank rank) const {
  const NodeState* node = find(rank);
  return node != nullptr ? node->free_memory() : 0;
}

NodePool NodePool::idle_copy() const {
  NodePool copy = *this;
  for (NodeState& node : copy.nodes_) {
    node.used_.assign(node.used_.size(), false);
    node.numa_free_.assign(node.numa_free_.size(), 0);
    for (const Core& core : node.topology_->cores) {
      node.numa_free_[static_cast<std::size_t>(core.numa)]++;
    }
    node.free_cores_ = node.total_cores();
    node.used_memory_ = 0;
  }
  return copy;
}

Status NodePool::check_part(const NodeState& node, const NodeAllocation& part, bool taking,
                            std::vector<bool>& seen) const {
  for (int core : part.cores) {
    if (core < 0 || core >= node.total_cores()) {
      return invalid_argument(where(node) + ": core " + std::to_string(core) + " does not exist (" +
                              std::to_string(node.total_cores()) + " cores)");
    }
    const auto c = static_cast<std::size_t>(core);
    if (seen[c]) {
      return invalid_argument(where(node) + ": core " + std::to_string(core) +
                              " is listed twice in the allocation");
    }
    seen[c] = true;
    if (taking && node.used_[c]) {
      return failed_precondition(where(node) + ": core " + std::to_string(core) +
                                 " is already in use");
    }
    if (!taking && !node.used_[c]) {
      return failed_precondition(where(node) + ": core " + std::to_string(core) + " is not in use");
    }
  }
  return Status::ok();
}

Status NodePool::check(const Allocation& allocation, bool taking) const {
  // A rank may appear in several parts: count its cores and memory together.
  struct Seen {
    Rank rank;
    std::vector<bool> cores;
    std::uint64_t memory;
  };
  std::vector<Seen> seen;
  for (const NodeAllocation& part : allocation.nodes) {
    const NodeState* node = find(part.rank);
    if (node == nullptr) {
      return not_found("rank " + std::to_string(part.rank) + " is not in the pool");
    }
    if (taking && !node->schedulable()) {
      return failed_precondition(where(*node) + " is not schedulable");
    }
    auto s =
        std::find_if(seen.begin(), seen.end(), [&](const Seen& e) { return e.rank == part.rank; });
    if (s == seen.end()) {
      seen.push_back({part.rank, std::vector<bool>(node->used_.size()), 0});
      s = seen.end() - 1;
    }
    HPCQ_RETURN_IF_ERROR(check_part(*node, part, taking, s->cores));
    s->memory += part.memory_bytes;
    if (taking && s->memory > node->free_memory()) {
      return failed_precondition(where(*node) + ": " + std::to_string(s->memory) +
                                 " bytes of memory asked, " + std::to_string(node->free_memory()) +
                                 " free");
    }
    if (!taking && s->memory > node->used_memory_) {
      return failed_precondition(where(*node) + ": releasing " + std::to_string(s->memory) +
                                 " bytes of memory, " + std::to_string(node->used_memory_) +
                                 " in use");
    }
  }
  return Status::ok();
}

void NodePool::apply(const Allocation& allocation, bool taking) {
  for (const NodeAllocation& part : allocation.nodes) {
    NodeState& node = *find_mutable(part.rank);
    const int delta = taking ? -1 : 1;
    for (int core : part.cores) {
      const auto c = static_cast<std::size_t>(core);
      node.used_[c] = taking;
      node.numa_free_[static_cast<std::size_t>(node.topology_->cores[c].numa)] += delta;
      node.free_cores_ += delta;
    }
    if (taking) {
      node.used_memory_ += part.memory_bytes;
    } else {
      node.used_memory_ -= part.memory_bytes;
    }
  }
}

Status NodePool::allocate(const Allocation& allocation) {
  HPCQ_RETURN_IF_ERROR(check(allocation, true));
  apply(allocation, true);
  return Status::ok();
}

Status NodePool::release(const Allocation& allocation) {
  HPCQ_RETURN_IF_ERROR(check(allocation, false));
  apply(allocation, false);
  return Status::ok();
}

}  // namespace hpcq::resource
