#include "lib/sched/actions/preempt.h"

#include <algorithm>
#include <charconv>
#include <string>

namespace hpcq::sched {
namespace {

// The rank of a candidate: who goes first.
struct Candidate {
  const RunningJob* job = nullptr;
  PendingJob as_pending;
  std::int32_t tier = 0;
};

bool qos_listed(const SitePolicy& site, const std::string& preemptor_qos,
                const std::string& victim_qos) {
  if (preemptor_qos.empty() || victim_qos.empty()) return false;
  const QosConfig* qos = site.find_qos(preemptor_qos);
  return qos != nullptr &&
         std::find(qos->preempt.begin(), qos->preempt.end(), victim_qos) != qos->preempt.end();
}

}  // namespace

PendingJob as_pending(const RunningJob& job) {
  PendingJob p;
  p.id = job.id;
  p.uid = job.uid;
  p.submit_time = job.submit_time;
  p.request = job.request;
  p.time_limit_s = job.time_limit_s;
  p.queue = job.queue;
  p.account = job.account;
  p.qos = job.qos;
  p.priority = job.priority;
  p.max_nodes = job.max_nodes;
  p.elastic = job.elastic;
  return p;
}

std::unordered_set<JobId> preempted_this_cycle(const Session& session) {
  std::unordered_set<JobId> out;
  for (const Decision& d : session.decisions().decisions) {
    if (const Preempt* p = std::get_if<Preempt>(&d)) out.insert(p->job);
  }
  return out;
}

std::unordered_set<JobId> served_this_cycle(const Session& session) {
  std::unordered_set<JobId> out;
  for (const Decision& d : session.decisions().decisions) {
    if (const Start* s = std::get_if<Start>(&d)) out.insert(s->job);
    if (const Preempt* p = std::get_if<Preempt>(&d)) out.insert(p->for_job);
  }
  return out;
}

std::optional<Eviction> choose_victims(const Session& session, const PendingJob& job,
                                       const std::vector<const RunningJob*>& candidates,
                                       const resource::NodePool& base) {
  if (candidates.empty()) return std::nullopt;
  resource::NodePool trial = base;
  Eviction eviction;
  std::vector<const RunningJob*>& chosen = eviction.victims;
  bool fits = false;
  for (const RunningJob* victim : candidates) {
    // A victim whose nodes have left the pool frees nothing.
    if (!trial.release(victim->allocation).is_ok()) continue;
    chosen.push_back(victim);
    if (session.place_on(job, trial)) {
      fits = true;
      break;
    }
  }
  if (!fits) return std::nullopt;
  // Give back the victims the job does not need, the most valuable (last
  // chosen) first.
  for (std::size_t i = chosen.size(); i-- > 0;) {
    if (!trial.allocate(chosen[i]->allocation).is_ok()) continue;
    if (session.place_on(job, trial)) {
      chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      (void)trial.release(chosen[i]->allocation);
    }
  }
  std::optional<resource::Allocation> allocation = session.place_on(job, trial);
  if (!allocation) return std::nullopt;  // cannot happen: the last check placed it
  eviction.allocation = std::move(*allocation);
  return eviction;
}

void promise(resource::NodePool& base, const Eviction& eviction) {
  for (const RunningJob* victim : eviction.victims) (void)base.release(victim->allocation);
  (void)base.allocate(eviction.allocation);
}

void emit_preemption(Session& session, const PendingJob& job, const Eviction& eviction) {
  const SitePolicy* site = session.snapshot().site;
  for (const RunningJob* victim : eviction.victims) {
    const QueueConfig* q = site != nullptr ? site->find_queue(victim->queue) : nullptr;
    const PreemptMode mode = q != nullptr ? q->preempt_mode : PreemptMode::kRequeue;
    session.add_decision(Preempt{victim->id, job.id, mode});
  }
  session.add_decision(Reserve{job.id, session.now()});
}

Result<std::unique_ptr<Action>> PreemptAction::create(const ActionOptions& options) {
  PreemptOptions parsed;
  for (const auto& [name, value] : options) {
    if (name == "max_preemptors") {
      int n = 0;
      const char* last = value.data() + value.size();
      const auto [end, error] = std::from_chars(value.data(), last, n);
      if (value.empty() || error != std::errc() || end != last || n < 1) {
        return invalid_argument("scheduler option 'preempt.max_preemptors': '" + value +
                                "' is not a count >= 1");
      }
      parsed.max_preemptors = n;
    } else if (name == "by_priority") {
      if (value != "true" && value != "false") {
        return invalid_argument("scheduler option 'preempt.by_priority': '" + value +
                                "' is not true or false");
      }
      parsed.by_priority = value == "true";
    } else {
      return invalid_argument("unknown scheduler option 'preempt." + name +
                              "' (known: max_preemptors, by_priority)");
    }
  }
  return std::unique_ptr<Action>(std::make_unique<PreemptAction>(parsed));
}

void PreemptAction::execute(Session& session) {
  const Snapshot& snapshot = session.snapshot();
  const SitePolicy* site = snapshot.site;
  if (snapshot.pool == nullptr || site == nullptr || site->queues.empty()) return;
  if (snapshot.running.empty()) return;
  std::unordered_set<JobId> preempted = preempted_this_cycle(session);
  const std::unordered_set<JobId> served = served_this_cycle(session);
  int searches = 0;
  // The free resources with this action's promises applied.
  std::optional<resource::NodePool> base;
  for (const PendingJob* job : session.ordered_queue()) {
    if (searches >= options_.max_preemptors) break;
    if (served.contains(job->id) || !session.job_ready(*job)) continue;
    const QueueConfig* mine = site->find_queue(job->queue);
    if (mine == nullptr) continue;
    if (session.place(*job) || !session.fits_when_idle(*job)) continue;
    std::vector<Candidate> ranked;
    for (const RunningJob& r : snapshot.running) {
      if (preempted.contains(r.id)) continue;
      const QueueConfig* theirs = site->find_queue(r.queue);
      if (theirs == nullptr || theirs->preempt_mode == PreemptMode::kOff) continue;
      Candidate c{&r, as_pending(r), theirs->priority_tier};
      const bool by_queue = theirs->priority_tier < mine->priority_tier;
      const bool by_priority =
          options_.by_priority && theirs == mine && session.job_order(*job, c.as_pending) < 0;
      if (by_queue || by_priority || qos_listed(*site, job->qos, r.qos)) {
        ranked.push_back(std::move(c));
      }
    }
    if (ranked.empty()) continue;
    ++searches;
    std::sort(ranked.begin(), ranked.end(), [&](const Candidate& a, const Candidate& b) {
      if (a.tier != b.tier) return a.tier < b.tier;
      // Last in job order goes first.
      const int order = session.job_order(a.as_pending, b.as_pending);
      if (order != 0) return order > 0;
      if (a.job->start_time != b.job->start_time) return a.job->start_time > b.job->start_time;
      return a.job->id > b.job->id;
    });
    std::vector<const RunningJob*> candidates;
    candidates.reserve(ranked.size());
    for (const Candidate& c : ranked) candidates.push_back(c.job);
    if (!base) base = session.pool();
    std::optional<Eviction> eviction = choose_victims(session, *job, candidates, *base);
    if (!eviction) continue;
    for (const RunningJob* v : eviction->victims) preempted.insert(v->id);
    promise(*base, *eviction);
    emit_preemption(session, *job, *eviction);
  }
}

}  // namespace hpcq::sched
