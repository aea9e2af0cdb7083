#include "lib/sim/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace hpcq::sim {

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = p / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

double bounded_slowdown(std::int64_t wait_s, std::int64_t run_s, std::int64_t tau_s) {
  return static_cast<double>(wait_s + run_s) / static_cast<double>(std::max(run_s, tau_s));
}

Metrics compute_metrics(std::span<const JobOutcome> jobs, std::int64_t capacity_cores) {
  Metrics m;
  m.jobs = jobs.size();
  if (jobs.empty()) return m;
  std::int64_t min_submit = std::numeric_limits<std::int64_t>::max();
  std::int64_t max_end = std::numeric_limits<std::int64_t>::min();
  double work = 0;
  double wait_sum = 0;
  double bsld10_sum = 0;
  std::vector<double> waits;
  std::vector<double> bsld60;
  waits.reserve(jobs.size());
  bsld60.reserve(jobs.size());
  std::map<std::int64_t, UserMetrics> users;
  std::map<std::string, QueueMetrics> queues;
  for (const JobOutcome& job : jobs) {
    const std::int64_t wait = job.start_s - job.submit_s;
    const std::int64_t run = job.end_s - job.start_s;
    min_submit = std::min(min_submit, job.submit_s);
    max_end = std::max(max_end, job.end_s);
    // A resized job's cores changed over its run: the simulator counted them.
    const double core_seconds = job.core_seconds > 0
                                    ? job.core_seconds
                                    : static_cast<double>(job.size) * static_cast<double>(run);
    const double b10 = std::max(1.0, bounded_slowdown(wait, run, 10));
    work += core_seconds;
    wait_sum += static_cast<double>(wait);
    bsld10_sum += b10;
    waits.push_back(static_cast<double>(wait));
    bsld60.push_back(bounded_slowdown(wait, run, 60));
    if (job.backfilled) ++m.backfilled;
    UserMetrics& u = users[job.user];
    u.user = job.user;
    ++u.jobs;
    u.core_seconds += core_seconds;
    u.mean_wait_s += static_cast<double>(wait);  // a sum until the end
    u.mean_bsld_10 += b10;
    QueueMetrics& q = queues[job.queue];
    q.queue = job.queue;
    ++q.jobs;
    q.core_seconds += core_seconds;
    q.mean_wait_s += static_cast<double>(wait);  // a sum until the end
    q.mean_bsld_10 += b10;
  }
  const auto n = static_cast<double>(jobs.size());
  m.makespan_s = max_end - min_submit;
  const double capacity = static_cast<double>(capacity_cores) * static_cast<double>(m.makespan_s);
  m.utilization = capacity > 0 ? work / capacity : 0;
  m.mean_wait_s = wait_sum / n;
  m.p95_wait_s = percentile(std::move(waits), 95);
  m.mean_bsld_10 = bsld10_sum / n;
  m.p95_bsld_60 = percentile(std::move(bsld60), 95);
  m.users.reserve(users.size());
  for (auto& [id, u] : users) {
    u.mean_wait_s /= static_cast<double>(u.jobs);
    u.mean_bsld_10 /= static_cast<double>(u.jobs);
    u.share = work > 0 ? u.core_seconds / work : 0;
    m.users.push_back(u);
  }
  m.queues.reserve(queues.size());
  for (auto& [name, q] : queues) {
    q.mean_wait_s /= static_cast<double>(q.jobs);
    q.mean_bsld_10 /= static_cast<double>(q.jobs);
    q.share = work > 0 ? q.core_seconds / work : 0;
    m.queues.push_back(q);
  }
  return m;
}

}  // namespace hpcq::sim
