#include "daemon/sched_driver.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <map>

#include "lib/job/job_env.h"
#include "lib/resource/granularity.h"
#include "lib/store/store.h"

namespace hpcq::daemon {
namespace {

// What the scheduler needs to know of a job (pending or running).
sched::PendingJob pending_of(const job::Job& job) {
  sched::PendingJob p;
  p.id = job.id;
  p.uid = job.uid;
  p.submit_time = job.submit_time;
  p.request = job.spec.request;
  p.time_limit_s = job.spec.time_limit_s;
  p.queue = job.spec.queue;
  p.account = job.spec.account;
  p.qos = job.spec.qos;
  p.priority = job.spec.priority;
  // validate() let only known words through.
  if (!job.spec.profile.empty()) p.profile = resource::parse_profile(job.spec.profile);
  p.workers = job.spec.workers;
  p.max_nodes = job.spec.max_nodes;
  p.elastic = job.spec.elastic;
  p.licenses = job.spec.licenses;
  return p;
}

}  // namespace

Status SchedDriver::configure() {
  auto scheduler = sched::Scheduler::create(
      {ctx_.config.actions, ctx_.config.plugins, ctx_.config.scheduler_options});
  if (!scheduler.is_ok()) return scheduler.status();
  scheduler_ = std::make_unique<sched::Scheduler>(std::move(scheduler).value());
  frees_resources_ =
      std::any_of(ctx_.config.actions.begin(), ctx_.config.actions.end(),
                  [](const auto& a) { return a == "preempt" || a == "reclaim" || a == "elastic"; });
  elastic_action_ = std::find(ctx_.config.actions.begin(), ctx_.config.actions.end(), "elastic") !=
                    ctx_.config.actions.end();
  if (std::find(ctx_.config.plugins.begin(), ctx_.config.plugins.end(), "priority") !=
      ctx_.config.plugins.end()) {
    sched::PluginOptions options;
    for (const auto& [key, value] : ctx_.config.scheduler_options) {
      if (key.starts_with("priority.")) options[key.substr(9)] = value;
    }
    auto weights = sched::parse_multifactor_options(options);  // create() accepted them
    if (!weights.is_ok()) return weights.status();
    priority_weights_ = *weights;
  }

  return Status::ok();
}

bool SchedDriver::wants_periodic_cycle() const {
  return elastic_action_ && !ctx_.table.running().empty();
}

// Whether a running elastic job is below its maximum and could grow: the
// "elastic" action has work even with an empty queue.
bool SchedDriver::may_expand() const {
  if (!elastic_action_) return false;
  for (JobId id : ctx_.table.running()) {
    const job::Job& job = ctx_.table.at(id).job;
    if (job.spec.elastic && static_cast<int>(job.allocation.nodes.size()) < job.spec.max_nodes) {
      return true;
    }
  }
  return false;
}

bool SchedDriver::wants_full_cycle() const {
  return ctx_.table.pending().size() > static_cast<std::size_t>(ctx_.config.queue_depth);
}

void SchedDriver::run_cycle(bool full) {
  if (ctx_.table.pending().empty() && !may_expand()) return;
  // Nothing can start while no node has a free core: a queue of 100k jobs
  // behind a full or drained cluster then costs nothing per submission.
  // Actions that free resources (preempt, reclaim) still have work to do.
  bool room = std::any_of(
      ctx_.pool.nodes().begin(), ctx_.pool.nodes().end(),
      [](const resource::NodeState& n) { return n.schedulable() && n.free_cores() > 0; });
  if (!room && !frees_resources_) return;
  const auto start = std::chrono::steady_clock::now();
  sched::Snapshot snapshot;
  snapshot.now = ctx_.now();
  snapshot.pool = &ctx_.pool;
  snapshot.site = &ctx_.config.site;
  snapshot.usage = &ctx_.usage;
  snapshot.reservations = current_reservations();
  fill_queue(snapshot, static_cast<std::size_t>(
                           full ? std::max(ctx_.config.full_queue_depth, ctx_.config.queue_depth)
                                : ctx_.config.queue_depth));
  fill_running(snapshot);
  sched::Decisions decisions = scheduler_->cycle(snapshot);
  apply_decisions(decisions);
  if (ctx_.decision_log) ctx_.decision_log->flush();
  ctx_.metrics.scheduling_cycle(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void SchedDriver::fill_queue(sched::Snapshot& snapshot, std::size_t depth) {
  // A cycle looks at the first `depth` pending jobs, so its cost does not
  // grow with the queue: a cycle on each event few (queue_depth, as Slurm's
  // default_queue_depth), a full cycle now and then more. Building each
  // job's view is most of a cycle's cost: 0.95 ms a cycle with 1,000 shown
  // against 0.33 ms with 100 (2,000 API jobs on 4 x 2 cores). An array's
  // tasks beyond its throttle (--array=...%N) are not shown.
  std::map<JobId, int> array_shown;
  std::vector<JobId> shown;
  snapshot.queue.reserve(std::min(depth, ctx_.table.pending().size()));
  // Whether to look further: false once the snapshot's queue is full.
  auto consider = [&](JobId id) {
    JobEntry& entry = ctx_.table.at(id);
    const job::Job& job = entry.job;
    if (entry.yields_to != 0) {
      const JobEntry* preemptor = ctx_.table.find(entry.yields_to);
      if (preemptor != nullptr && preemptor->job.state == job::JobState::kPending &&
          !preemptor->job.held) {
        return true;
      }
      entry.yields_to = 0;
    }
    if (job.spec.array_max_running > 0) {
      int& more = array_shown[job.spec.array_job_id];
      // What queue shows for it (Slurm's JobArrayTaskLimit); not stored.
      constexpr std::string_view kThrottled = "array throttle: ";
      if (ctx_.table.array_running(job.spec.array_job_id) + more >= job.spec.array_max_running) {
        if (!job.reason.starts_with(kThrottled)) {
          entry.job.reason = std::string(kThrottled) + "at most " +
                             std::to_string(job.spec.array_max_running) + " running";
        }
        return true;
      }
      if (job.reason.starts_with(kThrottled)) entry.job.reason.clear();
      ++more;
    }
    snapshot.queue.push_back(pending_of(job));
    if (!entry.restore_from.empty()) {
      snapshot.queue.back().nodelist = entry.restore_to;
    } else {
      snapshot.queue.back().nodelist = job_eligible_ranks(ctx_.nodes, ctx_.config.site, job.spec);
    }
    if (ctx_.decision_log) shown.push_back(id);
    return snapshot.queue.size() < depth;
  };
  // In queue order the walk stops after queue_depth jobs, so a cycle costs
  // the same with 1k or 100k queued; only an order by priority must look
  // at every pending job.
  if (priority_weights_ && ctx_.table.pending().size() > depth) {
    for (JobId id : priority_window(snapshot, depth)) {
      if (!consider(id)) break;
    }
  } else {
    for (const auto& [submit_time, id] : ctx_.table.pending()) {
      if (!consider(id)) break;
    }
  }
  if (ctx_.decision_log) ctx_.decision_log->cycle(snapshot.now, shown);
}

void SchedDriver::fill_running(sched::Snapshot& snapshot) {
  for (JobId id : ctx_.table.running()) {
    const JobEntry& entry = ctx_.table.at(id);
    const job::Job& job = entry.job;
    // A job without a limit (0 after submit) is expected to run for ever.
    TimeUs end = job.spec.time_limit_s > 0 ? job.start_time + job.spec.time_limit_s * kUsPerSecond
                                           : std::numeric_limits<TimeUs>::max();
    snapshot.running.push_back(sched::running_from(
        pending_of(job), entry.cores_handed_over ? without_cores(job.allocation) : job.allocation,
        job.start_time, end));
    // The rescale gap counts from the last resize's outcome; a job with a
    // resize in flight (or parts still being taken away) is not resized
    // again, which a gap starting now says to the "elastic" action.
    snapshot.running.back().last_resize = entry.resizing || !entry.removing.empty()
                                              ? snapshot.now
                                              : std::max(job.start_time, entry.last_resize);
    snapshot.running.back().leaving =
        entry.preempted.has_value() || entry.cancel_requested || entry.allocation_ended;
    if (entry.preempted && entry.checkpointing) {
      snapshot.running.back().moving_to = ranks_of(ctx_.nodes, entry.checkpointing->record.to);
    }
  }
}

void SchedDriver::apply_decisions(sched::Decisions& decisions) {
  // A Shrink only asks the application: the nodes come free once it has
  // acknowledged, so a Start of this cycle that counted on them is refused
  // by the pool and the job waits for a later cycle.
  bool shrink_asked = false;
  for (auto& decision : decisions.decisions) {
    if (auto* start = std::get_if<sched::Start>(&decision)) {
      JobEntry* entry = ctx_.table.find(start->job);
      if (entry == nullptr || entry->job.state != job::JobState::kPending) continue;
      start_job(*entry, std::move(start->allocation), shrink_asked);
    } else if (auto* preempt = std::get_if<sched::Preempt>(&decision)) {
      apply_preempt(*preempt);
    } else if (auto* migrate = std::get_if<sched::Migrate>(&decision)) {
      apply_migrate(*migrate);
    } else if (auto* shrink = std::get_if<sched::Shrink>(&decision)) {
      JobEntry* entry = ctx_.table.find(shrink->job);
      if (entry == nullptr) continue;
      Status asked =
          resizes_.begin_shrink(*entry, shrink->nodes, job::ResizeBy::kScheduler, nullptr);
      if (!asked.is_ok()) {
        spdlog::info("job {}: shrink not asked: {}", shrink->job, asked.message());
      } else {
        shrink_asked = true;
      }
    } else if (auto* expand = std::get_if<sched::Expand>(&decision)) {
      JobEntry* entry = ctx_.table.find(expand->job);
      if (entry == nullptr) continue;
      Status asked = resizes_.begin_expand(*entry, std::move(expand->allocation),
                                           job::ResizeBy::kScheduler, nullptr);
      if (!asked.is_ok()) spdlog::info("job {}: expand not done: {}", expand->job, asked.message());
    }
  }
}

std::vector<JobId> SchedDriver::priority_window(const sched::Snapshot& snapshot,
                                                std::size_t depth) {
  std::vector<JobId> ids;
  ids.reserve(ctx_.table.pending().size());
  for (const auto& [submit_time, id] : ctx_.table.pending()) ids.push_back(id);
  // Some slack over the depth: array tasks beyond their throttle are
  // skipped after this.
  depth = std::min(ids.size(), depth * 2);
  // O(pending): every pending job's priority, then the best `depth` of them
  // in (priority, submit time, id) order.
  std::vector<sched::PendingJob> pending;
  pending.reserve(ids.size());
  std::vector<sched::FairShareTree::Key> seen;
  for (JobId id : ids) {
    pending.push_back(pending_of(ctx_.table.at(id).job));
    seen.emplace_back(pending.back().uid, pending.back().account);
  }
  const sched::FairShareTree tree =
      sched::FairShareTree::compute(snapshot.site, snapshot.usage, snapshot.now, seen);
  const sched::MultifactorPriority multifactor(snapshot, *priority_weights_, &tree);
  std::vector<std::pair<double, std::size_t>> ranked;
  ranked.reserve(pending.size());
  for (std::size_t i = 0; i < pending.size(); ++i) {
    ranked.emplace_back(multifactor.priority(pending[i]), i);  // ids are in queue order
  }
  auto better = [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  std::nth_element(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(depth),
                   ranked.end(), better);
  ranked.resize(depth);
  std::sort(ranked.begin(), ranked.end(), better);
  std::vector<JobId> window;
  window.reserve(depth);
  for (const auto& [priority, index] : ranked) window.push_back(ids[index]);
  return window;
}

JobEntry* SchedDriver::stoppable(JobId id) {
  JobEntry* entry = ctx_.table.find(id);
  if (entry == nullptr || entry->job.state != job::JobState::kRunning || entry->preempted ||
      entry->cancel_requested || entry->allocation_ended) {
    return nullptr;
  }
  return entry;
}

void SchedDriver::leave_by_checkpoint(JobEntry& entry, job::Preemption preemption,
                                      const std::vector<std::string>& to) {
  Status begun = checkpoints_.begin_checkpoint(entry, job::CheckpointThen::kRequeue, nullptr, to);
  entry.preempted = preemption;
  if (begun.is_ok()) {
    checkpoints_.hand_over_cores(entry);
    return;
  }
  spdlog::info("job {}: not checkpointed ({}): requeued from its last good checkpoint or the start",
               entry.job.id, begun.message());
  actions_.kill_job_parts(entry);
}

void SchedDriver::apply_preempt(const sched::Preempt& preempt) {
  JobEntry* entry = stoppable(preempt.job);
  if (entry == nullptr) return;
  spdlog::info("job {}: preempted ({}) for job {}", entry->job.id, preempt_mode_name(preempt.mode),
               preempt.for_job);
  const job::Preemption preemption{preempt.for_job, preempt.mode};
  if (preempt.mode == PreemptMode::kCheckpoint) {
    // Its work is kept: dumped, requeued and restored where it next starts
    // (finish_checkpoint).
    leave_by_checkpoint(*entry, preemption, {});
    return;
  }
  entry->preempted = preemption;
  // The whole job, on every node; its resources come back when every part
  // has reported its end.
  actions_.kill_job_parts(*entry);
}

// The gap action's move to a hole that lasts: checkpointed and requeued with
// the hole's nodes as its restore target (as `migrate --to`), where the
// action then restores it (the job comes early in the queue's order). It
// leaves its cores as a preempted job does: a failed dump still requeues it.
void SchedDriver::apply_migrate(const sched::Migrate& migrate) {
  JobEntry* entry = stoppable(migrate.job);
  if (entry == nullptr) return;
  std::vector<std::string> to;
  for (const auto& part : migrate.allocation.nodes) to.push_back(part.node);
  spdlog::info("job {}: moved to a lasting hole on {}", entry->job.id, fmt::join(to, ","));
  leave_by_checkpoint(*entry, job::Preemption{0, PreemptMode::kCheckpoint}, to);
}

std::vector<sched::AdvanceReservation> SchedDriver::current_reservations() {
  std::vector<sched::AdvanceReservation> out;
  const TimeUs t = ctx_.now();
  for (auto it = ctx_.reservations.begin(); it != ctx_.reservations.end();) {
    const Reservation& r = it->second;
    if (r.end <= t) {
      spdlog::info("reservation {}: ended", r.name);
      store::WriteBatch batch;
      batch.delete_record("reservation", r.name);
      ctx_.committer->submit(std::move(batch), [name = r.name](Status s) {
        if (!s.is_ok()) spdlog::error("reservation {}: store: {}", name, s.message());
      });
      it = ctx_.reservations.erase(it);
      continue;
    }
    sched::AdvanceReservation a;
    a.name = r.name;
    for (const std::string& node : r.nodes) {
      for (const auto& [rank, entry] : ctx_.nodes) {
        if (entry.name == node) a.nodes.push_back(rank);
      }
    }
    a.start = r.start;
    a.end = r.end;
    a.uids = r.uids;
    a.accounts = r.accounts;
    out.push_back(std::move(a));
    ++it;
  }
  return out;
}

void SchedDriver::start_job(JobEntry& entry, resource::Allocation allocation, bool after_shrink) {
  job::Job& job = entry.job;
  Status taken = ctx_.pool.allocate(allocation);
  if (!taken.is_ok() && after_shrink) {
    spdlog::info("job {}: waits for the nodes a shrink is asking for", job.id);
    return;
  }
  if (!taken.is_ok()) {
    // The scheduler proposed cores that are not free: a bug, never a double allocation.
    spdlog::error("job {}: scheduler decision refused: {}", job.id, taken.message());
    return;
  }
  const TimeUs started = ctx_.now();
  if (ctx_.decision_log) {
    const TimeUs end = job.spec.time_limit_s > 0 ? started + job.spec.time_limit_s * kUsPerSecond
                                                 : std::numeric_limits<TimeUs>::max();
    ctx_.decision_log->start(started, job.id, end, allocation);
  }
  const job::Effects effects = ctx_.table.start(entry, std::move(allocation), started);
  ctx_.metrics.job_started(entry.job.spec.queue);
  entry.kill_sent = false;
  entry.launched = false;
  entry.started_on.clear();
  entry.held_on.clear();
  for (const auto& a : job.allocation.nodes) entry.held_on.insert(a.rank);
  entry.resizing.reset();
  entry.resize_seq = 0;
  entry.last_resize = job.start_time;
  entry.usage_from = job.start_time;
  entry.part_of.clear();
  entry.removing.clear();

  overlay::Launch launch = actions_.make_launch(job);
  entry.restoring = !entry.restore_from.empty();
  entry.restored_image = entry.restore_from;
  if (entry.restoring) {
    // Restored, not started: once. A failed restore runs it from the start.
    launch.set_restore_from(entry.restore_from);
    for (std::size_t i : job::mark_restored(entry.checkpoints, entry.restore_from)) {
      actions_.persist_checkpoint(entry, i);
    }
    entry.restore_from.clear();
  }
  entry.restore_to.clear();
  actions_.open_placement(entry);

  actions_.apply(effects);  // published; --dependency=after goes on
  entry.launch = std::make_shared<const overlay::Launch>(launch);
  // The Launch goes out only once the start is committed: a job an agent
  // runs is then RUNNING in the store, so a restarted leader adopts it and
  // never schedules it a second time.
  const JobId id = job.id;
  const int attempt = job.requeue_count;
  store::WriteBatch batch;
  batch.update_job(job);
  batch.append_event(job.id, ctx_.now(), "start", "{}");
  ctx_.committer->submit(std::move(batch), [this, id, attempt](Status s) {
    if (!s.is_ok()) spdlog::error("job {}: store update failed: {}", id, s.message());
    ctx_.loop.post([this, id, attempt] { actions_.send_launches(id, attempt); });
  });
  spdlog::info("job {}: started on {}", job.id, job::nodelist(job.allocation));
}

}  // namespace hpcq::daemon
