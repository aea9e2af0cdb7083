#include "daemon/job_entry.h"

namespace hpcq::daemon {

resource::Allocation part_on(const resource::Allocation& allocation, Rank rank) {
  resource::Allocation part = allocation;  // its layout fields, `shared` above all
  part.nodes.clear();
  for (const auto& a : allocation.nodes) {
    if (a.rank == rank) part.nodes.push_back(a);
  }
  return part;
}

resource::Allocation without_cores(resource::Allocation allocation) {
  for (resource::NodeAllocation& part : allocation.nodes) part.cores.clear();
  return allocation;
}

}  // namespace hpcq::daemon
