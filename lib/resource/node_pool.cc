#include "lib/resource/node_pool.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace hpcq::resource {
namespace {

using Words = std::vector<std::uint64_t>;

bool test_bit(const Words& w, int i) {
  return ((w[static_cast<std::size_t>(i) / 64] >> (static_cast<unsigned>(i) % 64)) & 1U) != 0;
}
void put_bit(Words& w, int i, bool on) {
  const std::uint64_t b = std::uint64_t{1} << (static_cast<unsigned>(i) % 64);
  if (on) {
    w[static_cast<std::size_t>(i) / 64] |= b;
  } else {
    w[static_cast<std::size_t>(i) / 64] &= ~b;
  }
}
std::size_t words_for(std::size_t bits) { return (bits + 63) / 64; }

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
  for (std::size_t i = 0; i < topo.gpus.size(); ++i) {
    const Gpu& gpu = topo.gpus[i];
    if (gpu.id != static_cast<int>(i)) {
      return invalid_argument("GPU at index " + std::to_string(i) + " has id " +
                              std::to_string(gpu.id));
    }
    if (gpu.numa < -1 || gpu.numa >= static_cast<int>(topo.numa.size())) {
      return invalid_argument("GPU " + std::to_string(i) + " names NUMA domain " +
                              std::to_string(gpu.numa) + " of " + std::to_string(topo.numa.size()));
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
  return core >= 0 && core < total_cores() && !test_bit(taken_, core);
}

int NodeState::shareable_cores() const {
  int closed = 0;
  for (std::uint64_t w : closed_) closed += std::popcount(w);
  return total_cores() - closed;
}

int NodeState::shareable_cores_in_numa(int numa) const {
  const std::span<const std::uint64_t> mask = numa_mask(numa);
  int n = 0;
  for (std::size_t i = 0; i < mask.size(); ++i) n += std::popcount(mask[i] & ~closed_[i]);
  return n;
}

bool NodeState::core_reserved(int core) const {
  return core >= 0 && core < total_cores() && test_bit(reserved_, core);
}

bool NodeState::idle() const {
  return free_cores_ == total_cores() - reserved_count_ && free_gpus_ == total_gpus() &&
         used_memory_ == 0 &&
         std::all_of(gres_used_.begin(), gres_used_.end(), [](int used) { return used == 0; });
}

int NodeState::sharers(int core) const {
  if (core < 0 || core >= total_cores() || sharers_.empty()) return 0;
  return sharers_[static_cast<std::size_t>(core)];
}

int NodeState::free_gpus_in_numa(int numa) const {
  int n = 0;
  for (const Gpu& gpu : static_->topology.gpus) {
    if (gpu.numa == numa && !test_bit(gpu_used_, gpu.id)) ++n;
  }
  return n;
}

bool NodeState::gpu_free(int gpu) const {
  return gpu >= 0 && gpu < total_gpus() && !test_bit(gpu_used_, gpu);
}

int NodeState::free_gres(const std::string& name) const {
  const auto it = static_->gres.find(name);
  if (it == static_->gres.end()) return 0;
  const auto at = static_cast<std::size_t>(std::distance(static_->gres.begin(), it));
  return it->second - (at < gres_used_.size() ? gres_used_[at] : 0);
}

std::span<const std::uint64_t> NodeState::numa_mask(int numa) const {
  if (numa < 0 || numa >= static_cast<int>(static_->topology.numa.size())) return {};
  return std::span<const std::uint64_t>(static_->numa_masks)
      .subspan(static_cast<std::size_t>(numa) * static_->words, static_->words);
}

void NodePool::refresh_core(NodeState& node, int c) {
  const int share = node.sharers_.empty() ? 0 : node.sharers_[static_cast<std::size_t>(c)];
  const bool hard = test_bit(node.exclusive_, c) || test_bit(node.reserved_, c);
  const bool now_taken = hard || share > 0;
  const bool was_taken = test_bit(node.taken_, c);
  put_bit(node.taken_, c, now_taken);
  put_bit(node.closed_, c, hard || share >= kMaxSharers);
  if (now_taken != was_taken) {
    const int delta = now_taken ? -1 : 1;
    const Core& core = node.topology().cores[static_cast<std::size_t>(c)];
    node.numa_free_[static_cast<std::size_t>(core.numa)] += delta;
    node.free_cores_ += delta;
  }
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
  auto info = std::make_shared<NodeState::Static>();
  info->name = std::move(name);
  info->words = words_for(topology.cores.size());
  info->numa_masks.assign(topology.numa.size() * info->words, 0);
  for (const Core& core : topology.cores) {
    const std::size_t base = static_cast<std::size_t>(core.numa) * info->words;
    info->numa_masks[base + static_cast<std::size_t>(core.id) / 64] |=
        std::uint64_t{1} << (static_cast<unsigned>(core.id) % 64);
  }
  info->gpus_per_numa.assign(topology.numa.size(), 0);
  for (const Gpu& gpu : topology.gpus) {
    if (gpu.numa >= 0) info->gpus_per_numa[static_cast<std::size_t>(gpu.numa)]++;
  }
  info->topology = std::move(topology);

  NodeState node;
  node.rank_ = rank;
  node.schedulable_ = schedulable;
  node.exclusive_.assign(info->words, 0);
  node.reserved_.assign(info->words, 0);
  node.taken_.assign(info->words, 0);
  node.closed_.assign(info->words, 0);
  node.gpu_used_.assign(words_for(info->topology.gpus.size()), 0);
  node.numa_free_.assign(info->topology.numa.size(), 0);
  for (const Core& core : info->topology.cores) {
    node.numa_free_[static_cast<std::size_t>(core.numa)]++;
  }
  node.free_cores_ = info->topology.num_cores();
  node.free_gpus_ = info->topology.num_gpus();
  node.static_ = std::move(info);
  auto pos = std::lower_bound(nodes_.begin(), nodes_.end(), rank,
                              [](const NodeState& n, Rank r) { return n.rank_ < r; });
  const bool at_end = pos == nodes_.end();
  nodes_.insert(pos, std::move(node));
  // Nodes are mostly added in rank order: one leaf, unless the tree is full
  // or the new node shifts the others.
  if (at_end && nodes_.size() <= leaves_) {
    leaf_value_.push_back(0);
    note_node(nodes_.size() - 1);
  } else {
    rebuild_index();
  }
  return Status::ok();
}

bool NodePool::remove_node(Rank rank) {
  auto pos = std::lower_bound(nodes_.begin(), nodes_.end(), rank,
                              [](const NodeState& n, Rank r) { return n.rank_ < r; });
  if (pos == nodes_.end() || pos->rank_ != rank) return false;
  nodes_.erase(pos);
  rebuild_index();
  return true;
}

bool NodePool::set_schedulable(Rank rank, bool schedulable) {
  NodeState* node = find_mutable(rank);
  if (node == nullptr) return false;
  node->schedulable_ = schedulable;
  note_node(static_cast<std::size_t>(node - nodes_.data()));
  return true;
}

Status NodePool::reserve_cores(Rank rank, const std::vector<int>& cores) {
  NodeState* node = find_mutable(rank);
  if (node == nullptr) return not_found("rank " + std::to_string(rank) + " is not in the pool");
  for (int core : cores) {
    if (core < 0 || core >= node->total_cores()) {
      return invalid_argument(where(*node) + ": reserved core " + std::to_string(core) +
                              " does not exist (" + std::to_string(node->total_cores()) +
                              " cores)");
    }
    if (!test_bit(node->reserved_, core) && test_bit(node->taken_, core)) {
      return failed_precondition(where(*node) + ": core " + std::to_string(core) +
                                 " cannot be reserved: it is in use");
    }
  }
  Words wanted(node->reserved_.size(), 0);
  for (int core : cores) put_bit(wanted, core, true);
  for (int c = 0; c < node->total_cores(); ++c) {
    if (test_bit(wanted, c) == test_bit(node->reserved_, c)) continue;
    put_bit(node->reserved_, c, test_bit(wanted, c));
    refresh_core(*node, c);
  }
  node->reserved_count_ = 0;
  for (std::uint64_t w : node->reserved_) node->reserved_count_ += std::popcount(w);
  note_node(static_cast<std::size_t>(node - nodes_.data()));
  return Status::ok();
}

Status NodePool::set_gres(Rank rank, const std::map<std::string, int>& gres) {
  NodeState* node = find_mutable(rank);
  if (node == nullptr) return not_found("rank " + std::to_string(rank) + " is not in the pool");
  std::vector<int> used;
  for (const auto& [name, count] : gres) {
    const int in_use =
        node->gres().contains(name) ? node->gres().at(name) - node->free_gres(name) : 0;
    if (count < 0) {
      return invalid_argument(where(*node) + ": gres " + name + " count " + std::to_string(count));
    }
    if (count < in_use) {
      return failed_precondition(where(*node) + ": gres " + name + " set to " +
                                 std::to_string(count) + ", " + std::to_string(in_use) + " in use");
    }
    used.push_back(in_use);
  }
  for (const auto& [name, total] : node->gres()) {
    if (!gres.contains(name) && node->free_gres(name) < total) {
      return failed_precondition(where(*node) + ": gres " + name + " removed while in use");
    }
  }
  auto info = std::make_shared<NodeState::Static>(*node->static_);
  info->gres = gres;
  node->static_ = std::move(info);
  node->gres_used_ = std::move(used);
  return Status::ok();
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
    std::fill(node.exclusive_.begin(), node.exclusive_.end(), 0);
    node.taken_ = node.reserved_;
    node.closed_ = node.reserved_;
    node.sharers_.clear();
    std::fill(node.gpu_used_.begin(), node.gpu_used_.end(), 0);
    const NodeTopology& topo = node.topology();
    std::fill(node.numa_free_.begin(), node.numa_free_.end(), 0);
    for (const Core& core : topo.cores) {
      if (!test_bit(node.reserved_, core.id)) {
        node.numa_free_[static_cast<std::size_t>(core.numa)]++;
      }
    }
    node.free_cores_ = node.total_cores() - node.reserved_count_;
    node.free_gpus_ = node.total_gpus();
    std::fill(node.gres_used_.begin(), node.gres_used_.end(), 0);
    node.used_memory_ = 0;
  }
  copy.rebuild_index();
  return copy;
}

void NodePool::note_node(std::size_t index) {
  const NodeState& node = nodes_[index];
  const int value = node.schedulable_ ? node.free_cores_ : 0;
  free_total_ += value - leaf_value_[index];
  leaf_value_[index] = value;
  std::size_t at = leaves_ + index;
  max_free_[at] = value;
  for (at /= 2; at >= 1; at /= 2) {
    const int top = std::max(max_free_[2 * at], max_free_[2 * at + 1]);
    if (max_free_[at] == top) break;  // the ancestors above are unchanged too
    max_free_[at] = top;
  }
}

void NodePool::rebuild_index() {
  leaves_ = 1;
  while (leaves_ < nodes_.size()) leaves_ *= 2;
  max_free_.assign(2 * leaves_, 0);
  leaf_value_.assign(nodes_.size(), 0);
  free_total_ = 0;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const NodeState& node = nodes_[i];
    leaf_value_[i] = node.schedulable_ ? node.free_cores_ : 0;
    max_free_[leaves_ + i] = leaf_value_[i];
    free_total_ += leaf_value_[i];
  }
  for (std::size_t at = leaves_; at-- > 1;) {
    max_free_[at] = std::max(max_free_[2 * at], max_free_[2 * at + 1]);
  }
}

