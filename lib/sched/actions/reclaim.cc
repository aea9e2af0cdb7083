#include "lib/sched/actions/reclaim.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <string>

#include "lib/sched/actions/preempt.h"

namespace hpcq::sched {
namespace {

constexpr double kEpsilon = 1e-6;

}  // namespace

Result<std::unique_ptr<Action>> ReclaimAction::create(const ActionOptions& options) {
  ReclaimOptions parsed;
  for (const auto& [name, value] : options) {
    if (name != "max_reclaimers") {
      return invalid_argument("unknown scheduler option 'reclaim." + name +
                              "' (known: max_reclaimers)");
    }
    int n = 0;
    const char* last = value.data() + value.size();
    const auto [end, error] = std::from_chars(value.data(), last, n);
    if (value.empty() || error != std::errc() || end != last || n < 1) {
      return invalid_argument("scheduler option 'reclaim.max_reclaimers': '" + value +
                              "' is not a count >= 1");
    }
    parsed.max_reclaimers = n;
  }
  return std::unique_ptr<Action>(std::make_unique<ReclaimAction>(parsed));
}

void ReclaimAction::execute(Session& session) {
  const Snapshot& snapshot = session.snapshot();
  const SitePolicy* site = snapshot.site;
  if (snapshot.pool == nullptr || site == nullptr || session.queue_shares().empty()) return;
  if (snapshot.running.empty()) return;
  std::unordered_set<JobId> preempted = preempted_this_cycle(session);
  const std::unordered_set<JobId> served = served_this_cycle(session);
  // Queue -> cores this cycle's preemptions (by any action) take from it.
  std::map<std::string, double> taken;
  for (const RunningJob& r : snapshot.running) {
    if (!preempted.contains(r.id)) continue;
    if (const QueueConfig* q = site->find_queue(r.queue)) {
      taken[q->name] += r.allocation.total_cores();
    }
  }
  // Youngest first, once for the whole action.
  std::vector<const RunningJob*> youngest;
  youngest.reserve(snapshot.running.size());
  for (const RunningJob& r : snapshot.running) youngest.push_back(&r);
  std::sort(youngest.begin(), youngest.end(), [](const RunningJob* a, const RunningJob* b) {
    if (a->start_time != b->start_time) return a->start_time > b->start_time;
    return a->id > b->id;
  });
  std::optional<resource::NodePool> base;
  int searches = 0;
  for (const PendingJob* job : session.ordered_queue()) {
    if (searches >= options_.max_reclaimers) break;
    if (served.contains(job->id) || !session.job_ready(*job)) continue;
    const QueueConfig* mine = site->find_queue(job->queue);
    if (mine == nullptr) continue;
    const QueueShare* my_share = session.queue_share(mine->name);
    const double need = static_cast<double>(job->request.ntasks) * job->request.cpus_per_task;
    if (my_share == nullptr || my_share->allocated + need > my_share->deserved + kEpsilon) {
      continue;  // not below its share: nothing to reclaim for it
    }
    if (session.place(*job) || !session.fits_when_idle(*job)) continue;
    // Candidates in order, each queue giving while it stays above its share.
    std::map<std::string, double> left = taken;
    std::vector<const RunningJob*> candidates;
    for (const RunningJob* r : youngest) {
      if (preempted.contains(r->id)) continue;
      const QueueConfig* theirs = site->find_queue(r->queue);
      if (theirs == nullptr || theirs == mine || theirs->preempt_mode == PreemptMode::kOff) {
        continue;
      }
      const QueueShare* share = session.queue_share(theirs->name);
      if (share == nullptr) continue;
      double& gone = left[theirs->name];
      if (share->allocated - gone <= share->deserved + kEpsilon) continue;
      gone += r->allocation.total_cores();
      candidates.push_back(r);
    }
    if (candidates.empty()) continue;
    ++searches;
    if (!base) base = session.pool();
    std::optional<Eviction> eviction = choose_victims(session, *job, candidates, *base);
    if (!eviction) continue;
    for (const RunningJob* v : eviction->victims) {
      preempted.insert(v->id);
      taken[site->find_queue(v->queue)->name] += v->allocation.total_cores();
    }
    promise(*base, *eviction);
    emit_preemption(session, *job, *eviction);
  }
}

}  // namespace hpcq::sched
