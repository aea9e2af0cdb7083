#include "lib/job/job_table.h"

#include <algorithm>
#include <functional>
#include <iterator>

namespace hpcq::job {

namespace {

bool has_singleton(const Job& job) {
  return std::any_of(job.spec.dependencies.begin(), job.spec.dependencies.end(),
                     [](const Dependency& d) { return d.type == DependencyType::kSingleton; });
}

}  // namespace

int JobTableCore::array_running(JobId array_job_id) const {
  auto it = array_running_.find(array_job_id);
  return it == array_running_.end() ? 0 : it->second;
}

Effects JobTableCore::admit(JobRecord& record, TimeUs now) {
  Effects effects{{Effect::Kind::kPublished, record.job.id}};
  watch_deadline(record.job);
  std::set<JobId>& same_name = same_name_[name_key(record.job)].live;
  same_name.insert(record.job.id);
  // Ids are handed out in order but admitted as their commits end: one may
  // come in ahead of a job of its name already queued.
  if (same_name.size() > 1 && *same_name.begin() == record.job.id) {
    block_singleton(*std::next(same_name.begin()), effects);
  }
  if (!record.job.held) make_ready(record, now, effects);
  effects.push_back({Effect::Kind::kSchedule});
  return effects;
}

void JobTableCore::load(JobRecord& record) {
  const Job& job = record.job;
  if (!is_terminal(job.state)) {
    SameName& same = same_name_[name_key(job)];
    same.live.insert(job.id);
    if (job.state == JobState::kRunning) same.running.insert(job.id);
  }
  if (job.state == JobState::kPending && !job.held) loaded_pending_.push_back(job.id);
  if (job.state == JobState::kPending) watch_deadline(job);
  if (job.state != JobState::kRunning) return;
  if (job.spec.array_job_id != 0) ++array_running_[job.spec.array_job_id];
  running_.insert(job.id);
  for (const auto& part : job.allocation.nodes) record.running_on.insert(part.rank);
}

Effects JobTableCore::ready_loaded(TimeUs now) {
  Effects effects;
  for (JobId id : loaded_pending_) {
    JobRecord* loaded = record(id);
    // Cancelled meanwhile as a dependent of one loaded before it.
    if (loaded != nullptr && loaded->job.state == JobState::kPending) {
      make_ready(*loaded, now, effects);
    }
  }
  loaded_pending_.clear();
  return effects;
}

bool JobTableCore::adopts(const JobRecord* record, Rank node, std::uint32_t attempt) {
  return record != nullptr && record->job.state == JobState::kRunning &&
         attempt == static_cast<std::uint32_t>(record->job.requeue_count) &&
         record->running_on.count(node) > 0;
}

std::vector<JobId> JobTableCore::missing_on(Rank node, const std::set<JobId>& reported) const {
  std::vector<JobId> missing;
  for (JobId id : running_) {
    const JobRecord* r = record(id);
    if (r != nullptr && r->running_on.count(node) && !reported.count(id)) missing.push_back(id);
  }
  return missing;
}

Result<Effects> JobTableCore::hold(JobRecord& record, bool held, const std::string& reason,
                                   TimeUs now) {
  Job& job = record.job;
  if (job.state != JobState::kPending) {
    return failed_precondition("job " + std::to_string(job.id) + " is " + state_name(job.state) +
                               ": only pending jobs can be " + (held ? "held" : "released"));
  }
  Effects effects;
  if (job.held == held) return effects;
  job.held = held;
  if (held) {
    dequeue(job, effects);
    job.reason = reason;
  } else {
    job.reason.clear();
    make_ready(record, now, effects);
    effects.push_back({Effect::Kind::kSchedule});
  }
  effects.push_back({Effect::Kind::kStored, job.id, held ? "hold" : "release"});
  return effects;
}

Effects JobTableCore::release_due(TimeUs now) {
  Effects effects;
  while (!deferred_.empty() && deferred_.begin()->first <= now) {
    const JobId id = deferred_.begin()->second;
    deferred_.erase(deferred_.begin());
    JobRecord* due = record(id);
    if (due == nullptr || due->job.state != JobState::kPending || due->job.held) continue;
    if (due->job.reason == kBeginReason) due->job.reason.clear();
    effects.push_back({Effect::Kind::kPublished, id});
    make_ready(*due, now, effects);
  }
  if (!effects.empty()) effects.push_back({Effect::Kind::kSchedule});
  return effects;
}

namespace {

// The last time a job may start and still end by its --deadline: its
// deadline less its time limit (an unlimited job's: the deadline itself).
TimeUs latest_start(const Job& job) {
  const std::int64_t limit_s = std::max<std::int64_t>(job.spec.time_limit_s, 0);
  return job.spec.deadline_us - limit_s * 1'000'000;
}

}  // namespace

void JobTableCore::watch_deadline(const Job& job) {
  if (job.spec.deadline_us != 0) deadlines_.insert({latest_start(job), job.id});
}

Effects JobTableCore::expire_deadlines(TimeUs now) {
  Effects effects;
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const JobId id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    JobRecord* due = record(id);
    if (due == nullptr || due->job.state != JobState::kPending) continue;
    if (latest_start(due->job) > now) {  // its time limit was lowered since
      watch_deadline(due->job);
      continue;
    }
    dequeue(due->job, effects);
    finish_into(*due, JobState::kCancelled, kDeadlineReason, now, now, effects);
  }
  if (!effects.empty()) effects.push_back({Effect::Kind::kSchedule});
  return effects;
}

