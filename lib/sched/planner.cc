#include "lib/sched/planner.h"

#include <algorithm>

#include "lib/resource/allocator.h"

namespace hpcq::sched {
namespace {

// Ranks are dense in practice (1..N); a direct table is used while it stays
// within this factor of the node count.
constexpr std::size_t kDenseFactor = 4;
// Above any sum of changes: the least of none.
constexpr std::int64_t kNoLeast = std::numeric_limits<std::int64_t>::max();

bool admitted_to(std::span<const std::size_t> admitted, std::size_t id) {
  return std::binary_search(admitted.begin(), admitted.end(), id);
}

}  // namespace

Planner::Planner(const resource::NodePool& pool, TimeUs now) : now_(now) {
  nodes_.reserve(pool.nodes().size());
  Rank max_rank = 0;
  for (const resource::NodeState& state : pool.nodes()) {
    Node node;
    node.rank = state.rank();
    node.schedulable = state.schedulable();
    node.free_cores = state.free_cores();
    node.free_memory = state.free_memory();
    node.gpus.free = state.free_gpus();
    node.gres.reserve(state.gres().size());
    for (const auto& entry : state.gres()) {
      Gres& gres = node.gres.emplace_back();
      gres.name = entry.first;
      gres.total = entry.second;
      gres.track.free = state.free_gres(entry.first);
    }
    node.whole_cores = state.total_cores() - state.reserved_cores();
    node.whole_memory = state.topology().memory_bytes;
    node.whole_gpus = state.total_gpus();
    if (node.schedulable) free_now_ += node.free_cores;
    max_rank = std::max(max_rank, node.rank);
    nodes_.push_back(std::move(node));
  }
  if (static_cast<std::size_t>(max_rank) <= kDenseFactor * nodes_.size() + 64) {
    index_.assign(static_cast<std::size_t>(max_rank) + 1, -1);
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      index_[nodes_[i].rank] = static_cast<std::int32_t>(i);
    }
  }
}

Planner::Node* Planner::find(Rank rank) {
  return const_cast<Node*>(static_cast<const Planner*>(this)->find(rank));
}

const Planner::Node* Planner::find(Rank rank) const {
  if (!index_.empty()) {
    if (static_cast<std::size_t>(rank) >= index_.size() || index_[rank] < 0) return nullptr;
    return &nodes_[static_cast<std::size_t>(index_[rank])];
  }
  auto it = std::lower_bound(nodes_.begin(), nodes_.end(), rank,
                             [](const Node& n, Rank r) { return n.rank < r; });
  return it != nodes_.end() && it->rank == rank ? &*it : nullptr;
}

const Planner::Track* Planner::find_gres(const Node& node, const std::string& name) {
  // By name, as the pool's map: a few names at most per node.
  auto it = std::lower_bound(node.gres.begin(), node.gres.end(), name,
                             [](const Gres& g, const std::string& n) { return g.name < n; });
  return it != node.gres.end() && it->name == name ? &it->track : nullptr;
}

Planner::Track* Planner::find_gres(Node& node, const std::string& name) {
  return const_cast<Track*>(find_gres(static_cast<const Node&>(node), name));
}

void Planner::add_change(Node& node, TimeUs time, int sign, int cores, std::uint64_t memory,
                         int gpus, const std::map<std::string, int>& gres) {
  // Appended unsorted and folded in by settle() before the next query: the
  // profile of a cycle gets one change per running job, and a sorted insert
  // with its sums and minima redone each time cost O(e) per change, O(e^2)
  // per cycle on a node running e jobs.
  const auto index = static_cast<std::size_t>(&node - nodes_.data());
  if (node.settled == node.changes.size()) unsettled_.push_back(index);
  node.changes.push_back(Change{time, sign * cores, sign * static_cast<std::int64_t>(memory)});
  if (node.schedulable) {
    fresh_.push_back(Event{time, static_cast<std::uint32_t>(index), sign * cores});
  }
  // Tracks get a step only when their amount moves; the Change above (same
  // node, same time) is what the sweep sees of it.
  if (gpus != 0) node.gpus.steps.push_back(Step{time, sign * gpus});
  for (const auto& [name, units] : gres) {
    Track* track = find_gres(node, name);
    // A name the node does not have: nothing of it to give or take.
    if (track != nullptr && units != 0) track->steps.push_back(Step{time, sign * units});
  }
}

