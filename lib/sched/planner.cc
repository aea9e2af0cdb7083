#include "lib/sched/planner.h"

#include <algorithm>

#include "lib/resource/allocator.h"

namespace hpcq::sched {

Planner::Planner(const resource::NodePool& pool, TimeUs now) : now_(now) {
  nodes_.reserve(pool.nodes().size());
  for (const resource::NodeState& state : pool.nodes()) {
    Node node;
    node.rank = state.rank();
    node.schedulable = state.schedulable();
    node.free_cores = state.free_cores();
    node.free_memory = state.free_memory();
    if (node.schedulable) free_now_ += node.free_cores;
    nodes_.push_back(std::move(node));
  }
}

Planner::Node* Planner::find(Rank rank) {
  return const_cast<Node*>(static_cast<const Planner*>(this)->find(rank));
}

const Planner::Node* Planner::find(Rank rank) const {
  auto it = std::lower_bound(nodes_.begin(), nodes_.end(), rank,
                             [](const Node& n, Rank r) { return n.rank < r; });
  return it != nodes_.end() && it->rank == rank ? &*it : nullptr;
}

void Planner::add_change(Node& node, TimeUs time, int cores, std::int64_t memory) {
  auto at = std::upper_bound(node.changes.begin(), node.changes.end(), time,
                             [](TimeUs t, const Change& c) { return t < c.time; });
  node.changes.insert(at, Change{time, cores, memory});
  if (node.schedulable) {
    aggregate_.emplace_back(time, cores);
    settled_ = false;
  }
}

void Planner::settle() const {
  if (settled_) return;
  std::stable_sort(aggregate_.begin(), aggregate_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::size_t out = 0;
  for (std::size_t i = 0; i < aggregate_.size(); ++i) {
    if (out > 0 && aggregate_[out - 1].first == aggregate_[i].first) {
      aggregate_[out - 1].second += aggregate_[i].second;
    } else {
      aggregate_[out++] = aggregate_[i];
    }
  }
  aggregate_.resize(out);
  settled_ = true;
}

void Planner::add_release(const resource::Allocation& allocation, TimeUs end) {
  if (end == kForever) return;
  if (end <= now_) end = add_time(now_, kOverdueGrace);
  for (const resource::NodeAllocation& part : allocation.nodes) {
    Node* node = find(part.rank);
    if (node == nullptr) continue;  // a node removed since: nothing to give back
    add_change(*node, end, static_cast<int>(part.cores.size()),
               static_cast<std::int64_t>(part.memory_bytes));
  }
}

void Planner::start(const resource::Allocation& allocation, TimeUs end) {
  for (const resource::NodeAllocation& part : allocation.nodes) {
    Node* node = find(part.rank);
    if (node == nullptr) continue;
    const int cores = static_cast<int>(part.cores.size());
    node->free_cores -= cores;
    node->free_memory -= std::min(node->free_memory, part.memory_bytes);
    if (node->schedulable) free_now_ -= cores;
  }
  add_release(allocation, end);
}

void Planner::reserve(std::span<const NodeShare> shares, TimeUs start, TimeUs end) {
  for (const NodeShare& share : shares) {
    Node* node = find(share.rank);
    if (node == nullptr) continue;
    const auto memory = static_cast<std::int64_t>(share.memory_bytes);
    add_change(*node, start, -share.cores, -memory);
    if (end != kForever) add_change(*node, end, share.cores, memory);
    if (!node->reserved) {
      node->reserved = true;
      reserved_.push_back(static_cast<std::size_t>(node - nodes_.data()));
    }
  }
}

NodeShare Planner::window_min(const Node& node, TimeUs start, TimeUs end) const {
  std::int64_t cores = node.free_cores;
  auto memory = static_cast<std::int64_t>(node.free_memory);
  std::size_t i = 0;
  // Changes at `start` count: a job ending then frees its cores for us.
  for (; i < node.changes.size() && node.changes[i].time <= start; ++i) {
    cores += node.changes[i].cores;
    memory += node.changes[i].memory;
  }
  std::int64_t min_cores = cores;
  std::int64_t min_memory = memory;
  for (; i < node.changes.size() && node.changes[i].time < end; ++i) {
    cores += node.changes[i].cores;
    memory += node.changes[i].memory;
    min_cores = std::min(min_cores, cores);
    min_memory = std::min(min_memory, memory);
  }
  return {node.rank, static_cast<int>(std::max<std::int64_t>(min_cores, 0)),
          static_cast<std::uint64_t>(std::max<std::int64_t>(min_memory, 0))};
}

std::optional<NodeShare> Planner::min_free(Rank rank, TimeUs start, TimeUs end) const {
  const Node* node = find(rank);
  if (node == nullptr) return std::nullopt;
  return window_min(*node, start, end);
}

std::vector<NodeShare> Planner::limits(TimeUs end) const {
  std::vector<NodeShare> out;
  for (std::size_t index : reserved_) {
    const Node& node = nodes_[index];
    const NodeShare least = window_min(node, now_, end);
    if (least.cores < node.free_cores || least.memory_bytes < node.free_memory) {
      out.push_back(least);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const NodeShare& a, const NodeShare& b) { return a.rank < b.rank; });
  return out;
}

int Planner::capacity(const Node& node, const resource::ResourceRequest& request, TimeUs start,
                      TimeUs end) const {
  const NodeShare least = window_min(node, start, end);
  if (request.mem_per_node_bytes > least.memory_bytes) return 0;
  return least.cores / request.cpus_per_task;
}

std::vector<NodeShare> Planner::pick(const resource::ResourceRequest& request, TimeUs start,
                                     TimeUs end, const std::vector<std::size_t>& order) const {
  const auto share = [&](std::size_t index, int tasks) {
    return NodeShare{nodes_[index].rank, tasks * request.cpus_per_task, request.mem_per_node_bytes};
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
      const std::size_t index = order[pos];
      const int cap = capacity(nodes_[index], request, start, end);
      if (cap >= base + 1 && big < extra) {
        out.push_back(share(index, base + 1));
        ++big;
      } else if (cap >= base && small < request.nodes - extra) {
        out.push_back(share(index, base));
        ++small;
      }
      if (big + small == request.nodes) return out;
    }
    return {};
  }
  // As few nodes as possible: one node if any holds every task (the first
  // in preference order), else the roomiest nodes.
  std::vector<std::pair<int, std::size_t>> caps;  // (capacity, position in order)
  caps.reserve(order.size());
  std::int64_t total = 0;
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    const int cap = capacity(nodes_[order[pos]], request, start, end);
    if (cap >= request.ntasks) return {share(order[pos], request.ntasks)};
    if (cap > 0) caps.emplace_back(cap, pos);
    total += cap;
  }
  if (total < request.ntasks) return {};
  std::stable_sort(caps.begin(), caps.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::size_t count = 0;
  for (int covered = 0; covered < request.ntasks; ++count) covered += caps[count].first;
  caps.resize(count);
  std::sort(caps.begin(), caps.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  int left = request.ntasks;
  for (const auto& [cap, pos] : caps) {
    const int tasks = std::min(cap, left);
    out.push_back(share(order[pos], tasks));
    left -= tasks;
  }
  return out;
}

std::optional<Slot> Planner::earliest(
    const resource::ResourceRequest& request, TimeUs duration,
    std::span<const resource::NodeState* const> candidates) const {
  if (!resource::check_request(request).is_ok()) return std::nullopt;
  std::vector<std::size_t> order;
  order.reserve(candidates.size());
  for (const resource::NodeState* state : candidates) {
    const Node* node = find(state->rank());
    if (node != nullptr && node->schedulable) {
      order.push_back(static_cast<std::size_t>(node - nodes_.data()));
    }
  }
  if (order.size() < static_cast<std::size_t>(std::max(request.nodes, 1))) return std::nullopt;
  settle();

  // Candidate starts: now and every time the profile changes. times[i] and
  // free[i]: the aggregate free cores from times[i] until times[i + 1].
  std::vector<TimeUs> times{now_};
  std::vector<std::int64_t> free{free_now_};
  for (const auto& [time, delta] : aggregate_) {
    if (time <= now_) {
      free[0] += delta;
    } else {
      times.push_back(time);
      free.push_back(free.back() + delta);
    }
  }
  const std::int64_t need =
      static_cast<std::int64_t>(request.ntasks) * static_cast<std::int64_t>(request.cpus_per_task);
  // dip[i]: the first j > i where the aggregate falls below `need`, so that
  // a window starting at times[i] passes the bound iff it ends by times[j].
  const std::size_t m = times.size();
  std::vector<std::size_t> dip(m, m);
  for (std::size_t i = m - 1; i > 0; --i) dip[i - 1] = free[i] < need ? i : dip[i];

  // A gang cannot start before its N-th node first has room for its share
  // (each node's first time with base tasks' worth free, ignoring later
  // dips): one O(N + E) pass that skips the candidate times at which the
  // aggregate has room but too few nodes do, which would each cost a scan.
  TimeUs not_before = now_;
  if (request.nodes > 0) {
    const int base = request.ntasks / request.nodes;
    const std::int64_t cores = static_cast<std::int64_t>(base) * request.cpus_per_task;
    const auto memory = static_cast<std::int64_t>(request.mem_per_node_bytes);
    std::vector<TimeUs> ready;
    ready.reserve(order.size());
    for (std::size_t index : order) {
      const Node& node = nodes_[index];
      std::int64_t c = node.free_cores;
      auto mem = static_cast<std::int64_t>(node.free_memory);
      TimeUs when = kForever;
      if (c >= cores && mem >= memory) when = now_;
      for (std::size_t k = 0; when == kForever && k < node.changes.size(); ++k) {
        c += node.changes[k].cores;
        mem += node.changes[k].memory;
        const bool last_at_time =
            k + 1 == node.changes.size() || node.changes[k + 1].time != node.changes[k].time;
        if (last_at_time && c >= cores && mem >= memory)
          when = std::max(now_, node.changes[k].time);
      }
      ready.push_back(when);
    }
    const auto nth = ready.begin() + (request.nodes - 1);
    std::nth_element(ready.begin(), nth, ready.end());
    not_before = *nth;
    if (not_before == kForever) return std::nullopt;
  }

  for (std::size_t i = 0; i < m; ++i) {
    if (free[i] < need || times[i] < not_before) continue;
    const TimeUs end = add_time(times[i], duration);
    if (dip[i] < m && times[dip[i]] < end) continue;
    std::vector<NodeShare> where = pick(request, times[i], end, order);
    if (!where.empty()) return Slot{times[i], std::move(where)};
  }
  return std::nullopt;
}

}  // namespace hpcq::sched