Result<Effects> JobTableCore::set_begin(JobRecord& record, TimeUs begin_us, TimeUs now) {
  Job& job = record.job;
  if (job.state != JobState::kPending) {
    return failed_precondition("job " + std::to_string(job.id) + " is " + state_name(job.state) +
                               ": only a pending job's begin time can change");
  }
  if (begin_us < 0) return invalid_argument("--begin: before 1970");
  Effects effects;
  dequeue(job, effects);
  job.spec.begin_time_us = begin_us;
  if (job.reason == kBeginReason) job.reason.clear();
  if (!job.held) make_ready(record, now, effects);
  effects.push_back({Effect::Kind::kStored, job.id, "update"});
  effects.push_back({Effect::Kind::kSchedule});
  return effects;
}

Result<Effects> JobTableCore::cancel(JobRecord& record, const std::string& by, TimeUs now) {
  const Job& job = record.job;
  if (is_terminal(job.state)) {
    return failed_precondition("job " + std::to_string(job.id) + " already ended (" +
                               state_name(job.state) + ")");
  }
  Effects effects;
  if (job.state == JobState::kPending) {
    dequeue(job, effects);
    finish_into(record, JobState::kCancelled, "cancelled by " + by, now, now, effects);
    effects.push_back({Effect::Kind::kSchedule});
  } else {
    record.cancel_requested = true;
    record.outcome_reason = "cancelled by " + by;
    effects.push_back({Effect::Kind::kKillParts, job.id});
  }
  return effects;
}

Result<Effects> JobTableCore::requeue_request(JobRecord& record, const std::string& by) {
  const Job& job = record.job;
  if (job.state != JobState::kRunning) {
    return failed_precondition("job " + std::to_string(job.id) + " is " + state_name(job.state) +
                               ": only running jobs can be requeued");
  }
  if (record.cancel_requested || !record.requeue_when_ended.empty() || record.preempted) {
    return failed_precondition("job " + std::to_string(job.id) +
                               " is already ending (cancelled, preempted or requeued)");
  }
  record.requeue_when_ended = "requeued by " + by;
  return Effects{{Effect::Kind::kKillParts, job.id}};
}

Result<Effects> JobTableCore::end_allocation(JobRecord& record, int exit_code) {
  Job& job = record.job;
  const std::string name = "job " + std::to_string(job.id);
  if (!job.spec.batch || !job.spec.script.empty()) {
    return failed_precondition(name + " is not an allocation of hpcq alloc");
  }
  if (job.state != JobState::kRunning) {
    return failed_precondition(name + " is " + state_name(job.state) + ", not running");
  }
  if (record.cancel_requested || record.allocation_ended || !record.requeue_when_ended.empty() ||
      record.preempted) {
    return failed_precondition(name + " is already ending");
  }
  record.allocation_ended = true;
  record.outcome = exit_code == 0 ? JobState::kCompleted : JobState::kFailed;
  record.outcome_reason =
      exit_code == 0 ? "" : "its command exited with code " + std::to_string(exit_code);
  job.exit_code = exit_code;
  return Effects{{Effect::Kind::kKillParts, job.id}};
}

