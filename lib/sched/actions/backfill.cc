#include "lib/sched/actions/backfill.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "lib/sched/planner.h"

namespace hpcq::sched {
namespace {

// The `count` highest ids below `total` that are free, ascending.
template <typename IsFree>
std::vector<int> highest_free(int total, int count, const IsFree& is_free) {
  std::vector<int> ids;
  for (int id = total - 1; id >= 0 && count > 0; --id) {
    if (is_free(id)) {
      ids.push_back(id);
      --count;
    }
  }
  std::reverse(ids.begin(), ids.end());
  return ids;
}

// The job's requested run time; kForever when it has none.
TimeUs limit_us(const PendingJob& job) {
  if (job.time_limit_s <= 0 || job.time_limit_s > kForever / kUsPerSecond) return kForever;
  return job.time_limit_s * kUsPerSecond;
}

// What decides whether a job can be placed when no predicate looks at the
// job itself (GPUs and gres included: a job asking none is not turned away
// because one of its size waits for GPUs or units).
// Whole nodes too: an --exclusive job's failure says nothing of a job of
// its size that would share a node.
using Shape = std::tuple<int, int, int, std::uint64_t, int, int, std::map<std::string, int>, bool>;

Shape shape_of(const PendingJob& job) {
  const resource::ResourceRequest& r = job.request;
  return {r.nodes,         r.ntasks,        r.cpus_per_task, r.mem_per_node_bytes,
          r.gpus_per_node, r.gpus_per_task, r.gres,          r.exclusive};
}

// One walk over the queue (see backfill.h).
class Walk {
 public:
  Walk(Session& session, BackfillOptions options)
      : session_(session),
        options_(options),
        planner_(session.pool(), session.now()),
        cache_failures_(!session.has_predicates()) {}

  void run() {
    const Snapshot& snapshot = session_.snapshot();
    const std::vector<const PendingJob*>& queue = session_.ordered_queue();
    // Block ids are the reservations' indexes (add_block() counts from 0).
    for (const AdvanceReservation& r : snapshot.reservations) {
      (void)planner_.add_block(r.nodes, r.start, r.end);
    }
    // As resized by an earlier action ("elastic") this cycle: what it holds now.
    for (const RunningJob& job : snapshot.running) {
      // A gap job's cores are free from now: it gives them back the moment
      // it is made to leave (actions/gap.h).
      const bool gap = session_.gap_jobs_separate() && session_.is_gap_queue(job.queue);
      if (gap) {
        planner_.add_release(session_.allocation_of(job), session_.now(), /*grace=*/0);
      } else {
        planner_.add_release(session_.allocation_of(job), job.end_estimate);
      }
    }
    // Jobs that earlier actions started this cycle run until now + their limit.
    std::map<JobId, const resource::Allocation*> taken;
    for (const Decision& decision : session_.decisions().decisions) {
      if (const Start* start = std::get_if<Start>(&decision)) {
        taken.emplace(start->job, &start->allocation);
        started_.insert(start->job);
      }
    }
    if (!taken.empty()) {
      for (const PendingJob* job : queue) {
        const auto it = taken.find(job->id);
        if (it != taken.end()) planner_.add_release(*it->second, end_of(*job));
      }
    }
    const bool unlimited = options_.reservation_depth == BackfillOptions::kUnlimited;
    int reservations = 0;
    for (const PendingJob* job : queue) {
      const bool may_reserve = unlimited || reservations < options_.reservation_depth;
      // Nothing left to start and nothing left to promise.
      if (!may_reserve && planner_.free_cores_now() == 0) break;
      if (started_.contains(job->id)) continue;
      // Not ready (held, over a limit, a gap job outside the gap action):
      // trying it would only cache its shape as failing for the ready jobs.
      if (!session_.job_ready(*job)) continue;
      if (try_start(*job)) continue;
      if (may_reserve && reserve(*job)) ++reservations;
    }
  }

 private:
  TimeUs end_of(const PendingJob& job) const { return add_time(session_.now(), limit_us(job)); }

  // The advance reservations (block ids) that admit the job, in order.
  const std::vector<std::size_t>& admitted(const PendingJob& job) {
    admitted_.clear();
    const std::vector<AdvanceReservation>& reservations = session_.snapshot().reservations;
    for (std::size_t i = 0; i < reservations.size(); ++i) {
      if (reservations[i].admits(job)) admitted_.push_back(i);
    }
    return admitted_;
  }

  // Starts the job now if that takes nothing a reservation needs before the
  // job's end, and no advance reservation that does not admit it.
  bool try_start(const PendingJob& job) {
    const auto need = static_cast<std::int64_t>(job.request.ntasks) * job.request.cpus_per_task;
    if (need > planner_.free_cores_now()) return false;
    const TimeUs end = end_of(job);
    // Restricted: only jobs that end before every promise made so far.
    if (options_.restricted && end > first_promise_) return false;
    const Shape shape = shape_of(job);
    const std::vector<std::size_t>& open = admitted(job);
    // A job admitted to an advance reservation sees other nodes than its
    // shape's failures did.
    const bool cache = cache_failures_ && open.empty();
    if (cache) {
      // Free resources only shrink during the walk and a later end only
      // meets more reservations: the same shape fails again.
      const auto failed = failed_.find(shape);
      if (failed != failed_.end() && end >= failed->second) return false;
    }
    const std::vector<NodeShare> limits = planner_.limits(end, open);
    std::optional<resource::Allocation> allocation =
        limits.empty() ? session_.place(job) : place_within(job, limits);
    if (!allocation) {
      if (cache) failed_[shape] = end;
      return false;
    }
    Statement statement = session_.statement();
    // Placed on the same free cores the working copy has, so this only
    // fails on a bug; skip the job rather than risk a core given twice.
    if (!statement.allocate(job, *allocation).is_ok()) return false;
    statement.commit();
    planner_.start(*allocation, end);
    if (trial_) (void)trial_->allocate(*allocation);
    started_.insert(job.id);
    return true;
  }

