#include "lib/sched/actions/gap.h"

#include <algorithm>
#include <charconv>
#include <limits>
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

// The pending job a running one would be, to place it somewhere else.
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
  p.profile = job.profile;
  p.workers = job.workers;
  return p;
}

// Takes whatever of `cores` is still free in `pool` (so that a placement
// there avoids them); cores already taken stay as they are.
void mask(resource::NodePool& pool, const resource::Allocation& cores) {
  for (const resource::NodeAllocation& part : cores.nodes) {
    const resource::NodeState* node = pool.find(part.rank);
    if (node == nullptr) continue;
    resource::NodeAllocation free_part;
    free_part.rank = part.rank;
    free_part.node = part.node;
    for (int core : part.cores) {
      if (node->core_free(core)) free_part.cores.push_back(core);
    }
    if (free_part.cores.empty()) continue;
    resource::Allocation take;
    take.nodes.push_back(std::move(free_part));
    (void)pool.allocate(take);
  }
}

// A reserved job's cores from its time until it is expected to end.
struct Promise {
  JobId job = 0;
  TimeUs time = 0;
  TimeUs end = 0;
  resource::Allocation cores;
};

// What a reserved job needs at its time T: its placement on the pool as it
// will be then -- without gap jobs, without the regular jobs that end by T,
// and without the cores of the earlier promises that still hold at T (taken
// in time order, this follows backfill's own plan).
std::optional<Promise> promise_of(Session& session, const PendingJob& job, TimeUs t,
                                  const std::vector<Promise>& earlier) {
  const Snapshot& snapshot = session.snapshot();
  resource::NodePool at = session.pool();
  for (const RunningJob& running : snapshot.running) {
    if (session.is_gap_queue(running.queue) || running.end_estimate <= t) {
      (void)at.release(session.allocation_of(running));
    }
  }
  for (const Promise& p : earlier) {
    if (p.time <= t && t < p.end) mask(at, p.cores);
  }
  std::optional<resource::Allocation> cores = session.place_on(job, at);
  if (!cores) return std::nullopt;
  const TimeUs end = job.time_limit_s > 0 ? t + job.time_limit_s * kUsPerSecond
                                          : std::numeric_limits<TimeUs>::max();
  return Promise{job.id, t, end, std::move(*cores)};
}

}  // namespace

void GapAction::execute(Session& session) {
  const Snapshot& snapshot = session.snapshot();
  const TimeUs now = session.now();
  const TimeUs horizon = now + options_.save_deadline_s * kUsPerSecond;

  std::vector<const RunningJob*> gap_running;
  for (const RunningJob& job : snapshot.running) {
    if (session.is_gap_queue(job.queue) && !job.leaving) gap_running.push_back(&job);
  }
  std::set<JobId> leaving;

  // 0. Mode A: a slot run, then always saved.
  if (options_.mode_a) {
    for (const RunningJob* gap : gap_running) {
      if (now < gap->start_time + options_.slot_s * kUsPerSecond) continue;
      leaving.insert(gap->id);
      session.add_decision(Preempt{gap->id, 0, PreemptMode::kCheckpoint});
    }
  }

  // 1. Evictions for the reservations that are close. `taken`: the cores
  // those jobs take at their reserved times, and where migrations go; no gap
  // job may start there now (it would be evicted at once, and again, every
  // cycle).
  std::vector<resource::Allocation> taken;
  std::unordered_map<JobId, const PendingJob*> queued;
  for (const PendingJob* job : session.ordered_queue()) queued.emplace(job->id, job);
  // Copied: adding decisions below moves the list.
  std::vector<Reserve> reserves;
  for (const Decision& decision : session.decisions().decisions) {
    if (const Reserve* reserve = std::get_if<Reserve>(&decision)) reserves.push_back(*reserve);
  }
  std::sort(reserves.begin(), reserves.end(),
            [](const Reserve& a, const Reserve& b) { return a.time < b.time; });
  std::vector<std::pair<const RunningJob*, JobId>> evict;  // gap job, for whom
  std::set<JobId> late;  // in the way of a start too close for a save
  std::vector<Promise> promised;  // in time order
  std::size_t planned = 0;        // reserves[0, planned) are in `promised`
  auto plan_until = [&](TimeUs until) {
    for (; planned < reserves.size() && reserves[planned].time <= until; ++planned) {
      auto job = queued.find(reserves[planned].job);
      if (job == queued.end()) continue;
      if (auto p = promise_of(session, *job->second, reserves[planned].time, promised)) {
        promised.push_back(std::move(*p));
      }
    }
  };
  plan_until(horizon);
  for (const Promise& p : promised) {
    taken.push_back(p.cores);
    for (const RunningJob* gap : gap_running) {
      if (leaving.count(gap->id) || !overlaps(p.cores, session.allocation_of(*gap))) continue;
      leaving.insert(gap->id);
      evict.emplace_back(gap, p.job);
      if (p.time < horizon) late.insert(gap->id);
    }
  }
  const bool migrating =
      options_.migrate && !options_.mode_a && options_.evict == PreemptMode::kCheckpoint;
  if (migrating && !evict.empty()) {
    // The promises up to the latest end of a job that moves.
    TimeUs latest = 0;
    for (const auto& [gap, for_job] : evict) latest = std::max(latest, gap->end_estimate);
    plan_until(latest);
  }
  for (const auto& [gap, for_job] : evict) {
    if (options_.kill_late && late.count(gap->id)) {
      // The reserved start came closer than the save deadline (a job ended
      // before its limit): a save could delay it, so the gap job is killed
      // and loses what it did since its last save (papers/004's Mode B
      // risk; Mode A bounds the loss to a slot).
      session.add_decision(Preempt{gap->id, for_job, PreemptMode::kRequeue});
      continue;
    }
    if (migrating) {
      // A hole that lasts: idle now, needed by no reservation before the
      // job's end, and not where another move of this cycle goes.
      resource::NodePool holes = session.pool();
      for (const Promise& p : promised) {
        if (p.time < gap->end_estimate) mask(holes, p.cores);
      }
      for (const resource::Allocation& t : taken) mask(holes, t);
      session.set_gap_phase(true);  // a gap job is placed only in the gap phase
      std::optional<resource::Allocation> hole = session.place_on(as_pending(*gap), holes);
      session.set_gap_phase(false);
      if (hole) {
        taken.push_back(*hole);
        session.add_decision(Migrate{gap->id, std::move(*hole)});
        continue;
      }
    }
    session.add_decision(Preempt{gap->id, for_job, options_.evict});
  }

  // 2. Gap jobs into whatever is idle now.
  session.set_gap_phase(true);
  for (const PendingJob* job : session.ordered_queue()) {
    if (!session.job_ready(*job)) continue;  // not a gap job, or held
    std::optional<resource::Allocation> allocation = session.place(*job);
    if (!allocation) continue;
    if (std::any_of(taken.begin(), taken.end(),
                    [&](const resource::Allocation& n) { return overlaps(n, *allocation); })) {
      continue;
    }
    Statement statement = session.statement();
    if (!statement.allocate(*job, std::move(*allocation)).is_ok()) break;
    statement.commit();
  }
  session.set_gap_phase(false);
}