Effects JobTableCore::start(JobRecord& record, resource::Allocation allocation, TimeUs now) {
  Job& job = record.job;
  pending_.erase({job.submit_time, job.id});
  waiting_.erase(job.id);
  running_.insert(job.id);
  if (job.spec.array_job_id != 0) ++array_running_[job.spec.array_job_id];
  job.state = JobState::kRunning;
  job.start_time = now;
  job.allocation = std::move(allocation);
  job.reason.clear();
  job.cpu_time_us = 0;
  job.max_memory_bytes = 0;
  record.outcome = JobState::kCompleted;
  record.outcome_reason.clear();
  record.failure_seen_at.reset();
  record.cancel_requested = false;
  record.allocation_ended = false;
  record.preempted.reset();
  record.requeue_when_ended.clear();
  record.running_on.clear();
  for (const auto& part : job.allocation.nodes) record.running_on.insert(part.rank);
  SameName& same = same_name_[name_key(job)];
  same.live.insert(job.id);
  same.running.insert(job.id);
  const JobId first_of_name = *same.live.begin();
  Effects effects{{Effect::Kind::kPublished, job.id}};
  wake_dependents(job.id, now, effects);  // --dependency=after
  if (first_of_name != job.id) block_singleton(first_of_name, effects);
  return effects;
}

Effects JobTableCore::part_ended(JobRecord& record, Rank rank, JobState end, int exit_code,
                                 const std::string& reason) {
  Effects effects;
  record.running_on.erase(rank);
  // Its parts were killed because its command ended, which decided.
  if (record.allocation_ended) return effects;
  const std::vector<resource::NodeAllocation>& nodes = record.job.allocation.nodes;
  if (record.job.spec.batch && !nodes.empty()) {
    // The script's part decides a batch job's end; the others only hold
    // their nodes, and are killed once it has ended.
    const Rank script_rank = nodes.front().rank;
    if (rank != script_rank && !record.running_on.count(script_rank)) return effects;
    if (rank == script_rank) {
      if (record.outcome == JobState::kCompleted) {
        record.outcome = end;
        record.job.exit_code = exit_code;
        if (end != JobState::kCompleted && !record.cancel_requested) record.outcome_reason = reason;
      }
      if (!record.running_on.empty()) effects.push_back({Effect::Kind::kKillParts, record.job.id});
      return effects;
    }
  }
  // The parts killed because of the first failure then report CANCELLED,
  // which is not the job's end.
  if (record.outcome == JobState::kCompleted) {
    record.job.exit_code = std::max(record.job.exit_code, exit_code);
    if (end != JobState::kCompleted) {
      record.outcome = end;
      record.job.exit_code = exit_code;
      // A cancelled job's parts end killed: the reason is who cancelled it.
      if (!record.cancel_requested) record.outcome_reason = reason;
    }
  }
  // One failed part fails the job: the other nodes' tasks are killed rather
  // than left to wait for peers that are gone.
  if (end != JobState::kCompleted && !record.running_on.empty()) {
    effects.push_back({Effect::Kind::kKillParts, record.job.id});
  }
  return effects;
}

bool replaces_world_failure(std::optional<TimeUs> decided_at, TimeUs seen_at) {
  return decided_at && *decided_at > 0 && seen_at > 0 && seen_at < *decided_at;
}

Effects JobTableCore::world_failed(JobRecord& record, int exit_code, const std::string& reason,
                                   TimeUs seen_at) {
  Effects effects;
  if (record.job.state != JobState::kRunning || record.cancel_requested ||
      record.allocation_ended) {
    return effects;
  }
  const bool first = record.outcome == JobState::kCompleted;
  if (!first && !replaces_world_failure(record.failure_seen_at, seen_at)) return effects;
  record.outcome = JobState::kFailed;
  record.job.exit_code = exit_code;
  record.outcome_reason = reason;
  record.failure_seen_at = seen_at;
  if (first && !record.running_on.empty()) {
    effects.push_back({Effect::Kind::kKillParts, record.job.id});
  }
  return effects;
}