  // Places the job on a copy of the free resources in which, on each limited
  // node, everything above the limit (cores, memory, GPUs, gres units) is
  // held back for the reservations.
  // Nodes whose limit is zero are left out instead (cheaper than holding
  // them: a wide reservation limits many nodes to nothing).
  std::optional<resource::Allocation> place_within(const PendingJob& job,
                                                   const std::vector<NodeShare>& limits) {
    if (!trial_) trial_ = session_.pool();
    resource::Allocation held;
    std::vector<Rank> closed;
    for (const NodeShare& limit : limits) {
      const resource::NodeState* node = trial_->find(limit.rank);
      if (node == nullptr) continue;
      if (limit.cores == 0) {
        closed.push_back(limit.rank);  // limits come in rank order
        continue;
      }
      resource::NodeAllocation part;
      part.rank = limit.rank;
      part.node = node->name();
      part.memory_bytes =
          node->free_memory() > limit.memory_bytes ? node->free_memory() - limit.memory_bytes : 0;
      // The highest free ids of cores and GPUs: which ones does not matter
      // to a count-based reservation, and the job then gets the low ones as
      // it would anyway.
      part.cores = highest_free(node->total_cores(), node->free_cores() - limit.cores,
                                [node](int core) { return node->core_free(core); });
      part.gpus = highest_free(node->total_gpus(), node->free_gpus() - limit.gpus,
                               [node](int gpu) { return node->gpu_free(gpu); });
      for (const auto& [name, least] : limit.gres) {
        const int units = node->free_gres(name) - least;
        if (units > 0) part.gres.emplace(name, units);
      }
      if (!part.cores.empty() || part.memory_bytes > 0 || !part.gpus.empty() ||
          !part.gres.empty()) {
        held.nodes.push_back(std::move(part));
      }
    }
    if (!held.empty() && !trial_->allocate(held).is_ok()) return std::nullopt;
    NodeFilterFn open;
    if (!closed.empty()) {
      open = [&closed](const resource::NodeState& node) {
        return !std::binary_search(closed.begin(), closed.end(), node.rank());
      };
    }
    std::optional<resource::Allocation> allocation = session_.place_on(job, *trial_, open);
    if (!held.empty()) (void)trial_->release(held);
    return allocation;
  }

  // Promises the job the earliest slot that delays no earlier reservation.
  bool reserve(const PendingJob& job) {
    if (!session_.fits_when_idle(job)) return false;  // waiting cannot help it
    const TimeUs duration = limit_us(job);
    std::optional<Slot> slot = planner_.earliest(session_.request_of(job), duration,
                                                 session_.candidates_any_time(job), admitted(job));
    if (!slot) return false;
    planner_.reserve(slot->nodes, slot->start, add_time(slot->start, duration));
    session_.add_decision(Reserve{job.id, slot->start});
    first_promise_ = std::min(first_promise_, slot->start);
    return true;
  }

  Session& session_;
  const BackfillOptions options_;
  Planner planner_;
  const bool cache_failures_;
  std::unordered_set<JobId> started_;
  // Shape -> the earliest end at which it failed to start now.
  std::map<Shape, TimeUs> failed_;
  std::vector<std::size_t> admitted_;  // admitted()'s answer, reused
  // The earliest start promised this walk (restricted backfilling).
  TimeUs first_promise_ = std::numeric_limits<TimeUs>::max();
  // The working copy with this walk's starts, made on the first limited
  // placement.
  std::optional<resource::NodePool> trial_;
};

}  // namespace

Result<std::unique_ptr<Action>> BackfillAction::create(const ActionOptions& options) {
  BackfillOptions parsed;
  for (const auto& [name, value] : options) {
    if (name == kRestricted) {
      if (value != "true" && value != "false") {
        return invalid_argument("scheduler option 'backfill.restricted': '" + value +
                                "' is not true or false");
      }
      parsed.restricted = value == "true";
      continue;
    }
    if (name != kReservationDepth) {
      return invalid_argument("unknown scheduler option 'backfill." + name +
                              "' (known: reservation_depth, restricted)");
    }
    if (value == "unlimited") {
      parsed.reservation_depth = BackfillOptions::kUnlimited;
      continue;
    }
    int depth = 0;
    const char* last = value.data() + value.size();
    const auto [end, error] = std::from_chars(value.data(), last, depth);
    if (value.empty() || error != std::errc() || end != last || depth < -1) {
      return invalid_argument("scheduler option 'backfill.reservation_depth': '" + value +
                              "' is not a reservation count (N >= 1; 0, -1 or unlimited for all)");
    }
    parsed.reservation_depth = depth <= 0 ? BackfillOptions::kUnlimited : depth;
  }
  return std::unique_ptr<Action>(std::make_unique<BackfillAction>(parsed));
}

void BackfillAction::execute(Session& session) {
  if (session.snapshot().pool == nullptr) return;
  Walk(session, options_).run();
}

}  // namespace hpcq::sched
