#include "lib/sched/session.h"

#include <algorithm>
#include <utility>

#include "lib/resource/allocator.h"

namespace hpcq::sched {

Session::Session(const Snapshot& snapshot) : snapshot_(snapshot) {}

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

std::vector<const resource::NodeState*> Session::candidates_in(const PendingJob& job,
                                                               const resource::NodePool& pool,
                                                               const NodeFilterFn& usable) const {
  std::vector<const resource::NodeState*> candidates;
  candidates.reserve(pool.nodes().size());
  for (const resource::NodeState& node : pool.nodes()) {
    if (!node.schedulable() || (usable && !usable(node))) continue;
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
                                                      const resource::NodePool& pool) const {
  return resource::find_allocation(job.request, candidates_in(job, pool));
}

std::optional<resource::Allocation> Session::place_on(const PendingJob& job,
                                                      const resource::NodePool& pool,
                                                      const NodeFilterFn& usable) const {
  return resource::find_allocation(job.request, candidates_in(job, pool, usable));
}

std::optional<resource::Allocation> Session::place(const PendingJob& job) const {
  return place_in(job, pool());
}

bool Session::fits_when_idle(const PendingJob& job) {
  if (!idle_) {
    idle_ = snapshot_.pool != nullptr ? snapshot_.pool->idle_copy() : resource::NodePool();
  }
  return place_in(job, *idle_).has_value();
}

Statement Session::statement() { return Statement(*this); }

Statement::Statement(Statement&& other) noexcept
    : session_(other.session_), starts_(std::move(other.starts_)) {
  other.starts_.clear();
}

Statement::~Statement() { discard(); }

Status Statement::allocate(const PendingJob& job, resource::Allocation allocation) {
  HPCQ_RETURN_IF_ERROR(session_->working().allocate(allocation));
  starts_.push_back({job.id, std::move(allocation)});
  return Status::ok();
}

void Statement::commit() {
  for (Start& start : starts_) session_->decisions_.decisions.emplace_back(std::move(start));
  starts_.clear();
}

void Statement::discard() {
  // Newest first, the reverse of how they were taken.
  for (auto it = starts_.rbegin(); it != starts_.rend(); ++it) {
    // Cannot fail: these exact cores were taken by allocate() and nothing
    // else in the cycle could have released them.
    Status released = session_->working().release(it->allocation);
    (void)released;
  }
  starts_.clear();
}

}  // namespace hpcq::sched
