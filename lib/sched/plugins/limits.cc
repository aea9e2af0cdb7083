#include "lib/sched/plugins/limits.h"

#include <algorithm>
#include <limits>

namespace hpcq::sched {
namespace {

std::int64_t cores_asked(const PendingJob& job) {
  return static_cast<std::int64_t>(job.request.ntasks) * job.request.cpus_per_task;
}

// The fewest nodes the job can take before it is placed.
std::int64_t nodes_asked(const PendingJob& job) { return std::max(job.request.nodes, 1); }

bool over(std::int64_t limit, std::int64_t value) { return limit > 0 && value > limit; }

}  // namespace

void LimitsPlugin::add(Counters& counters, const std::string& queue, std::uint32_t uid, Usage usage,
                       int sign) {
  for (Usage* u : {&counters.queue[queue], &counters.user[{queue, uid}]}) {
    u->jobs += sign;
    u->cores += sign * usage.cores;
    u->nodes += sign * usage.nodes;
  }
}

bool LimitsPlugin::fits(const QueueConfig& config, const PendingJob& job, std::int64_t cores,
                        std::int64_t nodes, const Counters& counters, const Counters* extra) const {
  const QueueLimits& l = config.limits;
  const std::int64_t limit_s =
      job.time_limit_s <= 0 ? std::numeric_limits<std::int64_t>::max() : job.time_limit_s;
  if (over(l.max_time_limit_s, limit_s)) return false;
  Usage q;
  Usage u;
  for (const Counters* c : {&counters, extra}) {
    if (c == nullptr) continue;
    if (const auto it = c->queue.find(config.name); it != c->queue.end()) {
      q.jobs += it->second.jobs;
      q.cores += it->second.cores;
      q.nodes += it->second.nodes;
    }
    if (const auto it = c->user.find({config.name, job.uid}); it != c->user.end()) {
      u.jobs += it->second.jobs;
      u.cores += it->second.cores;
      u.nodes += it->second.nodes;
    }
  }
  return !over(l.max_running_jobs, q.jobs + 1) && !over(l.max_cores, q.cores + cores) &&
         !over(l.max_nodes, q.nodes + nodes) && !over(l.max_running_jobs_per_user, u.jobs + 1) &&
         !over(l.max_cores_per_user, u.cores + cores) &&
         !over(l.max_nodes_per_user, u.nodes + nodes);
}

void LimitsPlugin::on_session_open(Session& session) {
  site_ = session.snapshot().site;
  running_ = {};
  admitted_ = {};
  if (site_ == nullptr || site_->queues.empty()) return;
  for (const RunningJob& job : session.snapshot().running) {
    const QueueConfig* q = site_->find_queue(job.queue);
    // A job of a queue since removed from the configuration limits nothing.
    if (q == nullptr) continue;
    add(running_, q->name, job.uid,
        {1, job.allocation.total_cores(), static_cast<std::int64_t>(job.allocation.nodes.size())},
        +1);
  }
  const std::string plugin(kName);
  session.add_job_ready(plugin, [this](const PendingJob& job) {
    const QueueConfig* q = site_->find_queue(job.queue);
    return q != nullptr && fits(*q, job, cores_asked(job), nodes_asked(job), running_, nullptr);
  });
  session.add_allocatable(
      plugin, [this](const PendingJob& job, const resource::Allocation& allocation) {
        const QueueConfig* q = site_->find_queue(job.queue);
        return q != nullptr &&
               fits(*q, job, allocation.total_cores(),
                    static_cast<std::int64_t>(allocation.nodes.size()), running_, nullptr);
      });
  session.add_on_allocate(
      plugin, [this](const PendingJob& job, const resource::Allocation& allocation) {
        const QueueConfig* q = site_->find_queue(job.queue);
        if (q == nullptr) return;
        add(running_, q->name, job.uid,
            {1, allocation.total_cores(), static_cast<std::int64_t>(allocation.nodes.size())}, +1);
      });
  session.add_on_deallocate(
      plugin, [this](const PendingJob& job, const resource::Allocation& allocation) {
        const QueueConfig* q = site_->find_queue(job.queue);
        if (q == nullptr) return;
        add(running_, q->name, job.uid,
            {1, allocation.total_cores(), static_cast<std::int64_t>(allocation.nodes.size())}, -1);
      });
  session.add_job_enqueueable(plugin, [this](const PendingJob& job) {
    const QueueConfig* q = site_->find_queue(job.queue);
    return q != nullptr && fits(*q, job, cores_asked(job), nodes_asked(job), running_, &admitted_);
  });
  session.add_on_enqueue(plugin, [this](const PendingJob& job) {
    const QueueConfig* q = site_->find_queue(job.queue);
    if (q != nullptr) add(admitted_, q->name, job.uid, {1, cores_asked(job), nodes_asked(job)}, +1);
  });
}

}  // namespace hpcq::sched
