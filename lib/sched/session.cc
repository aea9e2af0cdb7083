#include "lib/sched/session.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "lib/resource/allocator.h"
#include "lib/sched/resize.h"

namespace hpcq::sched {

namespace {

// When the job ends if it starts now; kNever for no time limit.
constexpr TimeUs kNever = std::numeric_limits<TimeUs>::max();

TimeUs end_if_started(const PendingJob& job, TimeUs now) {
  if (job.time_limit_s <= 0 || job.time_limit_s > (kNever - now) / kUsPerSecond) return kNever;
  return now + job.time_limit_s * kUsPerSecond;
}

}  // namespace

Session::Session(const Snapshot& snapshot) : snapshot_(snapshot) {
  for (const AdvanceReservation& r : snapshot_.reservations) {
    if (r.end <= snapshot_.now) continue;  // over: no effect
    for (Rank rank : r.nodes) reserved_[rank].push_back(&r);
  }
  nodelists_ = std::any_of(snapshot_.queue.begin(), snapshot_.queue.end(),
                           [](const PendingJob& job) { return !job.nodelist.empty(); });
}

void Session::add_job_order(std::string plugin, JobOrderFn fn) {
  job_order_.push_back({std::move(plugin), std::move(fn)});
  ordered_.reset();
}

void Session::add_predicate(std::string plugin, PredicateFn fn) {
  predicates_.push_back({std::move(plugin), std::move(fn)});
}

void Session::add_node_score(std::string plugin, NodeScoreFn fn) {
  node_scores_.push_back({std::move(plugin), std::move(fn)});
}

void Session::add_job_ready(std::string plugin, JobReadyFn fn) {
  job_ready_.push_back({std::move(plugin), std::move(fn)});
}

void Session::add_allocatable(std::string plugin, AllocatableFn fn) {
  allocatable_.push_back({std::move(plugin), std::move(fn)});
}

void Session::add_on_allocate(std::string plugin, AllocationEventFn fn) {
  on_allocate_.push_back({std::move(plugin), std::move(fn)});
}

void Session::add_on_deallocate(std::string plugin, AllocationEventFn fn) {
  on_deallocate_.push_back({std::move(plugin), std::move(fn)});
}

void Session::add_job_enqueueable(std::string plugin, JobReadyFn fn) {
  enqueueable_.push_back({std::move(plugin), std::move(fn)});
}

void Session::add_on_enqueue(std::string plugin, JobEventFn fn) {
  on_enqueue_.push_back({std::move(plugin), std::move(fn)});
}

void Session::add_shape(std::string plugin, ShapeFn fn) {
  shape_.push_back({std::move(plugin), std::move(fn)});
}

void Session::add_placed(std::string plugin, PlacedFn fn) {
  placed_.push_back({std::move(plugin), std::move(fn)});
}

resource::ResourceRequest Session::request_of(const PendingJob& job) const {
  resource::ResourceRequest request = job.request;
  for (const auto& hook : shape_) hook.fn(job, request);
  return request;
}

bool Session::is_gap_queue(const std::string& queue) const {
  if (snapshot_.site == nullptr) return false;
  const QueueConfig* q = snapshot_.site->find_queue(queue);
  return q != nullptr && q->migratable;
}

bool Session::job_ready(const PendingJob& job) const {
  if (held_.contains(job.id)) return false;
  if (gap_separate_ && is_gap_queue(job.queue) != gap_phase_) return false;
  return std::all_of(job_ready_.begin(), job_ready_.end(),
                     [&](const auto& hook) { return hook.fn(job); });
}

bool Session::allocatable(const PendingJob& job, const resource::Allocation& allocation) const {
  return std::all_of(allocatable_.begin(), allocatable_.end(),
                     [&](const auto& hook) { return hook.fn(job, allocation); });
}

bool Session::job_enqueueable(const PendingJob& job) const {
  return std::all_of(enqueueable_.begin(), enqueueable_.end(),
                     [&](const auto& hook) { return hook.fn(job); });
}

void Session::job_enqueued(const PendingJob& job) {
  for (const auto& hook : on_enqueue_) hook.fn(job);
}

void Session::hold(JobId job) { held_.insert(job); }

bool Session::held(JobId job) const { return held_.contains(job); }

QueueShare* Session::queue_share(std::string_view queue) {
  for (QueueShare& share : queue_shares_) {
    if (share.queue == queue) return &share;
  }
  return nullptr;
}

const QueueShare* Session::queue_share(std::string_view queue) const {
  for (const QueueShare& share : queue_shares_) {
    if (share.queue == queue) return &share;
  }
  return nullptr;
}

bool Session::reservations_allow(const PendingJob& job, Rank rank) const {
  const auto it = reserved_.find(rank);
  if (it == reserved_.end()) return true;
  const TimeUs now = snapshot_.now;
  const TimeUs end = end_if_started(job, now);
  for (const AdvanceReservation* r : it->second) {
    // The reservation keeps everyone else off its nodes for its window (a job
    // may use them before it if it ends by its start, and after it); its own
    // users are not restricted by it at all. The planner applies the same
    // rule to future promises.
    if (r->admits(job)) continue;
    const bool clear = end <= r->start || now >= r->end;
    if (!clear) return false;
  }
  return true;
}

int Session::job_order(const PendingJob& a, const PendingJob& b) const {
  for (const auto& hook : job_order_) {
    const int r = hook.fn(a, b);
    if (r != 0) return r;
  }
  return 0;
}

bool Session::job_before(const PendingJob& a, const PendingJob& b) const {
  for (const auto& hook : job_order_) {
    const int r = hook.fn(a, b);
    if (r != 0) return r < 0;
  }
  // The project-wide tie-break, so that every cycle is reproducible.
  if (a.submit_time != b.submit_time) return a.submit_time < b.submit_time;
  return a.id < b.id;
}

const std::vector<const PendingJob*>& Session::ordered_queue() {
  if (!ordered_) {
    std::vector<const PendingJob*> order;
    order.reserve(snapshot_.queue.size());
    for (const PendingJob& job : snapshot_.queue) order.push_back(&job);
    const auto before = [this](const PendingJob* a, const PendingJob* b) {
      return job_before(*a, *b);
    };
    // The daemon hands the queue over in submit order: one linear check
    // instead of a sort on every cycle.
    if (!std::is_sorted(order.begin(), order.end(), before)) {
      std::stable_sort(order.begin(), order.end(), before);
    }
    ordered_ = std::move(order);
  }
  return *ordered_;
}

const resource::NodePool& Session::pool() const {
  if (working_) return *working_;
  return snapshot_.pool != nullptr ? *snapshot_.pool : empty_;
}

resource::NodePool& Session::working() {
  if (!working_) working_ = pool();
  return *working_;
}

std::vector<const resource::NodeState*> Session::candidates_any_time(const PendingJob& job) const {
  return candidates_in(job, pool(), {}, false);
}

std::vector<const resource::NodeState*> Session::candidates_in(const PendingJob& job,
                                                               const resource::NodePool& pool,
                                                               const NodeFilterFn& usable,
                                                               bool reservations) const {
  std::vector<const resource::NodeState*> candidates;
  if (!job_ready(job)) return candidates;
  candidates.reserve(pool.nodes().size());
  const bool check_reservations = reservations && !reserved_.empty();
  for (const resource::NodeState& node : pool.nodes()) {
    if (!node.schedulable() || (usable && !usable(node))) continue;
    if (!job.nodelist.empty() &&
        !std::binary_search(job.nodelist.begin(), job.nodelist.end(), node.rank())) {
      continue;
    }
    if (check_reservations && !reservations_allow(job, node.rank())) continue;
    // A node with fewer units of a generic resource than the job asks, in
    // all, never holds it: planners' future promises skip it too (what is
    // free now the pool checks).
    const bool has_gres =
        std::all_of(job.request.gres.begin(), job.request.gres.end(), [&](const auto& g) {
          const auto total = node.gres().find(g.first);
          return total != node.gres().end() && total->second >= g.second;
        });
    if (!has_gres) continue;
    const bool allowed = std::all_of(predicates_.begin(), predicates_.end(),
                                     [&](const auto& hook) { return hook.fn(job, node); });
    if (allowed) candidates.push_back(&node);
  }
  if (!node_scores_.empty()) {
    std::vector<std::pair<double, const resource::NodeState*>> scored;
    scored.reserve(candidates.size());
    for (const resource::NodeState* node : candidates) {
      double score = 0;
      for (const auto& hook : node_scores_) score += hook.fn(job, *node);
      scored.emplace_back(score, node);
    }
    std::stable_sort(scored.begin(), scored.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (std::size_t i = 0; i < scored.size(); ++i) candidates[i] = scored[i].second;
  }
  return candidates;
}

std::optional<resource::Allocation> Session::place_in(const PendingJob& job,
                                                      const resource::NodePool& pool,
                                                      const NodeFilterFn& usable) const {
  std::optional<resource::Allocation> allocation =
      resource::find_allocation(request_of(job), candidates_in(job, pool, usable));
  if (!allocation) return std::nullopt;
  for (const auto& hook : placed_) hook.fn(job, *allocation);
  if (!allocatable(job, *allocation)) return std::nullopt;
  return allocation;
}

std::optional<resource::Allocation> Session::place_on(const PendingJob& job,
                                                      const resource::NodePool& pool,
                                                      const NodeFilterFn& usable) const {
  return place_in(job, pool, usable);
}

std::optional<resource::Allocation> Session::place(const PendingJob& job) const {
  return place_in(job, pool());
}

bool Session::fits_when_idle(const PendingJob& job) {
  if (!idle_) {
    idle_ = snapshot_.pool != nullptr ? snapshot_.pool->idle_copy() : resource::NodePool();
  }
  if (!job_ready(job)) return false;
  std::optional<resource::Allocation> allocation =
      resource::find_allocation(request_of(job), candidates_in(job, *idle_, {}, false));
  return allocation && allocatable(job, *allocation);
}

void Session::applied(const PendingJob& job, const resource::Allocation& allocation) {
  for (const auto& hook : on_allocate_) hook.fn(job, allocation);
}

void Session::undone(const PendingJob& job, const resource::Allocation& allocation) {
  for (const auto& hook : on_deallocate_) hook.fn(job, allocation);
}

Statement Session::statement() { return Statement(*this); }

const resource::Allocation& Session::allocation_of(const RunningJob& job) const {
  const auto it = resized_.find(job.id);
  return it != resized_.end() ? it->second : job.allocation;
}

Status Session::shrink(const RunningJob& job, std::span<const Rank> ranks) {
  const resource::Allocation& current = allocation_of(job);
  Result<resource::Allocation> rest = shrunk(current, ranks);
  if (!rest.is_ok()) {
    return invalid_argument("job " + std::to_string(job.id) + ": " + rest.status().message());
  }
  HPCQ_RETURN_IF_ERROR(working().release(parts_on(current, ranks)));
  resized_[job.id] = std::move(rest).value();
  decisions_.decisions.emplace_back(Shrink{job.id, std::vector<Rank>(ranks.begin(), ranks.end())});
  return Status::ok();
}

Status Session::expand(const RunningJob& job, resource::Allocation added) {
  Result<resource::Allocation> grown = expanded(allocation_of(job), added);
  if (!grown.is_ok()) {
    return invalid_argument("job " + std::to_string(job.id) + ": " + grown.status().message());
  }
  HPCQ_RETURN_IF_ERROR(working().allocate(added));
  // The added parts as numbered in the grown allocation (after the job's tasks).
  const std::size_t kept = grown->nodes.size() - added.nodes.size();
  for (std::size_t i = 0; i < added.nodes.size(); ++i) {
    added.nodes[i].first_task = grown->nodes[kept + i].first_task;
  }
  resized_[job.id] = std::move(grown).value();
  decisions_.decisions.emplace_back(Expand{job.id, std::move(added)});
  return Status::ok();
}

Statement::Statement(Statement&& other) noexcept
    : session_(other.session_), starts_(std::move(other.starts_)), jobs_(std::move(other.jobs_)) {
  other.starts_.clear();
  other.jobs_.clear();
}

Statement::~Statement() { discard(); }

Status Statement::allocate(const PendingJob& job, resource::Allocation allocation) {
  const std::string which = "job " + std::to_string(job.id);
  if (!session_->job_ready(job)) {
    return failed_precondition(which + " is not ready to start this cycle");
  }
  for (const resource::NodeAllocation& part : allocation.nodes) {
    if (!session_->reservations_allow(job, part.rank)) {
      return failed_precondition(which + " may not use node " + part.node + " (rank " +
                                 std::to_string(part.rank) + "): an advance reservation holds it");
    }
  }
  if (!session_->allocatable(job, allocation)) {
    return failed_precondition(which + ": a scheduler plugin refused the placement");
  }
  HPCQ_RETURN_IF_ERROR(session_->working().allocate(allocation));
  session_->applied(job, allocation);
  starts_.push_back({job.id, std::move(allocation)});
  jobs_.push_back(job);
  return Status::ok();
}

void Statement::commit() {
  for (Start& start : starts_) session_->decisions_.decisions.emplace_back(std::move(start));
  starts_.clear();
  jobs_.clear();
}

void Statement::discard() {
  // Newest first, the reverse of how they were taken.
  for (std::size_t i = starts_.size(); i-- > 0;) {
    // Cannot fail: these exact cores were taken by allocate() and nothing
    // else in the cycle could have released them.
    Status released = session_->working().release(starts_[i].allocation);
    (void)released;
    session_->undone(jobs_[i], starts_[i].allocation);
  }
  starts_.clear();
  jobs_.clear();
}

}  // namespace hpcq::sched
