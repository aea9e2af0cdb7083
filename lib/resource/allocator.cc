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

// The free cores of each NUMA domain a request may take, in the order it
// takes them (free before shared for an oversubscribing request).
std::vector<std::vector<int>> usable_cores(const NodeState& node, bool shared) {
  const std::size_t ndomains = node.topology().numa.size();
  std::vector<std::vector<int>> out(ndomains);
  const std::span<const std::uint64_t> blocked = node.blocked(shared);
  const std::span<const std::uint64_t> taken = node.blocked(false);
  for (std::size_t d = 0; d < ndomains; ++d) {
    const std::span<const std::uint64_t> mask = node.numa_mask(static_cast<int>(d));
    for (int pass = 0; pass < (shared ? 2 : 1); ++pass) {
      for (std::size_t w = 0; w < mask.size(); ++w) {
        std::uint64_t bits = mask[w] & ~blocked[w];
        if (shared) bits &= pass == 0 ? ~taken[w] : taken[w];
        while (bits != 0) {
          out[d].push_back(static_cast<int>(w * 64) + std::countr_zero(bits));
          bits &= bits - 1;
        }
      }
    }
  }
  return out;
}

// Free GPUs per NUMA domain (ascending ids), and those with no known domain.
struct FreeGpus {
  std::vector<std::vector<int>> by_domain;
  std::vector<int> unplaced;
};

FreeGpus free_gpus(const NodeState& node) {
  FreeGpus out;
  out.by_domain.resize(node.topology().numa.size());
  for (const Gpu& gpu : node.topology().gpus) {
    if (!node.gpu_free(gpu.id)) continue;
    if (gpu.numa >= 0) {
      out.by_domain[static_cast<std::size_t>(gpu.numa)].push_back(gpu.id);
    } else {
      out.unplaced.push_back(gpu.id);
    }
  }
  return out;
}

// Takes the free GPU nearest `domain`: same domain, then same package, then
// any known domain (lowest id), then one with no known domain. -1 when none.
int take_nearest_gpu(const NodeTopology& topo, FreeGpus& gpus, int domain) {
  auto take_from = [&](std::vector<int>& list) {
    const int id = list.front();
    list.erase(list.begin());
    return id;
  };
  if (domain >= 0 && !gpus.by_domain[static_cast<std::size_t>(domain)].empty()) {
    return take_from(gpus.by_domain[static_cast<std::size_t>(domain)]);
  }
  const int package = domain >= 0 ? topo.numa[static_cast<std::size_t>(domain)].package : -1;
  for (std::size_t d = 0; d < gpus.by_domain.size(); ++d) {
    if (topo.numa[d].package == package && !gpus.by_domain[d].empty()) {
      return take_from(gpus.by_domain[d]);
    }
  }
  for (auto& list : gpus.by_domain) {
    if (!list.empty()) return take_from(list);
  }
  if (!gpus.unplaced.empty()) return take_from(gpus.unplaced);
  return -1;
}

