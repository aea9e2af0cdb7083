#include "lib/resource/allocator.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

namespace hpcq::resource {
namespace {

// Up to this many NUMA domains per node, every subset is weighed (2^10
// subsets); above it the domains are taken greedily by size.
constexpr int kMaxEnumeratedDomains = 10;

struct Pick {
  std::size_t candidate;  // index into the candidate list
  int tasks;
};

int distinct_packages(const NodeTopology& topo, const std::vector<int>& domains) {
  std::vector<int> packages;
  for (int d : domains) packages.push_back(topo.numa[static_cast<std::size_t>(d)].package);
  std::sort(packages.begin(), packages.end());
  return static_cast<int>(std::unique(packages.begin(), packages.end()) - packages.begin());
}

std::vector<int> mask_domains(std::uint32_t mask) {
  std::vector<int> ids;
  for (int d = 0; mask != 0; ++d, mask >>= 1) {
    if ((mask & 1U) != 0) ids.push_back(d);
  }
  return ids;
}

// The NUMA domains to use for `need` units, where a domain holds cap[d]
// units: fewest domains, then fewest packages, then lowest ids. Empty when
// even all domains do not hold `need`.
std::vector<int> choose_domains(const NodeTopology& topo, const std::vector<int>& cap, int need) {
  const int ndomains = static_cast<int>(cap.size());
  long long total = 0;
  for (int c : cap) total += c;
  if (total < need) return {};
  if (ndomains <= kMaxEnumeratedDomains) {
    std::uint32_t best = 0;
    int best_count = ndomains + 1;
    int best_packages = 0;
    for (std::uint32_t mask = 1; mask < (1U << ndomains); ++mask) {
      const int count = std::popcount(mask);
      if (count > best_count) continue;
      long long sum = 0;
      for (int d = 0; d < ndomains; ++d) {
        if ((mask >> d) & 1U) sum += cap[static_cast<std::size_t>(d)];
      }
      if (sum < need) continue;
      const int packages = distinct_packages(topo, mask_domains(mask));
      bool better = count < best_count || (count == best_count && packages < best_packages);
      if (!better && count == best_count && packages == best_packages) {
        // Same size and spread: the set holding the lowest id where they differ.
        const std::uint32_t diff = mask ^ best;
        better = (mask & (diff & (~diff + 1))) != 0;
      }
      if (better) {
        best = mask;
        best_count = count;
        best_packages = packages;
      }
    }
    return mask_domains(best);
  }
  std::vector<int> order(cap.size());
  for (std::size_t d = 0; d < order.size(); ++d) order[d] = static_cast<int>(d);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return cap[static_cast<std::size_t>(a)] > cap[static_cast<std::size_t>(b)];
  });
  std::vector<int> chosen;
  long long sum = 0;
  for (int d : order) {
    if (sum >= need) break;
    chosen.push_back(d);
    sum += cap[static_cast<std::size_t>(d)];
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

// Cores for `tasks` tasks of `cpt` cores on a node known to have room.
NodeAllocation place_on_node(const NodeState& node, int tasks, int cpt, std::uint64_t memory) {
  const NodeTopology& topo = node.topology();
  const std::size_t ndomains = topo.numa.size();
  std::vector<std::vector<int>> free_by_domain(ndomains);
  for (const Core& core : topo.cores) {
    if (node.core_free(core.id))
      free_by_domain[static_cast<std::size_t>(core.numa)].push_back(core.id);
  }
  std::vector<int> whole(ndomains);
  std::vector<int> raw(ndomains);
  for (std::size_t d = 0; d < ndomains; ++d) {
    raw[d] = static_cast<int>(free_by_domain[d].size());
    whole[d] = raw[d] / cpt;
  }
  std::vector<int> domains = choose_domains(topo, whole, tasks);
  if (domains.empty()) domains = choose_domains(topo, raw, tasks * cpt);
  // Package order, so that a task that must span domains stays in a package.
  std::stable_sort(domains.begin(), domains.end(), [&](int a, int b) {
    return topo.numa[static_cast<std::size_t>(a)].package <
           topo.numa[static_cast<std::size_t>(b)].package;
  });

  NodeAllocation out;
  out.rank = node.rank();
  out.node = node.name();
  out.ntasks = tasks;
  out.memory_bytes = memory;
  out.cores.reserve(static_cast<std::size_t>(tasks * cpt));
  int left = tasks;
  std::vector<std::size_t> next(ndomains, 0);  // first unused free core per domain
  for (int d : domains) {
    const auto di = static_cast<std::size_t>(d);
    const int here = std::min(whole[di], left);
    for (int k = 0; k < here * cpt; ++k) out.cores.push_back(free_by_domain[di][next[di]++]);
    left -= here;
  }
  for (int d : domains) {  // tasks that span domains (best effort)
    const auto di = static_cast<std::size_t>(d);
    while (left > 0 && next[di] < free_by_domain[di].size() &&
           static_cast<int>(out.cores.size()) < tasks * cpt) {
      out.cores.push_back(free_by_domain[di][next[di]++]);
    }
  }
  for (int core : out.cores) out.numa.push_back(topo.cores[static_cast<std::size_t>(core)].numa);
  std::sort(out.numa.begin(), out.numa.end());
  out.numa.erase(std::unique(out.numa.begin(), out.numa.end()), out.numa.end());
  return out;
}

// nodes = N: the earliest N candidates holding `base` tasks, of which at
// least `extra` hold base + 1.
std::vector<Pick> pick_fixed(const std::vector<int>& cap, int nodes, int ntasks) {
  const int base = ntasks / nodes;
  const int extra = ntasks % nodes;
  std::vector<std::size_t> chosen;
  int bigs = 0;
  for (std::size_t i = 0; i < cap.size() && static_cast<int>(chosen.size()) < nodes; ++i) {
    if (cap[i] < base) continue;
    const bool big = cap[i] > base;
    const int slots = nodes - static_cast<int>(chosen.size());
    const int big_needed = std::max(0, extra - bigs);
    if (!big && slots - 1 < big_needed) continue;  // keep room for the nodes with the extras
    chosen.push_back(i);
    if (big) ++bigs;
  }
  if (static_cast<int>(chosen.size()) < nodes || bigs < extra) return {};
  std::vector<Pick> picks;
  int extras_left = extra;
  for (std::size_t i : chosen) {
    int tasks = base;
    if (extras_left > 0 && cap[i] > base) {
      ++tasks;
      --extras_left;
    }
    picks.push_back({i, tasks});
  }
  return picks;
}

// Sum of the `m` largest values counted in `hist` (hist[v] = how many), or
// at least `enough` once reached.
long long top_sum(const std::vector<int>& hist, int m, long long enough) {
  long long sum = 0;
  for (int v = static_cast<int>(hist.size()) - 1; v > 0 && m > 0 && sum < enough; --v) {
    const int take = std::min(m, hist[static_cast<std::size_t>(v)]);
    sum += static_cast<long long>(take) * v;
    m -= take;
  }
  return sum;
}

// nodes = 0: the fewest candidates that hold ntasks, earliest in order.
std::vector<Pick> pick_fewest(const std::vector<int>& cap, int ntasks) {
  int max_cap = 0;
  for (int c : cap) max_cap = std::max(max_cap, std::min(c, ntasks));
  std::vector<int> hist(static_cast<std::size_t>(max_cap) + 1, 0);  // over the unvisited suffix
  for (int c : cap) hist[static_cast<std::size_t>(std::min(c, ntasks))]++;
  int fewest = 0;
  {
    long long sum = 0;
    for (int v = max_cap; v > 0 && sum < ntasks; --v) {
      const int count = hist[static_cast<std::size_t>(v)];
      const long long need = (ntasks - sum + v - 1) / v;
      const int take = static_cast<int>(std::min<long long>(count, need));
      sum += static_cast<long long>(take) * v;
      fewest += take;
    }
    if (sum < ntasks) return {};
  }
  std::vector<Pick> picks;
  int left = ntasks;
  int slots = fewest;
  for (std::size_t i = 0; i < cap.size() && left > 0; ++i) {
    const int c = std::min(cap[i], ntasks);
    if (c == 0) continue;
    hist[static_cast<std::size_t>(c)]--;
    // Take this node only if the rest still fits on the remaining slots.
    if (c + top_sum(hist, slots - 1, left - c) < left) continue;
    const int tasks = std::min(c, left);
    picks.push_back({i, tasks});
    left -= tasks;
    --slots;
  }
  if (left > 0) return {};  // unreachable when `fewest` is right; kept as a guard
  return picks;
}

}  // namespace

Status check_request(const ResourceRequest& request) {
  if (request.ntasks < 1) {
    return invalid_argument("ntasks must be at least 1, not " + std::to_string(request.ntasks));
  }
  if (request.cpus_per_task < 1) {
    return invalid_argument("cpus_per_task must be at least 1, not " +
                            std::to_string(request.cpus_per_task));
  }
  if (request.nodes < 0) {
    return invalid_argument("nodes must not be negative (" + std::to_string(request.nodes) + ")");
  }
  if (request.nodes > request.ntasks) {
    return invalid_argument(std::to_string(request.nodes) + " nodes for " +
                            std::to_string(request.ntasks) +
                            " tasks: every node needs at least one task");
  }
  return Status::ok();
}

int task_capacity(const ResourceRequest& request, const NodeState& node) {
  if (!node.schedulable() || request.cpus_per_task < 1) return 0;
  if (request.mem_per_node_bytes > node.free_memory()) return 0;
  return node.free_cores() / request.cpus_per_task;
}

std::optional<Allocation> find_allocation(const ResourceRequest& request,
                                          std::span<const NodeState* const> candidates) {
  if (!check_request(request).is_ok()) return std::nullopt;
  std::vector<int> cap(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i)
    cap[i] = task_capacity(request, *candidates[i]);
  const std::vector<Pick> picks = request.nodes > 0 ? pick_fixed(cap, request.nodes, request.ntasks)
                                                    : pick_fewest(cap, request.ntasks);
  if (picks.empty()) return std::nullopt;
  Allocation out;
  out.cpus_per_task = request.cpus_per_task;
  int first_task = 0;
  for (const Pick& pick : picks) {
    NodeAllocation part = place_on_node(*candidates[pick.candidate], pick.tasks,
                                        request.cpus_per_task, request.mem_per_node_bytes);
    part.first_task = first_task;
    first_task += pick.tasks;
    out.nodes.push_back(std::move(part));
  }
  return out;
}

std::optional<Allocation> find_allocation(const ResourceRequest& request, const NodePool& pool) {
  std::vector<const NodeState*> candidates;
  candidates.reserve(pool.nodes().size());
  for (const NodeState& node : pool.nodes()) candidates.push_back(&node);
  return find_allocation(request, candidates);
}

}  // namespace hpcq::resource