AfterRun JobTableCore::after_run(const JobRecord& record) {
  using Kind = AfterRun::Kind;
  const std::optional<Preemption>& preempted = record.preempted;
  if (record.allocation_ended && !record.cancel_requested) {
    return {Kind::kFinish, record.outcome, record.outcome_reason, 0};
  }
  if (!record.requeue_when_ended.empty() && !record.cancel_requested) {
    // A dump that failed half-way: the last good checkpoint keeps what it can.
    const bool dumped = preempted && preempted->mode == PreemptMode::kCheckpoint;
    return {dumped ? Kind::kRequeueFromCheckpoint : Kind::kRequeue, JobState::kPending,
            record.requeue_when_ended, preempted ? preempted->for_job : 0};
  }
  if (preempted && !record.cancel_requested) {
    const std::string why = "preempted by job " + std::to_string(preempted->for_job);
    switch (preempted->mode) {
      case PreemptMode::kCancel: return {Kind::kFinish, JobState::kCancelled, why, 0};
      case PreemptMode::kCheckpoint:
        // One that could not be checkpointed now: from its last good one.
        return {Kind::kRequeueFromCheckpoint, JobState::kPending, why, preempted->for_job};
      case PreemptMode::kOff:
      case PreemptMode::kRequeue:
        return {Kind::kRequeue, JobState::kPending, why, preempted->for_job};
    }
  }
  return {Kind::kFinish, record.cancel_requested ? JobState::kCancelled : record.outcome,
          record.outcome_reason, 0};
}

AfterRun JobTableCore::after_node_lost(const JobRecord& record, const std::string& why,
                                       bool has_restart_checkpoint) {
  using Kind = AfterRun::Kind;
  // Its command had ended already: the allocation was being given back.
  if (record.allocation_ended && !record.cancel_requested) {
    return {Kind::kFinish, record.outcome, record.outcome_reason, 0};
  }
  if (!record.cancel_requested && has_restart_checkpoint) {
    return {Kind::kRequeueFromCheckpoint, JobState::kPending, why, 0};
  }
  if (record.job.spec.requeue && !record.cancel_requested) {
    return {Kind::kRequeue, JobState::kPending, why, 0};
  }
  return {Kind::kFinish, JobState::kNodeFail, why, 0};
}

Effects JobTableCore::finish(JobRecord& record, JobState state, const std::string& reason,
                             TimeUs end_time, TimeUs now) {
  Effects effects;
  finish_into(record, state, reason, end_time, now, effects);
  return effects;
}

void JobTableCore::finish_into(JobRecord& record, JobState state, const std::string& reason,
                               TimeUs end_time, TimeUs now, Effects& effects) {
  Job& job = record.job;
  leave_running(job, effects);
  job.state = state;
  job.end_time = end_time;
  job.reason = reason;
  if (state == JobState::kTimeout && job.reason.empty()) job.reason = "time limit reached";
  record.running_on.clear();
  const NameKey key = name_key(job);
  if (auto same = same_name_.find(key); same != same_name_.end()) {
    same->second.live.erase(job.id);
    if (same->second.live.empty()) same_name_.erase(same);
  }
  effects.push_back({Effect::Kind::kStored, job.id, state_name(state)});
  wake_dependents(job.id, now, effects);
  wake_singleton(key, effects);
}

Effects JobTableCore::requeue(JobRecord& record, const std::string& reason) {
  Effects effects;
  Job& job = record.job;
  leave_running(job, effects);
  job.state = JobState::kPending;
  job.allocation = {};
  job.start_time = 0;
  job.exit_code = 0;
  job.requeue_count++;
  job.reason = "requeued: " + reason;
  record.running_on.clear();
  record.preempted.reset();
  record.requeue_when_ended.clear();
  enqueue(job, effects);
  effects.push_back({Effect::Kind::kStored, job.id, "requeue"});
  wake_singleton(name_key(job), effects);  // it no longer runs
  return effects;
}

void JobTableCore::enqueue(const Job& job, Effects& effects) {
  if (pending_.insert({job.submit_time, job.id}).second) {
    effects.push_back({Effect::Kind::kQueued, job.id});
  }
}

void JobTableCore::dequeue(const Job& job, Effects& effects) {
  waiting_.erase(job.id);
  deferred_.erase({job.spec.begin_time_us, job.id});
  if (pending_.erase({job.submit_time, job.id}) > 0) {
    effects.push_back({Effect::Kind::kDequeued, job.id});
  }
}

