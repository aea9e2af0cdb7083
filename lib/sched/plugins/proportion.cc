#include "lib/sched/plugins/proportion.h"

#include <limits>

namespace hpcq::sched {
namespace {

// Rounding slack for sums of fractional shares.
constexpr double kEpsilon = 1e-6;

double cores_asked(const PendingJob& job) {
  return static_cast<double>(job.request.ntasks) * job.request.cpus_per_task;
}

// allocated / deserved; a queue that deserves nothing but holds something
// goes last.
double share_of(const QueueShare& s) {
  if (s.deserved > kEpsilon) return s.allocated / s.deserved;
  return s.allocated > 0 ? std::numeric_limits<double>::infinity() : 0;
}

}  // namespace

void fill_deserved(std::vector<QueueShare>& shares, double total) {
  std::vector<bool> met(shares.size(), false);
  for (std::size_t i = 0; i < shares.size(); ++i) {
    shares[i].deserved = 0;
    // Nothing asked, or no weight to claim anything with.
    if (shares[i].request <= 0 || shares[i].weight <= 0) met[i] = true;
  }
  double remaining = total;
  while (remaining > kEpsilon) {
    double weights = 0;
    for (std::size_t i = 0; i < shares.size(); ++i) {
      if (!met[i]) weights += shares[i].weight;
    }
    if (weights <= 0) break;
    double handed = 0;
    for (std::size_t i = 0; i < shares.size(); ++i) {
      if (met[i]) continue;
      QueueShare& s = shares[i];
      const double before = s.deserved;
      s.deserved += remaining * s.weight / weights;
      if (s.deserved >= s.request - kEpsilon) {
        s.deserved = s.request;
        met[i] = true;
      }
      handed += s.deserved - before;
    }
    if (handed <= kEpsilon) break;
    remaining -= handed;
  }
}

bool ProportionPlugin::within_share(const Session& session, const std::string& queue, double cores,
                                    double extra) const {
  const QueueShare* mine = session.queue_share(queue);
  if (mine == nullptr) return false;
  if (mine->allocated + extra + cores <= mine->deserved + kEpsilon) return true;
  // Idle share: nobody else is waiting for it.
  for (const QueueShare& other : session.queue_shares()) {
    if (other.queue != queue && other.pending > kEpsilon) return false;
  }
  return true;
}

void ProportionPlugin::on_session_open(Session& session) {
  admitted_.clear();
  const Snapshot& snapshot = session.snapshot();
  const SitePolicy* site = snapshot.site;
  if (site == nullptr || site->queues.empty()) return;
  std::vector<QueueShare> shares;
  shares.reserve(site->queues.size());
  for (const QueueConfig& q : site->queues) shares.push_back({q.name, q.weight, 0, 0, 0, 0});
  auto index = [&](const std::string& name) -> QueueShare* {
    const QueueConfig* q = site->find_queue(name);
    if (q == nullptr) return nullptr;
    return &shares[static_cast<std::size_t>(q - site->queues.data())];
  };
  for (const RunningJob& job : snapshot.running) {
    if (QueueShare* s = index(job.queue)) s->allocated += job.allocation.total_cores();
  }
  for (const PendingJob& job : snapshot.queue) {
    if (QueueShare* s = index(job.queue)) s->pending += cores_asked(job);
  }
  for (QueueShare& s : shares) s.request = s.allocated + s.pending;
  double total = 0;
  if (snapshot.pool != nullptr) {
    for (const resource::NodeState& node : snapshot.pool->nodes()) {
      if (node.schedulable()) total += node.total_cores();
    }
  }
  fill_deserved(shares, total);
  // The queue order is fixed at session open (the Session sorts once).
  std::map<std::string, double> order;
  for (const QueueShare& s : shares) order[s.queue] = share_of(s);
  session.set_queue_shares(std::move(shares));

  const std::string plugin(kName);
  session.add_job_order(plugin,
                        [site, order = std::move(order)](const PendingJob& a, const PendingJob& b) {
                          const QueueConfig* qa = site->find_queue(a.queue);
                          const QueueConfig* qb = site->find_queue(b.queue);
                          if (qa == qb || qa == nullptr || qb == nullptr) return 0;
                          const double sa = order.at(qa->name);
                          const double sb = order.at(qb->name);
                          if (sa == sb) return 0;
                          return sa < sb ? -1 : 1;
                        });
  Session* s = &session;
  session.add_job_ready(plugin, [this, s, site](const PendingJob& job) {
    const QueueConfig* q = site->find_queue(job.queue);
    return q != nullptr && within_share(*s, q->name, cores_asked(job), 0);
  });
  session.add_on_allocate(plugin,
                          [s, site](const PendingJob& job, const resource::Allocation& allocation) {
                            const QueueConfig* q = site->find_queue(job.queue);
                            if (q == nullptr) return;
                            QueueShare* share = s->queue_share(q->name);
                            share->allocated += allocation.total_cores();
                            share->pending -= cores_asked(job);
                          });
  session.add_on_deallocate(
      plugin, [s, site](const PendingJob& job, const resource::Allocation& allocation) {
        const QueueConfig* q = site->find_queue(job.queue);
        if (q == nullptr) return;
        QueueShare* share = s->queue_share(q->name);
        share->allocated -= allocation.total_cores();
        share->pending += cores_asked(job);
      });
  session.add_job_enqueueable(plugin, [this, s, site](const PendingJob& job) {
    const QueueConfig* q = site->find_queue(job.queue);
    if (q == nullptr) return false;
    const auto it = admitted_.find(q->name);
    return within_share(*s, q->name, cores_asked(job), it != admitted_.end() ? it->second : 0);
  });
  session.add_on_enqueue(plugin, [this, site](const PendingJob& job) {
    const QueueConfig* q = site->find_queue(job.queue);
    if (q != nullptr) admitted_[q->name] += cores_asked(job);
  });
}

}  // namespace hpcq::sched