void Planner::settle_node(const Node& node) {
  std::vector<Change>& changes = node.changes;
  if (node.settled == changes.size()) return;
  // A step comes with a change of the node, so a settled node has settled
  // tracks.
  settle_track(node.gpus);
  for (const Gres& gres : node.gres) settle_track(gres.track);
  const auto by_time = [](const Change& a, const Change& b) { return a.time < b.time; };
  const auto old_end = changes.begin() + static_cast<std::ptrdiff_t>(node.settled);
  // Stable throughout, so equal times keep insertion order (as one sorted
  // insert after another would).
  std::stable_sort(old_end, changes.end(), by_time);
  const TimeUs earliest_new = old_end->time;
  // The first change whose sums move: where the earliest new one lands.
  const auto pos = static_cast<std::size_t>(
      std::upper_bound(changes.begin(), old_end, earliest_new,
                       [](TimeUs t, const Change& c) { return t < c.time; }) -
      changes.begin());
  std::inplace_merge(changes.begin(), old_end, changes.end(), by_time);
  node.settled = changes.size();
  for (std::size_t i = pos; i < changes.size(); ++i) {
    changes[i].cores_sum = (i > 0 ? changes[i - 1].cores_sum : 0) + changes[i].cores;
    changes[i].memory_sum = (i > 0 ? changes[i - 1].memory_sum : 0) + changes[i].memory;
  }
  for (std::size_t i = changes.size(); i-- > 0;) {
    // Only the amount after the last change at a time counts: a job ending
    // when a reservation starts hands its cores straight over, whatever
    // order the two came in.
    std::int64_t cores_least = kNoLeast;
    std::int64_t memory_least = kNoLeast;
    if (i + 1 < changes.size()) {
      cores_least = changes[i + 1].cores_least;
      memory_least = changes[i + 1].memory_least;
    }
    if (i + 1 == changes.size() || changes[i + 1].time != changes[i].time) {
      cores_least = std::min(cores_least, changes[i].cores_sum);
      memory_least = std::min(memory_least, changes[i].memory_sum);
    }
    // Before `pos` the least only changes while the new sums undercut it.
    if (i < pos && cores_least == changes[i].cores_least &&
        memory_least == changes[i].memory_least) {
      break;
    }
    changes[i].cores_least = cores_least;
    changes[i].memory_least = memory_least;
  }
}

void Planner::settle_track(const Track& track) {
  std::vector<Step>& steps = track.steps;
  if (track.settled == steps.size()) return;
  // settle_node() for one amount; see there.
  const auto by_time = [](const Step& a, const Step& b) { return a.time < b.time; };
  const auto old_end = steps.begin() + static_cast<std::ptrdiff_t>(track.settled);
  std::stable_sort(old_end, steps.end(), by_time);
  const TimeUs earliest_new = old_end->time;
  const auto pos = static_cast<std::size_t>(
      std::upper_bound(steps.begin(), old_end, earliest_new,
                       [](TimeUs t, const Step& c) { return t < c.time; }) -
      steps.begin());
  std::inplace_merge(steps.begin(), old_end, steps.end(), by_time);
  track.settled = steps.size();
  for (std::size_t i = pos; i < steps.size(); ++i) {
    steps[i].sum = (i > 0 ? steps[i - 1].sum : 0) + steps[i].amount;
  }
  for (std::size_t i = steps.size(); i-- > 0;) {
    std::int64_t least = i + 1 < steps.size() ? steps[i + 1].least : kNoLeast;
    if (i + 1 == steps.size() || steps[i + 1].time != steps[i].time) {
      least = std::min(least, steps[i].sum);
    }
    if (i < pos && least == steps[i].least) break;
    steps[i].least = least;
  }
}

