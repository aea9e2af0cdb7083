#include "lib/sched/actions/gap.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>
#include <unordered_map>

#include "lib/sched/actions/preempt.h"
#include "lib/sched/planner.h"

namespace hpcq::sched {
namespace {

// The pending job a running one would be, to place it somewhere else:
// preempt.h's, with the shape the "granularity" plugin gives it.
PendingJob moving(const RunningJob& job) {
  PendingJob p = as_pending(job);
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
// will be then -- without gap jobs, without the regular jobs that end by T
// (one past its estimate still runs: it ends by T only from now + 1 s, as
// backfill counts it),
// and without the cores of the earlier promises that still hold at T (taken
// in time order, this follows backfill's own plan).
std::optional<Promise> promise_of(Session& session, const PendingJob& job, TimeUs t,
                                  const std::vector<Promise>& earlier) {
  const Snapshot& snapshot = session.snapshot();
  // Where it fits with every gap job staying, if it does (no one need
  // leave); else with them gone.
  resource::NodePool kept = session.pool();
  for (const RunningJob& running : snapshot.running) {
    if (!session.is_gap_queue(running.queue) &&
        expected_end(running.end_estimate, session.now()) <= t) {
      (void)kept.release(session.allocation_of(running));
    }
  }
  for (const Promise& p : earlier) {
    if (p.time <= t && t < p.end) mask(kept, p.cores);
  }
  std::optional<resource::Allocation> cores = session.place_on(job, kept);
  if (!cores) {
    resource::NodePool at = kept;
    for (const RunningJob& running : snapshot.running) {
      if (session.is_gap_queue(running.queue)) (void)at.release(session.allocation_of(running));
    }
    for (const Promise& p : earlier) {
      if (p.time <= t && t < p.end) mask(at, p.cores);
    }
    cores = session.place_on(job, at);
  }
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

  // 1. Evictions for the reservations that are close, counted per node:
  // the cores their jobs take there (`need`) against the cores free there
  // by the deadline if no gap job left (`supply`: free now, the regular
  // jobs' that end by then, and those of jobs already leaving). Where need
  // exceeds supply the youngest gap jobs there leave until it does not;
  // cores are counted, not named, as backfill's own reservations are.
  std::unordered_map<JobId, const PendingJob*> queued;
  for (const PendingJob* job : session.ordered_queue()) queued.emplace(job->id, job);
  // Copied: adding decisions below moves the list.
  std::vector<Reserve> reserves;
  for (const Decision& decision : session.decisions().decisions) {
    if (const Reserve* reserve = std::get_if<Reserve>(&decision)) reserves.push_back(*reserve);
  }
  std::sort(reserves.begin(), reserves.end(),
            [](const Reserve& a, const Reserve& b) { return a.time < b.time; });
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
  // Youngest first: the least work to save.
  std::vector<const RunningJob*> candidates;
  for (const RunningJob* gap : gap_running) {
    if (!leaving.count(gap->id)) candidates.push_back(gap);
  }
  std::sort(candidates.begin(), candidates.end(), [](const RunningJob* a, const RunningJob* b) {
    return a->start_time != b->start_time ? a->start_time > b->start_time : a->id > b->id;
  });
  // By node: when the cores of the jobs that are not gap jobs free (jobs
  // already leaving: now), and the gap jobs there, youngest first.
  std::unordered_map<Rank, std::vector<std::pair<TimeUs, int>>> frees_by;
  std::unordered_map<Rank, std::vector<std::pair<const RunningJob*, int>>> gap_on;
  for (const RunningJob& running : snapshot.running) {
    if (session.is_gap_queue(running.queue) && !running.leaving) continue;
    const TimeUs at = running.leaving ? std::numeric_limits<TimeUs>::min()
                                      : expected_end(running.end_estimate, now);
    for (const resource::NodeAllocation& on : session.allocation_of(running).nodes) {
      frees_by[on.rank].emplace_back(at, static_cast<int>(on.cores.size()));
    }
  }
  for (const RunningJob* gap : candidates) {
    for (const resource::NodeAllocation& on : session.allocation_of(*gap).nodes) {
      gap_on[on.rank].emplace_back(gap, static_cast<int>(on.cores.size()));
    }
  }
  std::vector<std::pair<const RunningJob*, JobId>> evict;  // gap job, for whom
  std::unordered_map<Rank, int> used;                      // cores earlier promises take, by node
  std::unordered_map<Rank, int> freed;  // cores of the gap jobs that leave, by node
  std::unordered_map<Rank, int> slack;  // free cores a new gap job may take, where promised
  for (const Promise& p : promised) {
    for (const resource::NodeAllocation& part : p.cores.nodes) {
      const Rank rank = part.rank;
      const int cores = static_cast<int>(part.cores.size());
      const resource::NodeState* node = session.pool().find(rank);
      // Free on the node at the promise's time if no gap job left: free
      // now, the regular jobs' that end by then, those already leaving.
      int avail = (node != nullptr ? node->free_cores() : 0) + freed[rank] - used[rank];
      for (const auto& [at, n] : frees_by[rank]) {
        if (at <= p.time) avail += n;
      }
      for (const auto& [gap, here] : gap_on[rank]) {
        if (avail >= cores) break;
        if (leaving.count(gap->id)) continue;
        leaving.insert(gap->id);
        evict.emplace_back(gap, p.job);
        for (const resource::NodeAllocation& on : session.allocation_of(*gap).nodes) {
          freed[on.rank] += static_cast<int>(on.cores.size());
        }
        avail += here;
      }
      used[rank] += cores;
      // A new gap job may take only what the node has free now beyond all
      // the promised cores: cores that free later (saves, ends) may come
      // late, and a promise must not lose its free ones to a gap job.
      if (!slack.count(rank)) slack[rank] = node != nullptr ? node->free_cores() : 0;
      slack[rank] -= cores;
    }
  }
  const bool migrating =
      options_.migrate && !options_.mode_a && options_.evict == PreemptMode::kCheckpoint;
  if (migrating && !evict.empty()) {
    // The promises up to the latest end of a job that moves.
    TimeUs latest = 0;
    for (const auto& [gap, for_job] : evict) {
      latest = std::max(latest, expected_end(gap->end_estimate, now));
    }
    plan_until(latest);
  }
  // Cores moves take, by node: this cycle's, and those of the jobs moving
  // already (being saved), whose holes nothing else may take meanwhile.
  std::unordered_map<Rank, int> moved_in;
  for (const RunningJob& running : snapshot.running) {
    if (!running.leaving || running.moving_to.empty()) continue;
    // Its cores, handed over for the dump, are in its request only.
    const int per_node = running.request.ntasks * running.request.cpus_per_task /
                         std::max<int>(1, static_cast<int>(running.moving_to.size()));
    for (Rank rank : running.moving_to) moved_in[rank] += per_node;
  }
  for (const auto& [gap, for_job] : evict) {
    if (migrating) {
      // A hole that lasts: on a node whose idle cores, less those any
      // reservation before the job's end takes there, still hold it.
      std::unordered_map<Rank, int> lasting;
      for (const resource::NodeState& node : session.pool().nodes()) {
        lasting[node.rank()] = node.free_cores() - moved_in[node.rank()];
      }
      for (const Promise& p : promised) {
        if (p.time >= expected_end(gap->end_estimate, now)) continue;
        for (const resource::NodeAllocation& part : p.cores.nodes) {
          lasting[part.rank] -= static_cast<int>(part.cores.size());
        }
      }
      const resource::Allocation& now_on = session.allocation_of(*gap);
      const int per_node = now_on.total_cores() / std::max<int>(1, now_on.nodes.size());
      session.set_gap_phase(true);  // a gap job is placed only in the gap phase
      std::optional<resource::Allocation> hole = session.place_on(
          moving(*gap), session.pool(),
          [&](const resource::NodeState& node) { return lasting[node.rank()] >= per_node; });
      session.set_gap_phase(false);
      if (hole) {
        for (const resource::NodeAllocation& part : hole->nodes) {
          moved_in[part.rank] += static_cast<int>(part.cores.size());
          if (auto it = slack.find(part.rank); it != slack.end()) {
            it->second -= static_cast<int>(part.cores.size());
          }
        }
        session.add_decision(Migrate{gap->id, std::move(*hole)});
        continue;
      }
    }
    session.add_decision(Preempt{gap->id, for_job, options_.evict});
  }

  // 2. Gap jobs into whatever is idle now, but not into the cores a start
  // within the deadline counts on (they would be evicted at once), nor
  // where this cycle's moves go.
  // The cores open to them: once none is left (the gap queue usually
  // outgrows the holes) the rest of the queue is not tried.
  auto open_on = [&](const resource::NodeState& node) {
    int open = node.free_cores() - moved_in[node.rank()];
    if (const auto it = slack.find(node.rank()); it != slack.end())
      open = std::min(open, it->second);
    return std::max(open, 0);
  };
  long room = 0;
  for (const resource::NodeState& node : session.pool().nodes()) room += open_on(node);
  session.set_gap_phase(true);
  for (const PendingJob* job : session.ordered_queue()) {
    if (room <= 0) break;
    if (static_cast<long>(job->request.ntasks) * job->request.cpus_per_task > room) continue;
    if (!session.job_ready(*job)) continue;  // not a gap job, or held
    std::optional<resource::Allocation> allocation =
        session.place_on(*job, session.pool(), [&](const resource::NodeState& node) {
          const auto it = slack.find(node.rank());
          return (it == slack.end() || it->second > 0) &&
                 node.free_cores() - moved_in[node.rank()] > 0;
        });
    if (!allocation) continue;
    bool fits = true;
    for (const resource::NodeAllocation& part : allocation->nodes) {
      const int cores = static_cast<int>(part.cores.size());
      const resource::NodeState* node = session.pool().find(part.rank);
      const auto it = slack.find(part.rank);
      fits = fits && (it == slack.end() || it->second >= cores) &&
             node->free_cores() - moved_in[part.rank] >= cores;
    }
    if (!fits) continue;
    for (const resource::NodeAllocation& part : allocation->nodes) {
      if (auto it = slack.find(part.rank); it != slack.end()) {
        it->second -= static_cast<int>(part.cores.size());
      }
      room -= static_cast<long>(part.cores.size());
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
    } else if (name == "mode") {
      if (value != "a" && value != "b") {
        return invalid_argument("scheduler option 'gap.mode': '" + value + "' is not a or b");
      }
      parsed.mode_a = value == "a";
    } else {
      return invalid_argument("unknown scheduler option 'gap." + name +
                              "' (known: save_deadline_s, evict, migrate, mode, slot_s)");
    }
  }
  return std::unique_ptr<Action>(std::make_unique<GapAction>(parsed));
}

}  // namespace hpcq::sched
