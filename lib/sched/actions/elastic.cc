#include "lib/sched/actions/elastic.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <unordered_set>
#include <vector>

#include "lib/sched/actions/preempt.h"
#include "lib/sched/resize.h"

namespace hpcq::sched {
namespace {

// What orders jobs in this policy (see elastic.h).
struct Standing {
  std::int32_t priority = 0;
  TimeUs submit_time = 0;
  JobId id = 0;
};

bool higher(const Standing& a, const Standing& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.submit_time != b.submit_time) return a.submit_time < b.submit_time;
  return a.id < b.id;
}

template <typename Job>
Standing standing(const Job& job) {
  return {job.priority, job.submit_time, job.id};
}

// One walk entry: a pending job to start or a running elastic job to expand.
struct Entry {
  Standing standing;
  const PendingJob* pending = nullptr;
  const RunningJob* running = nullptr;
};

class Walk {
 public:
  Walk(Session& session, ElasticOptions options) : session_(session), options_(options) {}

  void run() {
    const Snapshot& snapshot = session_.snapshot();
    std::unordered_set<JobId> started;
    for (const Decision& decision : session_.decisions().decisions) {
      if (const Start* start = std::get_if<Start>(&decision)) started.insert(start->job);
    }
    std::vector<Entry> walk;
    walk.reserve(snapshot.queue.size() + snapshot.running.size());
    for (const PendingJob& job : snapshot.queue) {
      if (started.contains(job.id) || !session_.job_ready(job)) continue;
      walk.push_back({standing(job), &job, nullptr});
    }
    for (const RunningJob& job : snapshot.running) {
      if (job.elastic && has_node_range(job)) walk.push_back({standing(job), nullptr, &job});
    }
    std::sort(walk.begin(), walk.end(),
              [](const Entry& a, const Entry& b) { return higher(a.standing, b.standing); });
    for (const Entry& entry : walk) {
      if (entry.pending != nullptr) {
        (void)admit(*entry.pending);
      } else {
        expand(*entry.running);
      }
    }
  }

 private:
  // Resizable now: elastic with a range, not resized this cycle, and its
  // rescale gap since the last resize (or start) is over.
  bool may_resize(const RunningJob& job) const {
    return job.elastic && has_node_range(job) && !resized_.contains(job.id) &&
           session_.now() - job.last_resize >= options_.rescale_gap;
  }

  // How many nodes of `pool` could take one node's share of a range job
  // (cores and memory free; predicates and reservations as for place()).
  int nodes_that_fit(const PendingJob& job, const resource::NodePool& pool,
                     const NodeFilterFn& usable) const {
    const resource::ResourceRequest& r = job.request;
    const int cores = r.ntasks / r.nodes * r.cpus_per_task;
    const std::uint64_t memory = r.mem_per_node_bytes > 0
                                     ? r.mem_per_node_bytes
                                     : r.mem_per_cpu_bytes * static_cast<std::uint64_t>(cores);
    int n = 0;
    for (const resource::NodeState* candidate : session_.candidates(job)) {
      const resource::NodeState* node = pool.find(candidate->rank());
      if (node == nullptr || (usable && !usable(*node))) continue;
      if (node->free_cores() >= cores && node->free_memory() >= memory) ++n;
    }
    return n;
  }

  // Where the job fits on `pool` (nodes `usable` accepts): a range job at
  // the largest size in [lo, hi] that fits, stored in *size; a job without
  // a range (lo == 0) as requested.
  std::optional<resource::Allocation> fit(const PendingJob& job, const resource::NodePool& pool,
                                          int lo, int hi, const NodeFilterFn& usable,
                                          int* size) const {
    *size = 0;
    if (lo == 0) return session_.place_on(job, pool, usable);
    // An upper bound first, so that a full cluster costs one count, not one
    // placement per size (oversubscribed cores need not be free: no bound).
    const int upper =
        job.request.oversubscribe ? hi : std::min(hi, nodes_that_fit(job, pool, usable));
    PendingJob sized = job;
    for (int n = upper; n >= lo; --n) {
      sized.request = request_at(job.request, n);
      std::optional<resource::Allocation> allocation = session_.place_on(sized, pool, usable);
      if (allocation) {
        *size = n;
        return allocation;
      }
    }
    return std::nullopt;
  }

  bool start(const PendingJob& job, int size, resource::Allocation allocation) {
    PendingJob sized = job;
    if (size > 0) sized.request = request_at(job.request, size);
    Statement statement = session_.statement();
    // Placed on the working copy (with the shrinks applied), so this only
    // fails on a bug; leave the job waiting rather than give a core twice.
    if (!statement.allocate(sized, std::move(allocation)).is_ok()) return false;
    statement.commit();
    // Out of the rest of the cycle: "allocate" after this action walks the
    // whole queue and would start it a second time.
    session_.hold(job.id);
    return true;
  }