// Cores (and GPUs) for `tasks` tasks on a node that task_capacity() says
// holds them.
NodeAllocation place_on_node(const NodeState& node, int tasks, const ResourceRequest& request) {
  const NodeTopology& topo = node.topology();
  const int cpt = request.cpus_per_task;
  const int gpt = request.gpus_per_task;
  const std::size_t ndomains = topo.numa.size();
  std::vector<std::vector<int>> cores = usable_cores(node, request.oversubscribe);
  FreeGpus gpus = free_gpus(node);

  NodeAllocation out;
  out.rank = node.rank();
  out.node = node.name();
  out.ntasks = tasks;
  out.cores.reserve(static_cast<std::size_t>(tasks * cpt));

  if (request.numa_policy == NumaPolicy::kNone) {
    // Lowest ids first, whatever their domain.
    std::vector<int> all;
    for (const auto& list : cores) all.insert(all.end(), list.begin(), list.end());
    std::sort(all.begin(), all.end());
    out.cores.assign(all.begin(), all.begin() + tasks * cpt);
    for (int j = 0; j < tasks * gpt; ++j) {
      const int core = out.cores[static_cast<std::size_t>((j / gpt) * cpt)];
      out.gpus.push_back(
          take_nearest_gpu(topo, gpus, topo.cores[static_cast<std::size_t>(core)].numa));
    }
    const int first_domain = topo.cores[static_cast<std::size_t>(out.cores.front())].numa;
    for (int j = 0; j < request.gpus_per_node; ++j) {
      out.gpus.push_back(take_nearest_gpu(topo, gpus, first_domain));
    }
    std::sort(out.gpus.begin() + static_cast<std::ptrdiff_t>(tasks * gpt), out.gpus.end());
  } else {
    std::vector<int> whole(ndomains);
    std::vector<int> raw(ndomains);
    std::vector<int> local(ndomains);  // tasks whose cores and GPUs fit in the domain
    for (std::size_t d = 0; d < ndomains; ++d) {
      raw[d] = static_cast<int>(cores[d].size());
      whole[d] = raw[d] / cpt;
      local[d] =
          gpt > 0 ? std::min(whole[d], static_cast<int>(gpus.by_domain[d].size()) / gpt) : whole[d];
    }
    // gpus_per_node: GPUs from the fewest domains; cores near them when they fit.
    if (request.gpus_per_node > 0) {
      std::vector<int> gcount(ndomains);
      for (std::size_t d = 0; d < ndomains; ++d) {
        gcount[d] = static_cast<int>(gpus.by_domain[d].size());
      }
      std::vector<int> gdomains = choose_domains(topo, gcount, request.gpus_per_node);
      if (gdomains.empty()) {  // GPUs of unknown locality make up the count
        for (std::size_t d = 0; d < ndomains; ++d) gdomains.push_back(static_cast<int>(d));
      }
      std::vector<int> near(ndomains, 0);
      for (int d : gdomains) {
        auto& list = gpus.by_domain[static_cast<std::size_t>(d)];
        while (!list.empty() && static_cast<int>(out.gpus.size()) < request.gpus_per_node) {
          out.gpus.push_back(list.front());
          list.erase(list.begin());
        }
        near[static_cast<std::size_t>(d)] = whole[static_cast<std::size_t>(d)];
      }
      while (static_cast<int>(out.gpus.size()) < request.gpus_per_node) {
        out.gpus.push_back(take_nearest_gpu(topo, gpus, -1));
      }
      std::sort(out.gpus.begin(), out.gpus.end());
      if (!choose_domains(topo, near, tasks).empty()) local = near;
    }
    std::vector<int> limit = local;
    std::vector<int> domains = choose_domains(topo, local, tasks);
    bool gpus_local = gpt > 0 && !domains.empty();
    if (domains.empty()) {
      limit = whole;
      domains = choose_domains(topo, whole, tasks);
    }
    if (domains.empty()) {  // best effort: tasks span domains
      domains = choose_domains(topo, raw, tasks * cpt);
    }
    // Package order, so that a task that must span domains stays in a package.
    std::stable_sort(domains.begin(), domains.end(), [&](int a, int b) {
      return topo.numa[static_cast<std::size_t>(a)].package <
             topo.numa[static_cast<std::size_t>(b)].package;
    });
    // Which domain each whole task goes to.
    std::vector<int> task_domain;
    std::vector<int> room(ndomains, 0);
    for (int d : domains) room[static_cast<std::size_t>(d)] = limit[static_cast<std::size_t>(d)];
    if (request.core_distribution == Distribution::kCyclic) {
      bool progress = true;
      while (static_cast<int>(task_domain.size()) < tasks && progress) {
        progress = false;
        for (int d : domains) {
          auto& r = room[static_cast<std::size_t>(d)];
          if (r > 0 && static_cast<int>(task_domain.size()) < tasks) {
            task_domain.push_back(d);
            --r;
            progress = true;
          }
        }
      }
    } else {
      for (int d : domains) {
        auto& r = room[static_cast<std::size_t>(d)];
        while (r > 0 && static_cast<int>(task_domain.size()) < tasks) {
          task_domain.push_back(d);
          --r;
        }
      }
    }
    std::vector<std::size_t> next(ndomains, 0);  // first unused core per domain
    for (int d : task_domain) {
      const auto di = static_cast<std::size_t>(d);
      for (int k = 0; k < cpt; ++k) out.cores.push_back(cores[di][next[di]++]);
      if (gpus_local) {
        for (int k = 0; k < gpt; ++k) {
          out.gpus.push_back(gpus.by_domain[di].front());
          gpus.by_domain[di].erase(gpus.by_domain[di].begin());
        }
      }
    }
    for (int d : domains) {  // tasks that span domains (best effort)
      const auto di = static_cast<std::size_t>(d);
      while (next[di] < cores[di].size() && static_cast<int>(out.cores.size()) < tasks * cpt) {
        out.cores.push_back(cores[di][next[di]++]);
      }
    }
    if (gpt > 0 && !gpus_local) {
      for (int t = 0; t < tasks; ++t) {
        const int core = out.cores[static_cast<std::size_t>(t * cpt)];
        for (int k = 0; k < gpt; ++k) {
          out.gpus.push_back(
              take_nearest_gpu(topo, gpus, topo.cores[static_cast<std::size_t>(core)].numa));
        }
      }
    }
  }
  if (request.exclusive) {
    // The whole node (an idle one): the cores no task got follow the tasks'
    // (the job's, bound to no task), then the GPUs no task got.
    std::vector<char> given(static_cast<std::size_t>(node.total_cores()), 0);
    for (int core : out.cores) given[static_cast<std::size_t>(core)] = 1;
    for (int core = 0; core < node.total_cores(); ++core) {
      if (given[static_cast<std::size_t>(core)] == 0 && node.core_free(core)) {
        out.cores.push_back(core);
      }
    }
    std::vector<char> held(static_cast<std::size_t>(node.total_gpus()), 0);
    for (int gpu : out.gpus) held[static_cast<std::size_t>(gpu)] = 1;
    for (int gpu = 0; gpu < node.total_gpus(); ++gpu) {
      if (held[static_cast<std::size_t>(gpu)] == 0 && node.gpu_free(gpu)) out.gpus.push_back(gpu);
    }
    if (gpt == 0) std::sort(out.gpus.begin(), out.gpus.end());
  }
  // The domains in use, ascending: marked per core rather than sorting a
  // list as long as the job's cores.
  std::vector<char> in_use(ndomains, 0);
  for (int core : out.cores) {
    in_use[static_cast<std::size_t>(topo.cores[static_cast<std::size_t>(core)].numa)] = 1;
  }
  for (std::size_t d = 0; d < ndomains; ++d) {
    if (in_use[d] != 0) out.numa.push_back(static_cast<int>(d));
  }
  out.memory_bytes = request.mem_per_cpu_bytes > 0
                         ? request.mem_per_cpu_bytes * static_cast<std::uint64_t>(tasks * cpt)
                         : request.mem_per_node_bytes;
  out.gres = request.gres;
  if (request.exclusive) {
    out.memory_bytes = node.free_memory();
    out.gres.clear();
    for (const auto& [name, units] : node.gres()) {
      if (units > 0) out.gres.emplace(name, units);
    }
  }
  return out;
}

