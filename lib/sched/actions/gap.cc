#include "lib/sched/actions/gap.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <unordered_map>

namespace hpcq::sched {
namespace {

bool overlaps(const resource::Allocation& a, const resource::Allocation& b) {
  for (const resource::NodeAllocation& x : a.nodes) {
    for (const resource::NodeAllocation& y : b.nodes) {
      if (x.rank != y.rank) continue;
      for (int core : x.cores) {
        if (std::find(y.cores.begin(), y.cores.end(), core) != y.cores.end()) return true;
      }
    }
  }
  return false;
}

}  // namespace

void GapAction::execute(Session& session) {
  const Snapshot& snapshot = session.snapshot();
  const TimeUs now = session.now();
  const TimeUs horizon = now + options_.save_deadline_s * kUsPerSecond;

  std::vector<const RunningJob*> gap_running;
  for (const RunningJob& job : snapshot.running) {
    if (session.is_gap_queue(job.queue)) gap_running.push_back(&job);
  }

  // 1. Evictions for the reservations that are close. `needed`: the cores
  // those jobs take at their reserved times, where no gap job may start now
  // (it would be evicted at once, and again, every cycle).
  std::vector<resource::Allocation> needed;
  {
    std::unordered_map<JobId, const PendingJob*> queued;
    for (const PendingJob* job : session.ordered_queue()) queued.emplace(job->id, job);
    // Copied: adding decisions below moves the list.
    std::vector<Reserve> close;
    for (const Decision& decision : session.decisions().decisions) {
      const Reserve* reserve = std::get_if<Reserve>(&decision);
      if (reserve != nullptr && reserve->time <= horizon) close.push_back(*reserve);
    }
    std::set<JobId> evicted;
    for (const Reserve& reserve : close) {
      auto job = queued.find(reserve.job);
      if (job == queued.end()) continue;
      // The pool as it will be at the reserved time, without gap jobs.
      resource::NodePool at = session.pool();
      for (const RunningJob* gap : gap_running) (void)at.release(session.allocation_of(*gap));
      for (const RunningJob& running : snapshot.running) {
        if (!session.is_gap_queue(running.queue) && running.end_estimate <= reserve.time) {
          (void)at.release(session.allocation_of(running));
        }
      }
      std::optional<resource::Allocation> cores = session.place_on(*job->second, at);
      if (!cores) continue;
      needed.push_back(*cores);
      for (const RunningJob* gap : gap_running) {
        if (evicted.count(gap->id) || !overlaps(*cores, session.allocation_of(*gap))) continue;
        evicted.insert(gap->id);
        session.add_decision(Preempt{gap->id, reserve.job, options_.evict});
      }
    }
  }

  // 2. Gap jobs into whatever is idle now.
  session.set_gap_phase(true);
  for (const PendingJob* job : session.ordered_queue()) {
    if (!session.job_ready(*job)) continue;  // not a gap job, or held
    std::optional<resource::Allocation> allocation = session.place(*job);
    if (!allocation) continue;
    if (std::any_of(needed.begin(), needed.end(),
                    [&](const resource::Allocation& n) { return overlaps(n, *allocation); })) {
      continue;
    }
    Statement statement = session.statement();
    if (!statement.allocate(*job, std::move(*allocation)).is_ok()) break;
    statement.commit();
  }
  session.set_gap_phase(false);
}

Result<std::unique_ptr<Action>> GapAction::create(const ActionOptions& options) {
  GapOptions parsed;
  for (const auto& [name, value] : options) {
    if (name == "save_deadline_s") {
      std::int64_t s = 0;
      const char* last = value.data() + value.size();
      const auto [end, error] = std::from_chars(value.data(), last, s);
      if (value.empty() || error != std::errc() || end != last || s < 0) {
        return invalid_argument("scheduler option 'gap.save_deadline_s': '" + value +
                                "' is not a number of seconds >= 0");
      }
      parsed.save_deadline_s = s;
    } else if (name == "evict") {
      if (value == "checkpoint") {
        parsed.evict = PreemptMode::kCheckpoint;
      } else if (value == "requeue") {
        parsed.evict = PreemptMode::kRequeue;
      } else {
        return invalid_argument("scheduler option 'gap.evict': '" + value +
                                "' is not checkpoint or requeue");
      }
    } else {
      return invalid_argument("unknown scheduler option 'gap." + name +
                              "' (known: save_deadline_s, evict)");
    }
  }
  return std::unique_ptr<Action>(std::make_unique<GapAction>(parsed));
}

}  // namespace hpcq::sched