void JobTableCore::leave_running(const Job& job, Effects& effects) {
  if (running_.erase(job.id) == 0) return;
  if (auto same = same_name_.find(name_key(job)); same != same_name_.end()) {
    same->second.running.erase(job.id);
  }
  const JobId array = job.spec.array_job_id;
  if (array != 0 && --array_running_[array] <= 0) array_running_.erase(array);
  effects.push_back({Effect::Kind::kRunEnded, job.id});
}

JobTableCore::Dependencies JobTableCore::check_dependencies(const Job& job,
                                                            std::string& why) const {
  const std::vector<Dependency>& deps = job.spec.dependencies;
  if (!dependencies_any_of(deps)) {
    // All must hold: the first that never can decides, else the first unmet.
    Dependencies verdict = Dependencies::kSatisfied;
    for (const Dependency& d : deps) {
      std::string item;
      switch (check_dependency(job, d, item)) {
        case Dependencies::kSatisfied: break;
        case Dependencies::kWaiting:
          if (verdict == Dependencies::kSatisfied) {
            verdict = Dependencies::kWaiting;
            why = std::move(item);
          }
          break;
        case Dependencies::kNever: why = std::move(item); return Dependencies::kNever;
      }
    }
    return verdict;
  }
  // '?': one met is enough; never only when none can be.
  std::string unmet;
  std::string never;
  for (const Dependency& d : deps) {
    std::string item;
    switch (check_dependency(job, d, item)) {
      case Dependencies::kSatisfied: return Dependencies::kSatisfied;
      case Dependencies::kWaiting: unmet += (unmet.empty() ? "" : "?") + item; break;
      case Dependencies::kNever: never += (never.empty() ? "" : "; ") + item; break;
    }
  }
  if (!unmet.empty()) {
    why = std::move(unmet);
    return Dependencies::kWaiting;
  }
  why = std::move(never);
  return Dependencies::kNever;
}

JobTableCore::Dependencies JobTableCore::check_dependency(const Job& job, const Dependency& d,
                                                          std::string& why) const {
  if (d.type == DependencyType::kSingleton) {
    if (singleton_met(job)) return Dependencies::kSatisfied;
    why = "singleton";
    return Dependencies::kWaiting;
  }
  const std::string name = std::string(dependency_type_name(d.type)) + ":" + std::to_string(d.job);
  const JobRecord* target_record = record(d.job);
  // Checked at submit; a job the store no longer has can never start or end.
  if (target_record == nullptr) {
    why = name + ": no such job";
    return Dependencies::kNever;
  }
  const Job& target = target_record->job;
  const bool ended = is_terminal(target.state);
  // Another user's job: that it can never be met, not how it ended.
  auto never = [&] {
    why = name + (target.uid == job.uid ? " (job " + std::to_string(d.job) + " ended " +
                                              state_name(target.state) + ")"
                                        : " (can never be met)");
    return Dependencies::kNever;
  };
  bool met = false;
  switch (d.type) {
    case DependencyType::kAfter: met = target.state != JobState::kPending || ended; break;
    case DependencyType::kAfterAny: met = ended; break;
    case DependencyType::kAfterOk:
      if (ended && target.state != JobState::kCompleted) return never();
      met = ended;
      break;
    case DependencyType::kAfterNotOk:
      if (target.state == JobState::kCompleted) return never();
      met = ended;
      break;
    case DependencyType::kSingleton: break;  // above
  }
  if (met) return Dependencies::kSatisfied;
  why = name;
  return Dependencies::kWaiting;
}

std::size_t JobTableCore::NameKeyHash::operator()(const NameKey& key) const noexcept {
  return std::hash<std::string>{}(key.name) ^
         (std::hash<std::uint32_t>{}(key.uid) * static_cast<std::size_t>(0x9e3779b97f4a7c15ULL));
}

bool JobTableCore::singleton_met(const Job& job) const {
  auto it = same_name_.find(name_key(job));
  if (it == same_name_.end()) return true;
  const SameName& same = it->second;
  // One submitted before it has not ended, or another of the name runs.
  if (!same.live.empty() && *same.live.begin() < job.id) return false;
  return same.running.empty() || (same.running.size() == 1 && same.running.count(job.id) > 0);
}

