#include "lib/resource/granularity.h"

#include <algorithm>

namespace hpcq::resource {

std::string_view profile_name(Profile profile) {
  switch (profile) {
    case Profile::kCpu: return "cpu";
    case Profile::kMemory: return "memory";
    case Profile::kNetwork: return "network";
  }
  return "cpu";
}

std::optional<Profile> parse_profile(std::string_view word) {
  for (Profile p : {Profile::kCpu, Profile::kMemory, Profile::kNetwork}) {
    if (word == profile_name(p)) return p;
  }
  return std::nullopt;
}

std::string_view policy_name(GranularityPolicy policy) {
  switch (policy) {
    case GranularityPolicy::kScale: return "scale";
    case GranularityPolicy::kGranularity: return "granularity";
    case GranularityPolicy::kNone: return "none";
  }
  return "none";
}

std::optional<GranularityPolicy> parse_policy(std::string_view word) {
  for (GranularityPolicy p :
       {GranularityPolicy::kScale, GranularityPolicy::kGranularity, GranularityPolicy::kNone}) {
    if (word == policy_name(p)) return p;
  }
  return std::nullopt;
}

Result<Granularity> choose_granularity(const GranularityRequest& request) {
  if (request.ranks < 1 || request.nodes_available < 1 || request.cores_per_node < 1 ||
      request.user_workers < 0) {
    return invalid_argument(
        "granularity needs ranks, nodes and cores per node >= 1 and workers "
        ">= 0 (ranks " +
        std::to_string(request.ranks) + ", nodes " + std::to_string(request.nodes_available) +
        ", cores per node " + std::to_string(request.cores_per_node) + ", workers " +
        std::to_string(request.user_workers) + ")");
  }
  const int nt = request.ranks;
  const int needed = (nt + request.cores_per_node - 1) / request.cores_per_node;
  if (needed > request.nodes_available) {
    return failed_precondition(std::to_string(nt) + " ranks need " + std::to_string(needed) +
                               " nodes of " + std::to_string(request.cores_per_node) + " cores; " +
                               std::to_string(request.nodes_available) + " available");
  }
  const bool network = request.profile == Profile::kNetwork;
  Granularity g;
  switch (request.policy) {
    case GranularityPolicy::kScale:
    case GranularityPolicy::kGranularity:
      if (network) {
        g = {1, 1, 1};
      } else {
        g.nodes = std::min(request.nodes_available, nt);
        g.workers = request.policy == GranularityPolicy::kScale ? g.nodes : nt;
      }
      break;
    case GranularityPolicy::kNone:
      g.nodes = 1;
      g.workers = request.user_workers > 0 ? request.user_workers : 1;
      break;
  }
  if (request.user_workers > 0) g.workers = request.user_workers;
  g.workers = std::clamp(g.workers, 1, nt);
  g.nodes = std::max(g.nodes, needed);
  if (network) {
    // Coarse: one worker per node the ranks need, never one rank each.
    g.nodes = needed;
    g.workers = needed;
  } else {
    g.nodes = std::min(g.nodes, std::max(g.workers, needed));
    g.workers = std::max(g.workers, g.nodes);
  }
  g.groups = g.nodes;
  return g;
}

Result<std::vector<Worker>> split_workers(int ranks, const Granularity& g,
                                          std::int64_t total_cpu_millis,
                                          std::uint64_t total_memory_bytes) {
  if (ranks < 1 || g.workers < 1 || g.groups < 1) {
    return invalid_argument("split_workers needs ranks, workers and groups >= 1 (ranks " +
                            std::to_string(ranks) + ", workers " + std::to_string(g.workers) +
                            ", groups " + std::to_string(g.groups) + ")");
  }
  const int nw = std::min(g.workers, ranks);
  std::vector<Worker> workers(static_cast<std::size_t>(nw));
  for (int r = 0; r < ranks; ++r) workers[static_cast<std::size_t>(r % nw)].ranks.push_back(r);
  std::vector<int> load(static_cast<std::size_t>(g.groups), 0);
  for (int i = 0; i < nw; ++i) {
    Worker& w = workers[static_cast<std::size_t>(i)];
    w.id = i;
    const auto slots = static_cast<std::uint64_t>(w.slots());
    w.cpu_millis = total_cpu_millis * w.slots() / ranks;
    w.memory_bytes = total_memory_bytes / static_cast<std::uint64_t>(ranks) * slots +
                     total_memory_bytes % static_cast<std::uint64_t>(ranks) * slots /
                         static_cast<std::uint64_t>(ranks);
    const auto lightest = std::min_element(load.begin(), load.end());
    w.group = static_cast<int>(lightest - load.begin());
    *lightest += w.slots();
  }
  return workers;
}

std::string hostfile(std::span<const Worker> workers, std::span<const std::string> hosts) {
  std::string out;
  for (const Worker& w : workers) {
    const auto id = static_cast<std::size_t>(w.id);
    out += id < hosts.size() ? hosts[id] : "worker-" + std::to_string(w.id);
    out += " slots=" + std::to_string(w.slots()) + "\n";
  }
  return out;
}

}  // namespace hpcq::resource
