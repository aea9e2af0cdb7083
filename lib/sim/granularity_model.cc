#include "lib/sim/granularity_model.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "lib/sim/simulator.h"

namespace hpcq::sim {
namespace {

constexpr MpiClass kClasses[] = {MpiClass::kDgemm, MpiClass::kStream, MpiClass::kFft,
                                 MpiClass::kRrb, MpiClass::kMinife};

}  // namespace

std::string_view mpi_class_name(MpiClass c) {
  switch (c) {
    case MpiClass::kDgemm: return "dgemm";
    case MpiClass::kStream: return "stream";
    case MpiClass::kFft: return "fft";
    case MpiClass::kRrb: return "rrb";
    case MpiClass::kMinife: return "minife";
  }
  return "dgemm";
}

std::optional<MpiClass> parse_mpi_class(std::string_view word) {
  for (MpiClass c : kClasses) {
    if (word == mpi_class_name(c)) return c;
  }
  return std::nullopt;
}

resource::Profile class_profile(MpiClass c) {
  switch (c) {
    case MpiClass::kStream: return resource::Profile::kMemory;
    case MpiClass::kFft:
    case MpiClass::kRrb: return resource::Profile::kNetwork;
    case MpiClass::kDgemm:
    case MpiClass::kMinife: return resource::Profile::kCpu;
  }
  return resource::Profile::kCpu;
}

double class_memory_weight(MpiClass c) {
  switch (c) {
    case MpiClass::kStream: return 1.0;
    case MpiClass::kMinife: return 0.5;
    case MpiClass::kFft: return 0.2;
    case MpiClass::kDgemm: return 0.1;
    case MpiClass::kRrb: return 0.0;
  }
  return 0.0;
}

GranularityModel::GranularityModel(std::span<const SimJob> jobs, resource::NodeTopology node,
                                   bool pinned)
    : node_(std::move(node)), pinned_(pinned) {
  for (const SimJob& job : jobs) {
    if (std::optional<MpiClass> c = parse_mpi_class(job.mpi_class)) classes_[job.id] = *c;
  }
}

void GranularityModel::add_load(std::map<std::pair<Rank, int>, double>& load,
                                const resource::Allocation& allocation, double weight) const {
  if (weight <= 0) return;
  const int packages = std::max(1, node_.packages);
  for (const resource::NodeAllocation& part : allocation.nodes) {
    const int per_task = std::max(1, allocation.cpus_per_task);
    if (!pinned_) {
      // Floating ranks spread their demand over the node's sockets.
      const double share = weight * part.ntasks / packages;
      for (int p = 0; p < packages; ++p) load[{part.rank, p}] += share;
      continue;
    }
    for (std::size_t i = 0; i < part.cores.size(); ++i) {
      const int core = part.cores[i];
      int package = 0;
      if (core >= 0 && static_cast<std::size_t>(core) < node_.cores.size()) {
        package = node_.cores[static_cast<std::size_t>(core)].package;
      }
      load[{part.rank, package}] += weight / per_task;
    }
  }
}

GranularityModel::Factors GranularityModel::factors(
    MpiClass c, const resource::Allocation& allocation,
    std::span<const sched::RunningJob> running) const {
  Factors f;
  const resource::Profile profile = class_profile(c);
  if (!pinned_) {
    f.unpinned = profile == resource::Profile::kCpu       ? 1.28
                 : profile == resource::Profile::kNetwork ? 1.10
                                                          : 1.00;
  } else if (profile != resource::Profile::kNetwork) {
    std::size_t workers = 0;
    std::size_t widest = 0;
    for (const resource::NodeAllocation& part : allocation.nodes) {
      workers += part.workers.size();
      for (const resource::WorkerPlacement& w : part.workers) {
        widest = std::max(widest, w.ranks.size());
      }
    }
    if (workers > 1) f.split = widest <= 1 ? 0.85 : 0.95;
  }
  const double weight = class_memory_weight(c);
  if (weight > 0) {
    std::map<std::pair<Rank, int>, double> load;
    add_load(load, allocation, weight);
    for (const sched::RunningJob& r : running) {
      const auto it = classes_.find(r.id);
      if (it != classes_.end()) add_load(load, r.allocation, class_memory_weight(it->second));
    }
    // The sockets this job's ranks are on (all of a node's when unpinned).
    std::map<std::pair<Rank, int>, double> mine;
    add_load(mine, allocation, 1.0);
    double worst = 0;
    for (const auto& entry : mine) worst = std::max(worst, load[entry.first]);
    f.memory = 1.0 + weight * std::max(0.0, worst / kSocketBandwidthRanks - 1.0);
  }
  const auto nodes = static_cast<int>(allocation.nodes.size());
  if (profile == resource::Profile::kNetwork && nodes > 1) f.network = 1.0 + 2.0 * (nodes - 1);
  return f;
}

std::int64_t GranularityModel::runtime_s(const SimJob& job, const resource::Allocation& allocation,
                                         std::span<const sched::RunningJob> running) const {
  const auto it = classes_.find(job.id);
  if (it == classes_.end()) return job.runtime_s;
  const Factors f = factors(it->second, allocation, running);
  const double t = static_cast<double>(job.runtime_s) * f.unpinned * f.split * f.memory * f.network;
  return std::max<std::int64_t>(1, std::llround(t));
}

}  // namespace hpcq::sim