void Planner::settle() const {
  for (std::size_t index : unsettled_) settle_node(nodes_[index]);
  unsettled_.clear();
  if (fresh_.empty()) return;
  const auto by_time = [](const Event& a, const Event& b) { return a.time < b.time; };
  std::stable_sort(fresh_.begin(), fresh_.end(), by_time);
  const auto old_size = static_cast<std::ptrdiff_t>(events_.size());
  events_.insert(events_.end(), fresh_.begin(), fresh_.end());
  std::inplace_merge(events_.begin(), events_.begin() + old_size, events_.end(), by_time);
  fresh_.clear();
}

void Planner::add_release(const resource::Allocation& allocation, TimeUs end, TimeUs grace) {
  if (end != kForever) end = expected_end(end, now_, grace);
  if (allocation.shared) {
    for (const resource::NodeAllocation& part : allocation.nodes) {
      Node* node = find(part.rank);
      if (node != nullptr) node->shared_until = std::max(node->shared_until, end);
    }
  }
  if (end == kForever) return;
  for (const resource::NodeAllocation& part : allocation.nodes) {
    Node* node = find(part.rank);
    if (node == nullptr) continue;  // a node removed since: nothing to give back
    add_change(*node, end, 1, static_cast<int>(part.cores.size()), part.memory_bytes,
               static_cast<int>(part.gpus.size()), part.gres);
  }
}

void Planner::start(const resource::Allocation& allocation, TimeUs end) {
  for (const resource::NodeAllocation& part : allocation.nodes) {
    Node* node = find(part.rank);
    if (node == nullptr) continue;
    const int cores = static_cast<int>(part.cores.size());
    node->free_cores -= cores;
    node->free_memory -= std::min(node->free_memory, part.memory_bytes);
    node->gpus.free -= std::min(node->gpus.free, static_cast<int>(part.gpus.size()));
    for (const auto& [name, units] : part.gres) {
      Track* track = find_gres(*node, name);
      if (track != nullptr) track->free -= std::min(track->free, units);
    }
    if (node->schedulable) free_now_ -= cores;
  }
  add_release(allocation, end);
}

void Planner::reserve(std::span<const NodeShare> shares, TimeUs start, TimeUs end) {
  for (const NodeShare& share : shares) {
    Node* node = find(share.rank);
    if (node == nullptr) continue;
    add_change(*node, start, -1, share.cores, share.memory_bytes, share.gpus, share.gres);
    if (end != kForever) {
      add_change(*node, end, 1, share.cores, share.memory_bytes, share.gpus, share.gres);
    }
    if (!node->reserved) {
      node->reserved = true;
      reserved_.push_back(static_cast<std::size_t>(node - nodes_.data()));
    }
  }
}

std::size_t Planner::add_block(std::span<const Rank> ranks, TimeUs start, TimeUs end) {
  const std::size_t id = blocks_++;
  if (end <= start || end <= now_) return id;
  for (Rank rank : ranks) {
    Node* node = find(rank);
    if (node == nullptr) continue;
    if (node->blocks.empty())
      block_nodes_.push_back(static_cast<std::size_t>(node - nodes_.data()));
    node->blocks.push_back(Block{start, end, id});
  }
  return id;
}

bool Planner::blocked(const Node& node, TimeUs start, TimeUs end,
                      std::span<const std::size_t> admitted) {
  for (const Block& block : node.blocks) {
    if (block.start < end && block.end > start && !admitted_to(admitted, block.id)) return true;
  }
  return false;
}

