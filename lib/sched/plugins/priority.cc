#include "lib/sched/plugins/priority.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace hpcq::sched {
namespace {

constexpr std::string_view kKnown =
    "weight_age, weight_size, weight_fairshare, weight_queue, weight_qos, max_age, favor_small";

Status bad_value(const std::string& name, const std::string& value, std::string_view expected) {
  return invalid_argument("scheduler option 'priority." + name + "': '" + value + "' is not " +
                          std::string(expected));
}

bool parse_weight(const std::string& value, std::uint32_t& out) {
  const char* last = value.data() + value.size();
  const auto [end, error] = std::from_chars(value.data(), last, out);
  return !value.empty() && error == std::errc() && end == last;
}

// Seconds, or a number with s, m, h or d.
bool parse_duration(const std::string& value, std::int64_t& out) {
  if (value.empty()) return false;
  std::int64_t unit = 1;
  std::string digits = value;
  switch (value.back()) {
    case 's':
      unit = 1;
      digits.pop_back();
      break;
    case 'm':
      unit = 60;
      digits.pop_back();
      break;
    case 'h':
      unit = 3600;
      digits.pop_back();
      break;
    case 'd':
      unit = 24 * 3600;
      digits.pop_back();
      break;
    default: break;
  }
  std::int64_t n = 0;
  const char* last = digits.data() + digits.size();
  const auto [end, error] = std::from_chars(digits.data(), last, n);
  if (digits.empty() || error != std::errc() || end != last || n <= 0) return false;
  if (n > std::numeric_limits<std::int64_t>::max() / unit / kUsPerSecond) return false;
  out = n * unit;
  return true;
}

double clamp01(double x) { return std::clamp(x, 0.0, 1.0); }

// One cycle's priorities, shared by the job-order hook (it outlives
// on_session_open and is copied into the Session's hook table).
struct CycleState {
  CycleState(const Snapshot& snapshot, const MultifactorWeights& weights)
      : tree(FairShareTree::compute(snapshot)), calc(snapshot, weights, &tree) {}
  // `calc` points at `tree`: the state stays where make_shared put it.
  CycleState(const CycleState&) = delete;
  CycleState& operator=(const CycleState&) = delete;

  FairShareTree tree;
  MultifactorPriority calc;
  const PendingJob* first = nullptr;  // snapshot.queue's storage
  std::vector<double> priority;       // by index in snapshot.queue

  // Jobs of the snapshot's queue read their cached value; any other job
  // (a copy made by an action) is computed.
  double of(const PendingJob& job) const {
    // std::less: a total order even for pointers into different arrays.
    const std::less<const PendingJob*> less;
    if (first != nullptr && !less(&job, first) && less(&job, first + priority.size())) {
      return priority[static_cast<std::size_t>(&job - first)];
    }
    return calc.priority(job);
  }
};

}  // namespace

MultifactorPriority::MultifactorPriority(const Snapshot& snapshot,
                                         const MultifactorWeights& weights,
                                         const FairShareTree* fairshare)
    : snapshot_(snapshot), weights_(weights), fairshare_(fairshare) {
  if (snapshot.pool != nullptr) {
    for (const auto& node : snapshot.pool->nodes()) pool_cores_ += node.total_cores();
  }
  if (snapshot.site != nullptr) {
    for (const QueueConfig& q : snapshot.site->queues) {
      max_queue_priority_ = std::max(max_queue_priority_, static_cast<double>(q.priority));
    }
    for (const QosConfig& q : snapshot.site->qos) {
      max_qos_priority_ = std::max(max_qos_priority_, static_cast<double>(q.priority));
    }
  }
}

MultifactorFactors MultifactorPriority::factors(const PendingJob& job) const {
  MultifactorFactors f;
  const double waited_s =
      static_cast<double>(snapshot_.now - job.submit_time) / static_cast<double>(kUsPerSecond);
  f.age = weights_.max_age_s > 0 ? clamp01(waited_s / static_cast<double>(weights_.max_age_s)) : 0;
  const double cores = static_cast<double>(std::max(1, job.request.ntasks)) *
                       static_cast<double>(std::max(1, job.request.cpus_per_task));
  const double share = pool_cores_ > 0 ? clamp01(cores / pool_cores_) : 0.0;
  f.size = weights_.favor_small && pool_cores_ > 0 ? 1.0 - share : share;
  f.fairshare = fairshare_ != nullptr ? fairshare_->factor(job) : 1.0;
  if (snapshot_.site != nullptr) {
    const QueueConfig* queue = snapshot_.site->find_queue(job.queue);
    if (queue != nullptr && max_queue_priority_ > 0) {
      f.queue = clamp01(queue->priority / max_queue_priority_);
    }
    const QosConfig* qos = job.qos.empty() ? nullptr : snapshot_.site->find_qos(job.qos);
    if (qos != nullptr && max_qos_priority_ > 0) f.qos = clamp01(qos->priority / max_qos_priority_);
  }
  return f;
}

double MultifactorPriority::priority(const PendingJob& job) const {
  const MultifactorFactors f = factors(job);
  return weights_.age * f.age + weights_.size * f.size + weights_.fairshare * f.fairshare +
         weights_.queue * f.queue + weights_.qos * f.qos + job.priority;
}

double multifactor_priority(const PendingJob& job, const Snapshot& snapshot,
                            const MultifactorWeights& weights, const FairShareTree* fairshare) {
  return MultifactorPriority(snapshot, weights, fairshare).priority(job);
}

Result<MultifactorWeights> parse_multifactor_options(const PluginOptions& options) {
  MultifactorWeights w;
  for (const auto& [name, value] : options) {
    std::uint32_t* weight = name == "weight_age"         ? &w.age
                            : name == "weight_size"      ? &w.size
                            : name == "weight_fairshare" ? &w.fairshare
                            : name == "weight_queue"     ? &w.queue
                            : name == "weight_qos"       ? &w.qos
                                                         : nullptr;
    if (weight != nullptr) {
      if (!parse_weight(value, *weight)) return bad_value(name, value, "a non-negative integer");
    } else if (name == "max_age") {
      if (!parse_duration(value, w.max_age_s)) {
        return bad_value(name, value, "a duration > 0 (seconds, or N with s, m, h or d)");
      }
    } else if (name == "favor_small") {
      if (value != "true" && value != "false") return bad_value(name, value, "true or false");
      w.favor_small = value == "true";
    } else {
      return invalid_argument("unknown scheduler option 'priority." + name +
                              "' (known: " + std::string(kKnown) + ")");
    }
  }
  return w;
}

Result<std::unique_ptr<Plugin>> PriorityPlugin::create(const PluginOptions& options) {
  Result<MultifactorWeights> weights = parse_multifactor_options(options);
  if (!weights.is_ok()) return weights.status();
  return std::unique_ptr<Plugin>(std::make_unique<PriorityPlugin>(*weights));
}

void PriorityPlugin::on_session_open(Session& session) {
  const Snapshot& snapshot = session.snapshot();
  auto state = std::make_shared<CycleState>(snapshot, weights_);
  state->first = snapshot.queue.data();
  state->priority.reserve(snapshot.queue.size());
  for (const PendingJob& job : snapshot.queue) state->priority.push_back(state->calc.priority(job));
  session.add_job_order(std::string(kName),
                        [state = std::shared_ptr<const CycleState>(std::move(state))](
                            const PendingJob& a, const PendingJob& b) {
                          const double pa = state->of(a);
                          const double pb = state->of(b);
                          if (pa != pb) return pa > pb ? -1 : 1;
                          return 0;
                        });
}

}  // namespace hpcq::sched