namespace {

Result<std::int64_t> seconds_option(const std::string& name, const std::string& value,
                                    std::int64_t min) {
  std::int64_t s = 0;
  const char* last = value.data() + value.size();
  const auto [end, error] = std::from_chars(value.data(), last, s);
  if (value.empty() || error != std::errc() || end != last || s < min) {
    return invalid_argument("scheduler option 'gap." + name + "': '" + value +
                            "' is not a number of seconds >= " + std::to_string(min));
  }
  return s;
}

}  // namespace

Result<std::unique_ptr<Action>> GapAction::create(const ActionOptions& options) {
  GapOptions parsed;
  for (const auto& [name, value] : options) {
    if (name == "save_deadline_s") {
      auto s = seconds_option(name, value, 0);
      if (!s.is_ok()) return s.status();
      parsed.save_deadline_s = *s;
    } else if (name == "slot_s") {
      auto s = seconds_option(name, value, 1);
      if (!s.is_ok()) return s.status();
      parsed.slot_s = *s;
    } else if (name == "evict") {
      if (value == "checkpoint") {
        parsed.evict = PreemptMode::kCheckpoint;
      } else if (value == "requeue") {
        parsed.evict = PreemptMode::kRequeue;
      } else {
        return invalid_argument("scheduler option 'gap.evict': '" + value +
                                "' is not checkpoint or requeue");
      }
    } else if (name == "migrate") {
      if (value != "true" && value != "false") {
        return invalid_argument("scheduler option 'gap.migrate': '" + value +
                                "' is not true or false");
      }
      parsed.migrate = value == "true";
    } else if (name == "late") {
      if (value != "save" && value != "kill") {
        return invalid_argument("scheduler option 'gap.late': '" + value +
                                "' is not save or kill");
      }
      parsed.kill_late = value == "kill";
    } else if (name == "mode") {
      if (value != "a" && value != "b") {
        return invalid_argument("scheduler option 'gap.mode': '" + value + "' is not a or b");
      }
      parsed.mode_a = value == "a";
    } else {
      return invalid_argument("unknown scheduler option 'gap." + name +
                              "' (known: save_deadline_s, evict, migrate, late, mode, slot_s)");
    }
  }
  return std::unique_ptr<Action>(std::make_unique<GapAction>(parsed));
}

}  // namespace hpcq::sched