Planner::Least Planner::window_min(const Node& node, TimeUs start, TimeUs end) {
  const std::vector<Change>& changes = node.changes;
  // Changes at `start` count: a job ending then frees its cores for us.
  const auto first = static_cast<std::size_t>(
      std::upper_bound(changes.begin(), changes.end(), start,
                       [](TimeUs t, const Change& c) { return t < c.time; }) -
      changes.begin());
  std::int64_t min_cores = first > 0 ? changes[first - 1].cores_sum : 0;
  std::int64_t min_memory = first > 0 ? changes[first - 1].memory_sum : 0;
  if (first < changes.size()) {
    if (changes.back().time < end) {
      min_cores = std::min(min_cores, changes[first].cores_least);
      min_memory = std::min(min_memory, changes[first].memory_least);
    } else {
      for (std::size_t i = first; i < changes.size() && changes[i].time < end; ++i) {
        if (i + 1 < changes.size() && changes[i + 1].time == changes[i].time) continue;
        min_cores = std::min(min_cores, changes[i].cores_sum);
        min_memory = std::min(min_memory, changes[i].memory_sum);
      }
    }
  }
  min_cores += node.free_cores;
  min_memory += static_cast<std::int64_t>(node.free_memory);
  return {static_cast<int>(std::max<std::int64_t>(min_cores, 0)),
          static_cast<std::uint64_t>(std::max<std::int64_t>(min_memory, 0))};
}

int Planner::track_min(const Track& track, TimeUs start, TimeUs end) {
  // window_min() for one amount; see there.
  const std::vector<Step>& steps = track.steps;
  if (steps.empty()) return track.free;
  const auto first = static_cast<std::size_t>(
      std::upper_bound(steps.begin(), steps.end(), start,
                       [](TimeUs t, const Step& c) { return t < c.time; }) -
      steps.begin());
  std::int64_t least = first > 0 ? steps[first - 1].sum : 0;
  if (first < steps.size()) {
    if (steps.back().time < end) {
      least = std::min(least, steps[first].least);
    } else {
      for (std::size_t i = first; i < steps.size() && steps[i].time < end; ++i) {
        if (i + 1 < steps.size() && steps[i + 1].time == steps[i].time) continue;
        least = std::min(least, steps[i].sum);
      }
    }
  }
  return static_cast<int>(std::max<std::int64_t>(least + track.free, 0));
}

NodeShare Planner::least_free(const Node& node, TimeUs start, TimeUs end) {
  const Least cores_memory = window_min(node, start, end);
  NodeShare least{node.rank, cores_memory.cores, cores_memory.memory,
                  track_min(node.gpus, start, end)};
  for (const Gres& gres : node.gres) {
    least.gres.emplace_hint(least.gres.end(), gres.name, track_min(gres.track, start, end));
  }
  return least;
}

bool Planner::below_now(const Node& node, const NodeShare& least) {
  if (least.cores < node.free_cores || least.memory_bytes < node.free_memory ||
      least.gpus < node.gpus.free) {
    return true;
  }
  // least.gres has the node's names in the node's order.
  auto it = least.gres.begin();
  for (const Gres& gres : node.gres) {
    if ((it++)->second < gres.track.free) return true;
  }
  return false;
}

std::optional<NodeShare> Planner::min_free(Rank rank, TimeUs start, TimeUs end) const {
  const Node* node = find(rank);
  if (node == nullptr) return std::nullopt;
  settle_node(*node);
  return least_free(*node, start, end);
}