std::size_t NodePool::find_free(std::size_t tree_node, std::size_t lo, std::size_t hi,
                                std::size_t from, std::int64_t cores) const {
  if (hi <= from || max_free_[tree_node] < cores) return nodes_.size();
  if (hi - lo == 1) return lo;
  const std::size_t mid = lo + (hi - lo) / 2;
  const std::size_t left = find_free(2 * tree_node, lo, mid, from, cores);
  if (left != nodes_.size()) return left;
  return find_free(2 * tree_node + 1, mid, hi, from, cores);
}

std::size_t NodePool::next_with_free_cores(std::size_t from, std::int64_t cores) const {
  if (from >= nodes_.size() || nodes_.empty()) return nodes_.size();
  // A node with no free cores still answers a request for none.
  if (cores <= 0 || leaf_value_[from] >= cores) return from;
  // A walk over consecutive nodes asks with from = the last answer + 1:
  // the common case (that node qualifies) costs no descent.
  return find_free(1, 0, leaves_, from, cores);
}

Status NodePool::check(const Allocation& allocation, bool taking) const {
  // A rank may appear in several parts: count its cores, GPUs and memory
  // together.
  struct Seen {
    Rank rank;
    Words cores;
    Words gpus;
    std::uint64_t memory;
    std::map<std::string, int> gres;
  };
  std::vector<Seen> seen;
  const bool shared = allocation.shared;
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
      seen.push_back(
          {part.rank, Words(node->taken_.size(), 0), Words(node->gpu_used_.size(), 0), 0, {}});
      s = seen.end() - 1;
    }
    for (int core : part.cores) {
      if (core < 0 || core >= node->total_cores()) {
        return invalid_argument(where(*node) + ": core " + std::to_string(core) +
                                " does not exist (" + std::to_string(node->total_cores()) +
                                " cores)");
      }
      if (test_bit(s->cores, core)) {
        return invalid_argument(where(*node) + ": core " + std::to_string(core) +
                                " is listed twice in the allocation");
      }
      put_bit(s->cores, core, true);
      // Built only for an error: a message per core made every allocation
      // of a wide job cost a string allocation per core.
      const auto what = [&] { return where(*node) + ": core " + std::to_string(core); };
      if (taking && test_bit(node->reserved_, core)) {
        return failed_precondition(what() + " is reserved for the system");
      }
      if (taking && !shared && test_bit(node->taken_, core)) {
        return failed_precondition(what() + " is already in use");
      }
      if (taking && shared && test_bit(node->closed_, core)) {
        return failed_precondition(what() + " cannot be shared (in exclusive use or shared by " +
                                   std::to_string(kMaxSharers) + " jobs)");
      }
      if (!taking && !shared && !test_bit(node->exclusive_, core)) {
        return failed_precondition(what() + " is not in use");
      }
      if (!taking && shared && node->sharers(core) == 0) {
        return failed_precondition(what() + " is not in shared use");
      }
    }
    for (int gpu : part.gpus) {
      if (gpu < 0 || gpu >= node->total_gpus()) {
        return invalid_argument(where(*node) + ": GPU " + std::to_string(gpu) +
                                " does not exist (" + std::to_string(node->total_gpus()) +
                                " GPUs)");
      }
      if (test_bit(s->gpus, gpu)) {
        return invalid_argument(where(*node) + ": GPU " + std::to_string(gpu) +
                                " is listed twice in the allocation");
      }
      put_bit(s->gpus, gpu, true);
      if (taking == test_bit(node->gpu_used_, gpu)) {
        return failed_precondition(where(*node) + ": GPU " + std::to_string(gpu) +
                                   (taking ? " is already in use" : " is not in use"));
      }
    }
    for (const auto& [name, count] : part.gres) {
      const auto total = node->gres().find(name);
      if (total == node->gres().end() || count < 0) {
        return invalid_argument(where(*node) + ": no gres " + name);
      }
      const int sum = s->gres[name] += count;
      const int free = node->free_gres(name);
      if (taking && sum > free) {
        return failed_precondition(where(*node) + ": " + std::to_string(sum) + " of gres " + name +
                                   " asked, " + std::to_string(free) + " free");
      }
      if (!taking && sum > total->second - free) {
        return failed_precondition(where(*node) + ": releasing " + std::to_string(sum) +
                                   " of gres " + name + ", " +
                                   std::to_string(total->second - free) + " in use");
      }
    }
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
    if (allocation.shared && node.sharers_.empty()) {
      node.sharers_.assign(static_cast<std::size_t>(node.total_cores()), 0);
    }
    for (int core : part.cores) {
      if (allocation.shared) {
        auto& count = node.sharers_[static_cast<std::size_t>(core)];
        count = static_cast<std::uint8_t>(taking ? count + 1 : count - 1);
      } else {
        put_bit(node.exclusive_, core, taking);
      }
      refresh_core(node, core);
    }
    for (int gpu : part.gpus) {
      put_bit(node.gpu_used_, gpu, taking);
      node.free_gpus_ += taking ? -1 : 1;
    }
    for (const auto& [name, count] : part.gres) {
      const auto at =
          static_cast<std::size_t>(std::distance(node.gres().begin(), node.gres().find(name)));
      node.gres_used_[at] += taking ? count : -count;
    }
    if (taking) {
      node.used_memory_ += part.memory_bytes;
    } else {
      node.used_memory_ -= part.memory_bytes;
    }
    note_node(static_cast<std::size_t>(&node - nodes_.data()));
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

std::vector<int> spec_cores(const NodeTopology& topology, int count) {
  // Per package, its cores from the highest id down.
  std::vector<std::vector<int>> by_package(
      static_cast<std::size_t>(std::max(1, topology.packages)));
  for (auto it = topology.cores.rbegin(); it != topology.cores.rend(); ++it) {
    const auto p =
        std::min(static_cast<std::size_t>(std::max(0, it->package)), by_package.size() - 1);
    by_package[p].push_back(it->id);
  }
  std::vector<int> out;
  std::vector<std::size_t> next(by_package.size(), 0);
  const auto want = static_cast<std::size_t>(std::max(0, count));
  while (out.size() < want && out.size() < topology.cores.size()) {
    for (std::size_t p = by_package.size(); p-- > 0 && out.size() < want;) {
      if (next[p] < by_package[p].size()) out.push_back(by_package[p][next[p]++]);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hpcq::resource