// The most cores each of `tasks` tasks of an --exclusive request can have
// on this idle node with its placement rules kept (its NUMA policy, its
// GPUs per task): at least its cpus_per_task, which task_capacity() found
// room for. Memory does not bound it: the job holds all of the node's.
int widest_share(const ResourceRequest& request, const NodeState& node, int tasks) {
  ResourceRequest wider = request;
  wider.mem_per_node_bytes = 0;
  wider.mem_per_cpu_bytes = 0;
  int lo = request.cpus_per_task;
  int hi = std::max(lo, node.free_cores() / std::max(tasks, 1));
  // task_capacity() only falls as the share grows: the largest that fits.
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    wider.cpus_per_task = mid;
    if (task_capacity(wider, node) >= tasks) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// nodes = N: the earliest N candidates holding `base` tasks, of which at
// least `extra` hold base + 1. cap(i) is asked only for the candidates
// visited, so a job that fits early stops early.
// `next(i)` is the first candidate at or after i that may hold `base` tasks
// (i itself, or later when an index shows the ones between cannot).
template <typename CapFn, typename NextFn>
std::vector<Pick> pick_fixed(std::size_t ncandidates, CapFn cap_of, NextFn next, int nodes,
                             int ntasks) {
  const int base = ntasks / nodes;
  const int extra = ntasks % nodes;
  std::vector<std::pair<std::size_t, int>> chosen;  // candidate, capacity
  int bigs = 0;
  for (std::size_t i = next(0); i < ncandidates && static_cast<int>(chosen.size()) < nodes;
       i = next(i + 1)) {
    const int cap = cap_of(i);
    if (cap < base || cap == 0) continue;
    const bool big = cap > base;
    const int slots = nodes - static_cast<int>(chosen.size());
    const int big_needed = std::max(0, extra - bigs);
    if (!big && slots - 1 < big_needed) continue;  // keep room for the nodes with the extras
    chosen.emplace_back(i, cap);
    if (big) ++bigs;
  }
  if (static_cast<int>(chosen.size()) < nodes || bigs < extra) return {};
  std::vector<Pick> picks;
  int extras_left = extra;
  for (const auto& [i, cap] : chosen) {
    int tasks = base;
    if (extras_left > 0 && cap > base) {
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
  if (request.gpus_per_node < 0 || request.gpus_per_task < 0) {
    return invalid_argument("GPU counts must not be negative (gpus_per_node " +
                            std::to_string(request.gpus_per_node) + ", gpus_per_task " +
                            std::to_string(request.gpus_per_task) + ")");
  }
  if (request.gpus_per_node > 0 && request.gpus_per_task > 0) {
    return invalid_argument("ask for GPUs per node or per task, not both");
  }
  if (request.mem_per_node_bytes > 0 && request.mem_per_cpu_bytes > 0) {
    return invalid_argument("ask for memory per node or per CPU, not both");
  }
  for (const auto& [name, count] : request.gres) {
    if (count < 1) return invalid_argument("gres " + name + ": count must be >= 1");
  }
  if (request.exclusive && request.oversubscribe) {
    return invalid_argument("ask for whole nodes (exclusive) or shared cores, not both");
  }
  return Status::ok();
}

int task_capacity(const ResourceRequest& request, const NodeState& node) {
  if (!node.schedulable() || request.cpus_per_task < 1) return 0;
  // Whole nodes only: nothing of this one may be in use, by anyone.
  if (request.exclusive && (request.oversubscribe || !node.idle())) return 0;
  if (request.mem_per_node_bytes > node.free_memory()) return 0;
  if (request.gpus_per_node > node.free_gpus()) return 0;
  for (const auto& [name, count] : request.gres) {
    if (node.free_gres(name) < count) return 0;
  }
  const int cpt = request.cpus_per_task;
  const int gpt = request.gpus_per_task;
  int cap = 0;
  if (request.numa_policy == NumaPolicy::kSingleNumaNode) {
    const int ndomains = static_cast<int>(node.topology().numa.size());
    for (int d = 0; d < ndomains; ++d) {
      const int avail =
          request.oversubscribe ? node.shareable_cores_in_numa(d) : node.free_cores_in_numa(d);
      int here = avail / cpt;
      if (gpt > 0) here = std::min(here, node.free_gpus_in_numa(d) / gpt);
      cap += here;
    }
  } else {
    const int avail = request.oversubscribe ? node.shareable_cores() : node.free_cores();
    cap = avail / cpt;
    if (gpt > 0) cap = std::min(cap, node.free_gpus() / gpt);
  }
  if (request.mem_per_cpu_bytes > 0) {
    const std::uint64_t per_task = request.mem_per_cpu_bytes * static_cast<std::uint64_t>(cpt);
    cap = static_cast<int>(
        std::min<std::uint64_t>(static_cast<std::uint64_t>(cap), node.free_memory() / per_task));
  }
  return cap;
}

namespace {

// The search over candidates given by index; `node(i)` is candidate i, and
// `next(i, cores)` the first candidate at or after i that may have `cores`
// free for the request (i itself when nothing tells; an index may skip
// candidates whose task_capacity() is then surely below what is asked).
template <typename NodeFn, typename NextFn>
std::optional<Allocation> find_in(const ResourceRequest& request, std::size_t ncandidates,
                                  NodeFn node, NextFn next) {
  if (!check_request(request).is_ok()) return std::nullopt;
  const auto cpt = static_cast<std::int64_t>(request.cpus_per_task);
  std::vector<Pick> picks;
  if (request.nodes > 0) {
    // A node holding fewer than max(base, 1) tasks is passed over.
    const std::int64_t least = std::max(request.ntasks / request.nodes, 1) * cpt;
    picks = pick_fixed(
        ncandidates, [&](std::size_t i) { return task_capacity(request, node(i)); },
        [&](std::size_t i) { return next(i, least); }, request.nodes, request.ntasks);
  } else {
    // Most jobs fit on one node: the earliest that holds them all is the
    // answer pick_fewest would give, found without weighing the rest.
    const std::int64_t whole = static_cast<std::int64_t>(request.ntasks) * cpt;
    for (std::size_t i = next(0, whole); i < ncandidates; i = next(i + 1, whole)) {
      if (task_capacity(request, node(i)) >= request.ntasks) {
        picks.push_back({i, request.ntasks});
        break;
      }
    }
    if (picks.empty()) {
      // Only nodes with room for a task count towards several; the rest
      // stay 0, as task_capacity() would say.
      std::vector<int> cap(ncandidates, 0);
      for (std::size_t i = next(0, cpt); i < ncandidates; i = next(i + 1, cpt)) {
        cap[i] = task_capacity(request, node(i));
      }
      picks = pick_fewest(cap, request.ntasks);
    }
  }
  if (picks.empty()) return std::nullopt;
  // Whole nodes: every task gets an even share of its node's cores, the
  // same on all nodes (one cpus_per_task lays out the allocation), as
  // Slurm's `srun --whole` steps (lib/job/steps.cc) do.
  ResourceRequest layout = request;
  if (request.exclusive) {
    for (std::size_t i = 0; i < picks.size(); ++i) {
      const int share = widest_share(request, node(picks[i].candidate), picks[i].tasks);
      layout.cpus_per_task = i == 0 ? share : std::min(layout.cpus_per_task, share);
    }
  }
  Allocation out;
  out.cpus_per_task = layout.cpus_per_task;
  out.shared = request.oversubscribe;
  out.gpus_per_task = request.gpus_per_task;
  out.node_distribution = request.node_distribution;
  out.cpu_bind = request.cpu_bind;
  out.nodes.reserve(picks.size());
  for (const Pick& pick : picks)
    out.nodes.push_back(place_on_node(node(pick.candidate), pick.tasks, layout));
  int first = 0;
  for (std::size_t i = 0; i < out.nodes.size(); ++i) {
    if (request.node_distribution == Distribution::kCyclic) {
      out.nodes[i].first_task = static_cast<int>(i);  // round 0 deals one task to each node
    } else {
      out.nodes[i].first_task = first;
      first += out.nodes[i].ntasks;
    }
  }
  return out;
}

}  // namespace

std::optional<Allocation> find_allocation(const ResourceRequest& request,
                                          std::span<const NodeState* const> candidates) {
  return find_in(
      request, candidates.size(), [&](std::size_t i) -> const NodeState& { return *candidates[i]; },
      [](std::size_t i, std::int64_t) { return i; });
}

std::optional<Allocation> find_allocation(const ResourceRequest& request, const NodePool& pool) {
  const std::vector<NodeState>& nodes = pool.nodes();
  const auto node = [&](std::size_t i) -> const NodeState& { return nodes[i]; };
  // An oversubscribing request may use shared cores, which the pool's
  // free-core index does not count: it looks at every node.
  if (request.oversubscribe) {
    return find_in(request, nodes.size(), node, [](std::size_t i, std::int64_t) { return i; });
  }
  // Fewer free cores in the whole pool than the tasks need: no node set
  // holds them (a node holds at most free / cpus_per_task tasks).
  if (static_cast<std::int64_t>(request.ntasks) * request.cpus_per_task > pool.total_free_cores()) {
    return std::nullopt;
  }
  return find_in(request, nodes.size(), node, [&](std::size_t i, std::int64_t cores) {
    return pool.next_with_free_cores(i, cores);
  });
}

std::vector<int> task_ranks(const Allocation& allocation, std::size_t node_index) {
  std::vector<int> out;
  if (node_index >= allocation.nodes.size()) return out;
  const NodeAllocation& part = allocation.nodes[node_index];
  if (allocation.node_distribution == Distribution::kBlock) {
    for (int j = 0; j < part.ntasks; ++j) out.push_back(part.first_task + j);
    return out;
  }
  // Cyclic: round r gives the next rank to each node that still has a task.
  int rank = 0;
  for (int round = 0; round < part.ntasks; ++round) {
    for (std::size_t k = 0; k < allocation.nodes.size(); ++k) {
      if (allocation.nodes[k].ntasks <= round) continue;
      if (k == node_index) out.push_back(rank);
      ++rank;
    }
  }
  return out;
}

std::vector<TaskPlacement> task_layout(const Allocation& allocation, std::size_t node_index,
                                       const NodeTopology& topology) {
  std::vector<TaskPlacement> out;
  if (node_index >= allocation.nodes.size()) return out;
  const NodeAllocation& part = allocation.nodes[node_index];
  const std::vector<int> ranks = task_ranks(allocation, node_index);
  auto cpt = static_cast<std::size_t>(std::max(1, allocation.cpus_per_task));
  // A part too small for its tasks' share (a smaller node added to an
  // --exclusive elastic job, whose share was its first nodes') deals its
  // cores out evenly rather than leave its last tasks none.
  if (!ranks.empty() && part.cores.size() >= ranks.size() &&
      part.cores.size() < ranks.size() * cpt) {
    cpt = part.cores.size() / ranks.size();
  }
  const auto gpt = static_cast<std::size_t>(std::max(0, allocation.gpus_per_task));
  for (std::size_t j = 0; j < ranks.size(); ++j) {
    TaskPlacement task;
    task.rank = ranks[j];
    for (std::size_t k = j * cpt; k < (j + 1) * cpt && k < part.cores.size(); ++k) {
      const int core = part.cores[k];
      if (core < 0 || core >= topology.num_cores()) continue;
      task.cores.push_back(core);
      const Core& c = topology.cores[static_cast<std::size_t>(core)];
      task.numa.push_back(c.numa);
      if (allocation.cpu_bind == CpuBind::kCores) {
        task.cpus.insert(task.cpus.end(), c.pus.begin(), c.pus.end());
      } else if (allocation.cpu_bind == CpuBind::kThreads && !c.pus.empty()) {
        task.cpus.push_back(c.pus.front());
      }
    }
    std::sort(task.numa.begin(), task.numa.end());
    task.numa.erase(std::unique(task.numa.begin(), task.numa.end()), task.numa.end());
    std::sort(task.cpus.begin(), task.cpus.end());
    for (std::size_t k = j * gpt; k < (j + 1) * gpt && k < part.gpus.size(); ++k) {
      if (part.gpus[k] >= 0 && part.gpus[k] < topology.num_gpus())
        task.gpus.push_back(part.gpus[k]);
    }
    out.push_back(std::move(task));
  }
  return out;
}

}  // namespace hpcq::resource