std::vector<NodeShare> Planner::limits(TimeUs end, std::span<const std::size_t> admitted) const {
  std::vector<NodeShare> out;
  settle();
  const auto by_rank = [](const NodeShare& a, const NodeShare& b) { return a.rank < b.rank; };
  for (std::size_t index : block_nodes_) {
    const Node& node = nodes_[index];
    if (!blocked(node, now_, end, admitted)) continue;
    NodeShare nothing{node.rank};
    for (const Gres& gres : node.gres) nothing.gres.emplace_hint(nothing.gres.end(), gres.name, 0);
    out.push_back(std::move(nothing));
  }
  std::sort(out.begin(), out.end(), by_rank);
  const auto blocked_count = static_cast<std::ptrdiff_t>(out.size());
  for (std::size_t index : reserved_) {
    const Node& node = nodes_[index];
    // A node both reserved and blocked keeps the block's nothing.
    if (std::binary_search(out.begin(), out.begin() + blocked_count, NodeShare{node.rank},
                           by_rank)) {
      continue;
    }
    NodeShare least = least_free(node, now_, end);
    if (below_now(node, least)) out.push_back(std::move(least));
  }
  std::sort(out.begin(), out.end(), by_rank);
  return out;
}

bool Planner::whole_free(const Node& node, TimeUs start, TimeUs end) {
  // A sharer ending at `start` gives the node back for a start then.
  if (node.shared_until > start) return false;
  const Least least = window_min(node, start, end);
  if (least.cores < node.whole_cores || least.memory < node.whole_memory ||
      track_min(node.gpus, start, end) < node.whole_gpus) {
    return false;
  }
  return std::all_of(node.gres.begin(), node.gres.end(), [&](const Gres& gres) {
    return track_min(gres.track, start, end) >= gres.total;
  });
}

int Planner::capacity(const Node& node, const resource::ResourceRequest& request, TimeUs start,
                      TimeUs end, std::span<const std::size_t> admitted) const {
  if (!node.blocks.empty() && blocked(node, start, end, admitted)) return 0;
  if (request.exclusive && (request.oversubscribe || !whole_free(node, start, end))) return 0;
  // Only the dimensions the request asks for are looked at; gres first, as
  // a name the node lacks settles it at once.
  for (const auto& [name, units] : request.gres) {
    const Track* track = find_gres(node, name);
    if (track == nullptr || track_min(*track, start, end) < units) return 0;
  }
  const Least least = window_min(node, start, end);
  if (request.mem_per_node_bytes > least.memory) return 0;
  int cap = least.cores / request.cpus_per_task;
  if (request.gpus_per_node > 0 || request.gpus_per_task > 0) {
    const int gpus = track_min(node.gpus, start, end);
    if (gpus < request.gpus_per_node) return 0;
    if (request.gpus_per_task > 0) cap = std::min(cap, gpus / request.gpus_per_task);
  }
  return cap;
}

