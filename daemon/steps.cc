#include "daemon/steps.h"

#include <spdlog/spdlog.h>

#include "lib/api/job_proto.h"
#include "lib/job/job_env.h"
#include "lib/overlay/messages.h"

namespace hpcq::daemon {

using job::JobState;
using job::StepRecord;

namespace {

std::string name_of(const JobEntry& entry, const StepRecord& step) {
  return "job " + std::to_string(entry.job.id) + " step " + std::to_string(step.id);
}

Status no_such_step(const JobEntry& entry, job::StepId id) {
  return not_found("job " + std::to_string(entry.job.id) + " has no step " + std::to_string(id));
}

}  // namespace

StepRecord* Steps::find(JobEntry& entry, job::StepId id) {
  if (id == 0 || id > entry.steps.size()) return nullptr;
  return &entry.steps[id - 1];
}

Result<const StepRecord*> Steps::running(const JobEntry& entry, job::StepId id) {
  if (id == 0 || id > entry.steps.size()) return no_such_step(entry, id);
  const StepRecord& step = entry.steps[id - 1];
  if (step.state != JobState::kRunning) {
    return failed_precondition(name_of(entry, step) + " is " + job::state_name(step.state) +
                               ", not running");
  }
  return &step;
}

bool Steps::is_running_on(const JobEntry& entry, job::StepId id, Rank rank) {
  if (id == 0 || id > entry.steps.size()) return false;
  const StepRecord& step = entry.steps[id - 1];
  return step.state == JobState::kRunning && step.running_on.count(rank);
}

Result<v1::Step> Steps::launch(JobEntry& entry, StepRecord step, bool immediate) {
  const std::string job = "job " + std::to_string(entry.job.id);
  if (entry.job.state != JobState::kRunning) {
    return failed_precondition(job + " is " + job::state_name(entry.job.state) +
                               ": steps run only inside a running allocation");
  }
  if (!entry.job.spec.batch) {
    return failed_precondition(job +
                               " is not an allocation (hpcq batch): its tasks cannot "
                               "launch steps");
  }
  if (entry.checkpointing || entry.resizing) {
    return failed_precondition(job + " is being checkpointed: launch the step once that is done");
  }
  auto placed = job::place_step(entry.job.allocation, entry.step_cores, step.request);
  if (!placed.is_ok() && (placed.status().code() != Code::kUnavailable || immediate)) {
    return placed.status();
  }
  step.id = static_cast<job::StepId>(entry.steps.size() + 1);
  step.submit_time = ctx_.now();
  step.state = JobState::kPending;
  entry.steps.push_back(std::move(step));
  StepRecord& added = entry.steps.back();
  if (placed.is_ok()) {
    added.allocation = std::move(placed).value();
    start(entry, added);
  } else {
    added.reason = "waiting for cores held by other steps";
    persist(entry, added);
  }
  return api::to_proto(added);
}

void Steps::start(JobEntry& entry, StepRecord& step) {
  step.state = JobState::kRunning;
  step.reason.clear();
  step.start_time = ctx_.now();
  step.running_on.clear();
  step.confirmed.clear();
  for (const auto& node : step.allocation.nodes) step.running_on.insert(node.rank);
  job::hold_cores(entry.step_cores, step);
  persist(entry, step);
  send_launch(entry, step, {step.running_on.begin(), step.running_on.end()});
  entry.steps_sent_at = ctx_.now();
}

overlay::Launch Steps::launch_of(const JobEntry& entry, const StepRecord& step) const {
  overlay::Launch launch = actions_.make_launch(entry.job);
  launch.set_step(step.id);
  launch.set_batch(false);
  launch.set_forward_output(true);
  launch.set_pty(step.pty);
  if (!step.mpi.empty()) launch.set_mpi(step.mpi);
  launch.clear_argv();
  for (const std::string& a : step.argv) launch.add_argv(a);
  launch.clear_script();
  launch.clear_env();
  for (const auto& [k, v] : job::step_environment(entry.job, step)) (*launch.mutable_env())[k] = v;
  launch.set_cwd(step.cwd);
  launch.clear_stdout_path();
  launch.clear_stderr_path();
  launch.clear_allocation();
  fill_node_allocs(step.allocation, launch.mutable_allocation());
  launch.set_cpus_per_task(step.allocation.cpus_per_task);
  launch.set_gpus_per_task(0);
  launch.set_distribution(overlay::to_message(resource::Distribution::kBlock));
  int ntasks = 0;
  for (const auto& node : step.allocation.nodes) ntasks += node.ntasks;
  launch.set_ntasks(ntasks);
  launch.set_time_limit_s(0);  // the job's limit ends it
  return launch;
}

void Steps::send_launch(const JobEntry& entry, const StepRecord& step,
                        const std::vector<Rank>& ranks) {
  if (ranks.empty()) return;
  const overlay::Launch launch = launch_of(entry, step);
  for (Rank rank : ranks) {
    overlay::Envelope envelope;
    envelope.set_dst(rank);
    *envelope.mutable_launch() = launch;
    Status sent = ctx_.overlay->send(std::move(envelope));
    if (!sent.is_ok()) {
      spdlog::warn("{}: launch on rank {}: {}", name_of(entry, step), rank, sent.message());
    }
  }
}

void Steps::send_kill(const JobEntry& entry, const StepRecord& step, Rank rank) {
  overlay::Envelope envelope;
  envelope.set_dst(rank);
  overlay::Kill& kill = *envelope.mutable_kill();
  kill.set_job_id(entry.job.id);
  kill.set_attempt(static_cast<std::uint32_t>(entry.job.requeue_count));
  kill.set_step(step.id);
  (void)ctx_.overlay->send(std::move(envelope));
}

void Steps::on_update(Rank rank, const overlay::JobUpdate& update) {
  JobEntry* found = ctx_.table.find(update.job_id());
  if (found == nullptr) return;
  JobEntry& entry = *found;
  if (update.attempt() != static_cast<std::uint32_t>(entry.job.requeue_count)) return;
  StepRecord* step = find(entry, update.step());
  if (!step || step->state != JobState::kRunning || !step->running_on.count(rank)) return;
  if (update.kind() == overlay::JobUpdate::STARTED) {
    step->confirmed.insert(rank);
    return;
  }
  step->running_on.erase(rank);
  step->cpu_time_us += update.cpu_time_us();
  step->max_memory_bytes = std::max(step->max_memory_bytes, update.max_memory_bytes());
  entry.job.cpu_time_us += update.cpu_time_us();  // a step's processes are not the job shell's
  // As a job's parts: the first part that did not complete decides, and the
  // others are killed rather than left waiting for peers that are gone.
  if (step->outcome == JobState::kCompleted) {
    step->exit_code = std::max(step->exit_code, update.exit_code());
    if (update.kind() != overlay::JobUpdate::COMPLETED) {
      step->outcome =
          update.kind() == overlay::JobUpdate::CANCELLED ? JobState::kCancelled : JobState::kFailed;
      step->exit_code = update.exit_code();
      if (!step->cancel_requested) {
        auto node = ctx_.nodes.find(rank);
        step->reason =
            (node == ctx_.nodes.end() ? "rank " + std::to_string(rank) : node->second.name) + ": " +
            update.reason();
      }
      for (Rank other : step->running_on) send_kill(entry, *step, other);
    }
  }
  if (!step->running_on.empty()) {
    persist(entry, *step);  // a restarted leader must not wait for this part
    return;
  }
  end(entry, *step, step->cancel_requested ? JobState::kCancelled : step->outcome, step->reason);
  start_pending(entry);
}

void Steps::world_failed(JobEntry& entry, job::StepId id, int exit_code, const std::string& reason,
                         TimeUs seen_at) {
  StepRecord* step = find(entry, id);
  if (!step || step->state != JobState::kRunning || step->cancel_requested) return;
  const bool first = step->outcome == JobState::kCompleted;
  if (!first && !job::replaces_world_failure(step->failure_seen_at, seen_at)) return;
  step->outcome = JobState::kFailed;
  step->exit_code = exit_code;
  step->reason = reason;
  step->failure_seen_at = seen_at;
  if (first) {
    for (Rank other : step->running_on) send_kill(entry, *step, other);
  }
}

void Steps::end(JobEntry& entry, StepRecord& step, JobState state, const std::string& reason) {
  if (step.state == JobState::kRunning) job::release_cores(entry.step_cores, step);
  step.state = state;
  step.reason = reason;
  step.end_time = ctx_.now();
  step.running_on.clear();
  persist(entry, step);
  ctx_.output.end(entry.job.id, step.id);
}

void Steps::start_pending(JobEntry& entry) {
  for (StepRecord& step : entry.steps) {
    if (step.state != JobState::kPending) continue;
    auto placed = job::place_step(entry.job.allocation, entry.step_cores, step.request);
    if (!placed.is_ok()) continue;  // still held; a smaller one behind it may fit
    step.allocation = std::move(placed).value();
    start(entry, step);
  }
}

Status Steps::cancel(JobEntry& entry, job::StepId id, const std::string& by) {
  StepRecord* step = find(entry, id);
  if (!step) return no_such_step(entry, id);
  if (job::is_terminal(step->state)) {
    return failed_precondition(name_of(entry, *step) + " has ended already");
  }
  if (step->state == JobState::kPending) {
    end(entry, *step, JobState::kCancelled, "cancelled by " + by);
    return Status::ok();
  }
  step->cancel_requested = true;
  step->reason = "cancelled by " + by;
  for (Rank rank : step->running_on) send_kill(entry, *step, rank);
  return Status::ok();
}

Status Steps::signal(JobEntry& entry, job::StepId id, int signo) {
  auto step = running(entry, id);
  if (!step.is_ok()) return step.status();
  actions_.send_signal(entry, (*step)->running_on, id, signo);
  return Status::ok();
}

Result<Rank> Steps::first_node(const JobEntry& entry, job::StepId id) const {
  if (id == 0 || id > entry.steps.size()) return no_such_step(entry, id);
  const StepRecord& step = entry.steps[id - 1];
  if (job::is_terminal(step.state)) {
    return failed_precondition(name_of(entry, step) + " is " + job::state_name(step.state) +
                               ", not running");
  }
  // Until its node has it running, input would find nobody: ask again.
  if (step.state != JobState::kRunning || !step.confirmed.count(step.allocation.nodes[0].rank)) {
    return unavailable(name_of(entry, step) + " has not started yet");
  }
  return step.allocation.nodes.front().rank;
}

void Steps::on_run_end(JobEntry& entry) {
  for (StepRecord& step : entry.steps) {
    if (job::is_terminal(step.state)) continue;
    end(entry, step, JobState::kCancelled,
        step.cancel_requested ? step.reason : "the job's run ended");
  }
  entry.step_cores.clear();
}

void Steps::repeat_unconfirmed() {
  const TimeUs now = ctx_.now();
  const TimeUs after = 2 * static_cast<TimeUs>(ctx_.config.heartbeat_interval_ms) * 1000;
  for (JobId id : ctx_.table.running()) {
    JobEntry& entry = ctx_.table.at(id);
    if (entry.steps_to_try && entry.started_on == entry.running_on) {
      entry.steps_to_try = false;
      start_pending(entry);
    }
    if (entry.steps.empty() || now - entry.steps_sent_at < after) continue;
    for (const StepRecord& step : entry.steps) {
      if (step.state != JobState::kRunning || step.cancel_requested) continue;
      std::vector<Rank> unconfirmed;
      for (Rank rank : step.running_on) {
        if (!step.confirmed.count(rank)) unconfirmed.push_back(rank);
      }
      send_launch(entry, step, unconfirmed);
    }
    entry.steps_sent_at = now;
  }
}

void Steps::restore(JobEntry& entry) {
  entry.step_cores.clear();
  for (StepRecord& step : entry.steps) {
    if (entry.job.state != JobState::kRunning && !job::is_terminal(step.state)) {
      step.state = JobState::kCancelled;
      step.reason = "the job's run ended";
      step.running_on.clear();
    }
    if (step.state == JobState::kRunning) job::hold_cores(entry.step_cores, step);
    if (step.state == JobState::kPending) entry.steps_to_try = true;
  }
}

void Steps::persist(const JobEntry& entry, const StepRecord& step) {
  actions_.persist_job_record(entry.job.id, "step", step.id, api::to_proto(step));
}

}  // namespace hpcq::daemon