void JobTableCore::wake_singleton(const NameKey& key, Effects& effects) {
  auto it = same_name_.find(key);
  if (it == same_name_.end()) return;
  // Only the first can be met: it is before every other.
  const JobId first = *it->second.live.begin();
  if (!waiting_.count(first)) return;  // queued, held, deferred or not waiting
  JobRecord* first_record = record(first);
  if (first_record == nullptr || !has_singleton(first_record->job)) return;
  Job& job = first_record->job;
  std::string why;
  switch (check_dependencies(job, why)) {
    case Dependencies::kSatisfied:
      waiting_.erase(first);
      if (job.reason.starts_with("dependency")) job.reason.clear();
      effects.push_back({Effect::Kind::kPublished, first});
      enqueue(job, effects);
      effects.push_back({Effect::Kind::kSchedule});
      return;
    case Dependencies::kWaiting:
      if (job.reason != "dependency " + why) {
        job.reason = "dependency " + why;
        effects.push_back({Effect::Kind::kPublished, first});
      }
      return;
    case Dependencies::kNever:
      // Its other items were judged (and it cancelled) when their jobs ended.
      return;
  }
}

void JobTableCore::block_singleton(JobId first, Effects& effects) {
  JobRecord* first_record = record(first);
  if (first_record == nullptr) return;
  Job& job = first_record->job;
  if (job.state != JobState::kPending || !pending_.count({job.submit_time, job.id}) ||
      !has_singleton(job)) {
    return;
  }
  std::string why;
  // Still met another way (an item of a '?' list).
  if (check_dependencies(job, why) != Dependencies::kWaiting) return;
  pending_.erase({job.submit_time, job.id});
  effects.push_back({Effect::Kind::kDequeued, job.id});
  wait_on_dependencies(job, why, effects);
}

void JobTableCore::wait_on_dependencies(Job& job, const std::string& why, Effects& effects) {
  waiting_.insert(job.id);
  for (const Dependency& d : job.spec.dependencies) {
    if (d.type != DependencyType::kSingleton) dependents_[d.job].insert(job.id);
  }
  if (job.reason != "dependency " + why) {
    job.reason = "dependency " + why;
    effects.push_back({Effect::Kind::kPublished, job.id});
  }
}

void JobTableCore::make_ready(JobRecord& record, TimeUs now, Effects& effects) {
  Job& job = record.job;
  watch_deadline(job);  // a requeued job waits again
  if (job.spec.begin_time_us > now) {
    deferred_.insert({job.spec.begin_time_us, job.id});
    if (job.reason != kBeginReason) {
      job.reason = kBeginReason;
      effects.push_back({Effect::Kind::kPublished, job.id});
    }
    return;
  }
  std::string why;
  switch (check_dependencies(job, why)) {
    case Dependencies::kSatisfied:
      if (waiting_.erase(job.id) > 0 && job.reason.starts_with("dependency")) {
        job.reason.clear();
        effects.push_back({Effect::Kind::kPublished, job.id});
      }
      enqueue(job, effects);
      return;
    case Dependencies::kWaiting: wait_on_dependencies(job, why, effects); return;
    case Dependencies::kNever:
      // As Flux, and Slurm with kill_invalid_depend: a job whose dependency
      // can never be met is cancelled rather than left pending for ever.
      dequeue(job, effects);
      finish_into(record, JobState::kCancelled, "dependency never satisfied: " + why, now, now,
                  effects);
      return;
  }
}

void JobTableCore::wake_dependents(JobId id, TimeUs now, Effects& effects) {
  auto it = dependents_.find(id);
  if (it == dependents_.end()) return;
  const std::set<JobId> waiting = std::move(it->second);
  dependents_.erase(it);
  bool woke = false;
  for (JobId w : waiting) {
    if (!waiting_.count(w)) continue;  // already released, held or ended
    JobRecord* dependent = record(w);
    if (dependent == nullptr || dependent->job.state != JobState::kPending || dependent->job.held) {
      continue;
    }
    make_ready(*dependent, now, effects);
    woke = true;
  }
  if (woke) effects.push_back({Effect::Kind::kSchedule});
}

}  // namespace hpcq::job