std::vector<NodeShare> Planner::pick(const resource::ResourceRequest& request,
                                     const std::vector<std::size_t>& order,
                                     const std::vector<int>& caps) const {
  const auto share = [&](std::size_t index, int tasks) {
    const Node& node = nodes_[index];
    if (request.exclusive) {  // all of the node
      NodeShare whole{node.rank, node.whole_cores, node.whole_memory, node.whole_gpus};
      for (const Gres& gres : node.gres) {
        if (gres.total > 0) whole.gres.emplace_hint(whole.gres.end(), gres.name, gres.total);
      }
      return whole;
    }
    return NodeShare{node.rank, tasks * request.cpus_per_task, request.mem_per_node_bytes,
                     request.gpus_per_node + tasks * request.gpus_per_task, request.gres};
  };
  std::vector<NodeShare> out;
  if (request.nodes > 0) {
    // Even spread; `extra` nodes carry one more task (the allocator's rule).
    const int base = request.ntasks / request.nodes;
    const int extra = request.ntasks % request.nodes;
    int big = 0;
    int small = 0;
    for (std::size_t pos = 0; pos < order.size(); ++pos) {
      // Too few nodes left to make up the rest.
      if (order.size() - pos < static_cast<std::size_t>(request.nodes - big - small)) return {};
      const int cap = caps[pos];
      if (cap >= base + 1 && big < extra) {
        out.push_back(share(order[pos], base + 1));
        ++big;
      } else if (cap >= base && small < request.nodes - extra) {
        out.push_back(share(order[pos], base));
        ++small;
      }
      if (big + small == request.nodes) return out;
    }
    return {};
  }
  // As few nodes as possible: one node if any holds every task (the first
  // in preference order), else the roomiest nodes.
  std::vector<std::pair<int, std::size_t>> room;  // (capacity, position in order)
  std::int64_t total = 0;
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    const int cap = caps[pos];
    if (cap >= request.ntasks) return {share(order[pos], request.ntasks)};
    if (cap > 0) room.emplace_back(cap, pos);
    total += cap;
  }
  if (total < request.ntasks) return {};
  std::stable_sort(room.begin(), room.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::size_t count = 0;
  for (int covered = 0; covered < request.ntasks; ++count) covered += room[count].first;
  room.resize(count);
  std::sort(room.begin(), room.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  int left = request.ntasks;
  for (const auto& [cap, pos] : room) {
    const int tasks = std::min(cap, left);
    out.push_back(share(order[pos], tasks));
    left -= tasks;
  }
  return out;
}

std::optional<Slot> Planner::earliest(const resource::ResourceRequest& request, TimeUs duration,
                                      std::span<const resource::NodeState* const> candidates,
                                      std::span<const std::size_t> admitted) const {
  if (!resource::check_request(request).is_ok()) return std::nullopt;
  // order[pos]: index into nodes_ of the pos-th candidate; where[index]: its
  // pos, or -1 for a node that is not a candidate.
  std::vector<std::size_t> order;
  order.reserve(candidates.size());
  std::vector<std::int32_t> where(nodes_.size(), -1);
  for (const resource::NodeState* state : candidates) {
    const Node* node = find(state->rank());
    if (node == nullptr || !node->schedulable) continue;
    const auto index = static_cast<std::size_t>(node - nodes_.data());
    if (where[index] >= 0) continue;  // named twice
    where[index] = static_cast<std::int32_t>(order.size());
    order.push_back(index);
  }
  if (order.size() < static_cast<std::size_t>(std::max(request.nodes, 1))) return std::nullopt;
  settle();

  const std::int64_t need =
      static_cast<std::int64_t>(request.ntasks) * static_cast<std::int64_t>(request.cpus_per_task);
  // The aggregate bound, streamed: the first time from which the total free
  // cores of schedulable nodes stay at least `need` for `duration`. No start
  // before it can fit, so the sweep begins there.
  TimeUs first = kForever;
  {
    std::int64_t total = free_now_;
    std::size_t i = 0;
    for (; i < events_.size() && events_[i].time <= now_; ++i) total += events_[i].cores;
    TimeUs run = total >= need ? now_ : kForever;  // since when the total has sufficed
    while (i < events_.size()) {
      const TimeUs time = events_[i].time;
      if (run != kForever && add_time(run, duration) <= time) break;
      for (; i < events_.size() && events_[i].time == time; ++i) total += events_[i].cores;
      if (total < need) {
        run = kForever;
      } else if (run == kForever) {
        run = time;
      }
    }
    first = run;
  }

  // Edges of the blocks that stop this job on candidate nodes: a block's
  // start matters once the window's end passes it, its end once the window's
  // start reaches it (the same rules as for changes), and its end is a
  // candidate start.
  struct Edge {
    TimeUs time;
    std::uint32_t node;
  };
  std::vector<Edge> block_starts;
  std::vector<Edge> block_ends;
  for (std::size_t index : block_nodes_) {
    if (where[index] < 0) continue;
    for (const Block& block : nodes_[index].blocks) {
      if (admitted_to(admitted, block.id)) continue;
      block_starts.push_back({block.start, static_cast<std::uint32_t>(index)});
      block_ends.push_back({block.end, static_cast<std::uint32_t>(index)});
    }
  }
  const auto edge_by_time = [](const Edge& a, const Edge& b) { return a.time < b.time; };
  std::sort(block_starts.begin(), block_starts.end(), edge_by_time);
  std::sort(block_ends.begin(), block_ends.end(), edge_by_time);
  // The aggregate ignores blocks: a block's end before `first` may not be a
  // start either, as no start before `first` fits.
  if (first == kForever) return std::nullopt;

  // What the request needs of the candidates' capacities.
  const int base = request.nodes > 0 ? request.ntasks / request.nodes : 0;
  const int extra = request.nodes > 0 ? request.ntasks % request.nodes : 0;
  std::int64_t total = 0;  // nodes = 0: tasks over all candidates
  int roomy = 0;           // nodes = N: candidates with room for base tasks
  int roomier = 0;         // ... and for base + 1
  const auto count = [&](int cap, int sign) {
    if (request.nodes == 0) {
      total += sign * cap;
    } else {
      if (cap >= base) roomy += sign;
      if (cap >= base + 1) roomier += sign;
    }
  };
  const auto enough = [&] {
    return request.nodes == 0 ? total >= request.ntasks
                              : roomy >= request.nodes && roomier >= extra;
  };

  TimeUs t = first;
  TimeUs end = add_time(t, duration);
  std::vector<int> caps(order.size());
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    caps[pos] = capacity(nodes_[order[pos]], request, t, end, admitted);
    count(caps[pos], 1);
  }
  // Sweep cursors: events_[begun..) have not reached the window's start,
  // events_[ended..) not its end; the same for the block edges.
  const auto after = [](const auto& list, TimeUs time) {
    return static_cast<std::size_t>(
        std::upper_bound(list.begin(), list.end(), time,
                         [](TimeUs x, const auto& item) { return x < item.time; }) -
        list.begin());
  };
  const auto from = [](const auto& list, TimeUs time) {
    return static_cast<std::size_t>(
        std::lower_bound(list.begin(), list.end(), time,
                         [](const auto& item, TimeUs x) { return item.time < x; }) -
        list.begin());
  };
  std::size_t begun = after(events_, t);
  std::size_t ended = from(events_, end);
  std::size_t blocks_begun = after(block_ends, t);
  std::size_t blocks_ended = from(block_starts, end);
  std::vector<std::uint32_t> seen(order.size(), 0);
  std::uint32_t step = 0;
  std::vector<std::size_t> touched;
  const auto touch = [&](std::uint32_t index) {
    const std::int32_t pos = where[index];
    if (pos < 0 || seen[static_cast<std::size_t>(pos)] == step) return;
    seen[static_cast<std::size_t>(pos)] = step;
    touched.push_back(static_cast<std::size_t>(pos));
  };

  for (;;) {
    if (enough()) {
      std::vector<NodeShare> chosen = pick(request, order, caps);
      if (!chosen.empty()) return Slot{t, std::move(chosen)};
    }
    // On to the next candidate start (a change or a block's end); every node
    // with a change or block edge passed on the way is recomputed once.
    TimeUs next = kForever;
    if (begun < events_.size()) next = events_[begun].time;
    if (blocks_begun < block_ends.size()) next = std::min(next, block_ends[blocks_begun].time);
    if (next == kForever) return std::nullopt;
    t = next;
    end = add_time(t, duration);
    ++step;
    touched.clear();
    for (; begun < events_.size() && events_[begun].time <= t; ++begun) touch(events_[begun].node);
    for (; ended < events_.size() && events_[ended].time < end; ++ended) touch(events_[ended].node);
    for (; blocks_begun < block_ends.size() && block_ends[blocks_begun].time <= t; ++blocks_begun)
      touch(block_ends[blocks_begun].node);
    for (; blocks_ended < block_starts.size() && block_starts[blocks_ended].time < end;
         ++blocks_ended)
      touch(block_starts[blocks_ended].node);
    for (std::size_t pos : touched) {
      count(caps[pos], -1);
      caps[pos] = capacity(nodes_[order[pos]], request, t, end, admitted);
      count(caps[pos], 1);
    }
  }
}

}  // namespace hpcq::sched