  // Starts the job on what is free, else by shrinking lower-priority elastic
  // jobs (elastic.h); false when it waits.
  bool admit(const PendingJob& job) {
    const bool range = has_node_range(job);
    const int lo = range ? job.request.nodes : 0;
    const int hi = range ? job.max_nodes : 0;
    int size = 0;
    std::optional<resource::Allocation> now = fit(job, session_.pool(), lo, hi, {}, &size);
    if (now) return start(job, size, std::move(*now));
    PendingJob smallest = job;
    if (range) smallest.request = request_at(job.request, lo);
    if (!session_.fits_when_idle(smallest)) return false;  // waiting cannot help it

    // Lowest standing first: the newest of equal priority before the oldest.
    std::vector<const RunningJob*> victims;
    for (const RunningJob& r : session_.snapshot().running) {
      if (r.priority <= job.priority && may_resize(r) && r.nodes() > r.request.nodes) {
        victims.push_back(&r);
      }
    }
    if (victims.empty()) return false;
    std::sort(victims.begin(), victims.end(), [](const RunningJob* a, const RunningJob* b) {
      return higher(standing(*b), standing(*a));
    });

    // Take victims' last nodes in a trial copy until the job fits at its
    // maximum or every victim is down to its minimum.
    resource::NodePool trial = session_.pool();
    std::vector<std::pair<const RunningJob*, Rank>> taken;
    int unused = 0;
    const auto fits_at_max = [&] { return fit(job, trial, hi, hi, {}, &unused).has_value(); };
    bool enough = fits_at_max();
    for (const RunningJob* victim : victims) {
      if (enough) break;
      const resource::Allocation& held = victim->allocation;
      int spare = victim->nodes() - victim->request.nodes;
      for (std::size_t i = held.nodes.size(); i-- > 0 && spare > 0 && !enough; --spare) {
        const Rank rank = held.nodes[i].rank;
        if (!trial.release(parts_on(held, std::span<const Rank>(&rank, 1))).is_ok()) return false;
        taken.emplace_back(victim, rank);
        enough = fits_at_max();
      }
    }
    std::optional<resource::Allocation> placed = fit(job, trial, lo, hi, {}, &size);
    if (!placed) return false;  // a gang: nobody is shrunk for a job that still cannot start

    // Shrink only what the job's placement uses, in victim order.
    for (const RunningJob* victim : victims) {
      std::vector<Rank> ranks;
      for (const auto& [owner, rank] : taken) {
        if (owner != victim) continue;
        const bool used = std::any_of(placed->nodes.begin(), placed->nodes.end(),
                                      [r = rank](const auto& part) { return part.rank == r; });
        if (used) ranks.push_back(rank);
      }
      if (ranks.empty()) continue;
      if (!session_.shrink(*victim, ranks).is_ok()) return false;  // only on a bug
      resized_.insert(victim->id);
    }
    return start(job, size, std::move(*placed));
  }

  // Grows a running elastic job on free nodes it does not have, up to its
  // maximum.
  void expand(const RunningJob& job) {
    if (!may_resize(job)) return;
    const resource::Allocation& held = session_.allocation_of(job);
    const int want = job.max_nodes - static_cast<int>(held.nodes.size());
    if (want <= 0) return;
    const NodeFilterFn elsewhere = [&held](const resource::NodeState& node) {
      return std::none_of(held.nodes.begin(), held.nodes.end(),
                          [&node](const auto& part) { return part.rank == node.rank(); });
    };
    int added = 0;
    std::optional<resource::Allocation> more =
        fit(as_pending(job), session_.pool(), 1, want, elsewhere, &added);
    if (!more) return;
    if (session_.expand(job, std::move(*more)).is_ok()) resized_.insert(job.id);
  }

  Session& session_;
  const ElasticOptions options_;
  std::unordered_set<JobId> resized_;  // shrunk or expanded this cycle
};

}  // namespace

Result<std::unique_ptr<Action>> ElasticAction::create(const ActionOptions& options) {
  ElasticOptions parsed;
  for (const auto& [name, value] : options) {
    if (name != kRescaleGap) {
      return invalid_argument("unknown scheduler option 'elastic." + name +
                              "' (known: rescale_gap_s)");
    }
    std::int64_t seconds = -1;
    const char* last = value.data() + value.size();
    const auto [end, error] = std::from_chars(value.data(), last, seconds);
    if (value.empty() || error != std::errc() || end != last || seconds < 0 ||
        seconds > std::numeric_limits<TimeUs>::max() / kUsPerSecond) {
      return invalid_argument("scheduler option 'elastic.rescale_gap_s': '" + value +
                              "' is not a number of seconds >= 0");
    }
    parsed.rescale_gap = seconds * kUsPerSecond;
  }
  return std::unique_ptr<Action>(std::make_unique<ElasticAction>(parsed));
}

void ElasticAction::execute(Session& session) {
  if (session.snapshot().pool == nullptr) return;
  Walk(session, options_).run();
}

}  // namespace hpcq::sched
