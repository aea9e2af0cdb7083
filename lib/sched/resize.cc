#include "lib/sched/resize.h"

#include <algorithm>
#include <string>
#include <vector>

namespace hpcq::sched {
namespace {

void renumber(resource::Allocation& allocation) {
  int first = 0;
  for (resource::NodeAllocation& part : allocation.nodes) {
    part.first_task = first;
    first += part.ntasks;
  }
}

bool has_rank(const resource::Allocation& allocation, Rank rank) {
  return std::any_of(allocation.nodes.begin(), allocation.nodes.end(),
                     [rank](const resource::NodeAllocation& p) { return p.rank == rank; });
}

}  // namespace

Result<resource::Allocation> shrunk(const resource::Allocation& allocation,
                                    std::span<const Rank> ranks) {
  std::vector<Rank> sorted(ranks.begin(), ranks.end());
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return invalid_argument("shrink names node rank " +
                            std::to_string(*std::adjacent_find(sorted.begin(), sorted.end())) +
                            " twice");
  }
  for (Rank rank : sorted) {
    if (!has_rank(allocation, rank)) {
      return invalid_argument("shrink takes node rank " + std::to_string(rank) +
                              ", which the job does not have");
    }
  }
  if (sorted.size() >= allocation.nodes.size()) {
    return invalid_argument("shrink would take all " + std::to_string(allocation.nodes.size()) +
                            " nodes of the job");
  }
  resource::Allocation out = allocation;
  std::erase_if(out.nodes, [&](const resource::NodeAllocation& p) {
    return std::binary_search(sorted.begin(), sorted.end(), p.rank);
  });
  renumber(out);
  return out;
}

Result<resource::Allocation> expanded(const resource::Allocation& allocation,
                                      const resource::Allocation& added) {
  if (added.empty()) return invalid_argument("expand adds no node");
  resource::Allocation out = allocation;
  for (const resource::NodeAllocation& part : added.nodes) {
    if (has_rank(out, part.rank)) {
      return invalid_argument("expand adds node rank " + std::to_string(part.rank) +
                              ", which the job already has");
    }
    out.nodes.push_back(part);
  }
  renumber(out);
  return out;
}

resource::Allocation parts_on(const resource::Allocation& allocation, std::span<const Rank> ranks) {
  resource::Allocation out = allocation;
  out.nodes.clear();
  for (const resource::NodeAllocation& part : allocation.nodes) {
    if (std::find(ranks.begin(), ranks.end(), part.rank) != ranks.end()) out.nodes.push_back(part);
  }
  return out;
}

}  // namespace hpcq::sched
