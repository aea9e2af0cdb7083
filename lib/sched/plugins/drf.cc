#include "lib/sched/plugins/drf.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <string>
#include <vector>

namespace hpcq::sched {
namespace {

struct CycleState {
  std::unordered_map<std::uint32_t, double> by_user;
  const PendingJob* first = nullptr;  // snapshot.queue's storage
  std::vector<double> share;          // by index in snapshot.queue

  double of(const PendingJob& job) const {
    const std::less<const PendingJob*> less;
    if (first != nullptr && !less(&job, first) && less(&job, first + share.size())) {
      return share[static_cast<std::size_t>(&job - first)];
    }
    const auto it = by_user.find(job.uid);
    return it == by_user.end() ? 0.0 : it->second;
  }
};

}  // namespace

DrfResources drf_job_use(const RunningJob& job) {
  DrfResources use;
  const auto& nodes = job.allocation.nodes;
  for (const auto& part : nodes) {
    use.cores += static_cast<double>(part.cores.size());
    use.memory_bytes += static_cast<double>(part.memory_bytes);
    use.gpus += static_cast<double>(part.gpus.size());
  }
  const double node_count = static_cast<double>(!nodes.empty() ? static_cast<int>(nodes.size())
                                                               : std::max(1, job.request.nodes));
  if (use.cores == 0) {
    use.cores = static_cast<double>(job.request.ntasks) * job.request.cpus_per_task;
  }
  if (use.memory_bytes == 0) {
    use.memory_bytes = static_cast<double>(job.request.mem_per_node_bytes) * node_count;
  }
  if (use.gpus == 0) {
    use.gpus = static_cast<double>(job.request.gpus_per_node) * node_count +
               static_cast<double>(job.request.gpus_per_task) * job.request.ntasks;
  }
  return use;
}

std::unordered_map<std::uint32_t, double> drf_dominant_shares(const Snapshot& snapshot,
                                                              std::int64_t total_gpus) {
  DrfResources total;
  if (snapshot.pool != nullptr) {
    for (const auto& node : snapshot.pool->nodes()) {
      total.cores += node.total_cores();
      total.memory_bytes += static_cast<double>(node.topology().memory_bytes);
      total.gpus += node.total_gpus();
    }
  }
  std::unordered_map<std::uint32_t, DrfResources> used;
  double gpus_in_use = 0;
  for (const RunningJob& job : snapshot.running) {
    const DrfResources use = drf_job_use(job);
    DrfResources& u = used[job.uid];
    u.cores += use.cores;
    u.memory_bytes += use.memory_bytes;
    u.gpus += use.gpus;
    gpus_in_use += use.gpus;
  }
  if (total_gpus > 0) {
    total.gpus = static_cast<double>(total_gpus);
  } else if (total.gpus == 0) {
    total.gpus = gpus_in_use;
  }
  const auto part = [](double x, double of) { return of > 0 ? x / of : 0.0; };
  std::unordered_map<std::uint32_t, double> shares;
  shares.reserve(used.size());
  for (const auto& [uid, u] : used) {
    shares[uid] = std::max({part(u.cores, total.cores), part(u.memory_bytes, total.memory_bytes),
                            part(u.gpus, total.gpus)});
  }
  return shares;
}

Result<std::unique_ptr<Plugin>> DrfPlugin::create(const PluginOptions& options) {
  std::int64_t total_gpus = 0;
  for (const auto& [name, value] : options) {
    if (name != "total_gpus") {
      return invalid_argument("unknown scheduler option 'drf." + name + "' (known: total_gpus)");
    }
    const char* last = value.data() + value.size();
    const auto [end, error] = std::from_chars(value.data(), last, total_gpus);
    if (value.empty() || error != std::errc() || end != last || total_gpus < 0) {
      return invalid_argument("scheduler option 'drf.total_gpus': '" + value +
                              "' is not a non-negative integer");
    }
  }
  return std::unique_ptr<Plugin>(std::make_unique<DrfPlugin>(total_gpus));
}

void DrfPlugin::on_session_open(Session& session) {
  const Snapshot& snapshot = session.snapshot();
  auto state = std::make_shared<CycleState>();
  state->by_user = drf_dominant_shares(snapshot, total_gpus_);
  state->first = snapshot.queue.data();
  state->share.reserve(snapshot.queue.size());
  for (const PendingJob& job : snapshot.queue) {
    const auto it = state->by_user.find(job.uid);
    state->share.push_back(it == state->by_user.end() ? 0.0 : it->second);
  }
  session.add_job_order(std::string(kName),
                        [state = std::shared_ptr<const CycleState>(std::move(state))](
                            const PendingJob& a, const PendingJob& b) {
                          const double sa = state->of(a);
                          const double sb = state->of(b);
                          if (sa != sb) return sa < sb ? -1 : 1;
                          return 0;
                        });
}

}  // namespace hpcq::sched
