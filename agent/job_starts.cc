// Agent's half for a job's start on this node: the leader's Launch of a
// part or a step (repeats, the prolog's wait, an epilog's hold), the start
// through the executor or the restore of a checkpoint, and the STARTED
// reports, sent once the executor says the tasks have all started (its job
// shell's word, read on the loop: the launch itself does not wait for it,
// so that a slow start holds no heartbeat back); what a part that ended
// leaves behind.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "agent/agent.h"
#include "agent/launch_message.h"
#include "lib/core/clock.h"
#include "lib/core/release_memory.h"
#include "lib/job/job_env.h"
#include "lib/overlay/messages.h"

namespace hpcq::agent {

void Agent::on_launch(const overlay::Launch& launch) {
  const JobId id = launch.job_id();
  if (launch.step() != 0) return on_step_launch(launch);
  switch (parts_.launch(launch)) {
    case PartTable::Launch::kStart: break;
    case PartTable::Launch::kReportStarted:
      report(id, launch.attempt(), overlay::JobUpdate::STARTED, 0, "");
      return;
    case PartTable::Launch::kRefuse:
      report(id, launch.attempt(), overlay::JobUpdate::FAILED, 1,
             "an earlier part of the job is still ending here", launch.part());
      return;
    case PartTable::Launch::kHold:
      spdlog::info("job {}: starts once this node's epilog has ended", id);
      return;
    case PartTable::Launch::kIgnore:
      spdlog::debug("job {}: launch ignored: a repeat, or this part already ran here", id);
      return;
  }
  Result<JobLaunch> translated =
      job_launch_from_message(launch, options_.rank, config_.ranks[options_.rank].name, host_);
  if (!translated.is_ok()) {
    spdlog::warn("job {}: refused its launch: {}", id, translated.status().message());
    report(id, launch.attempt(), overlay::JobUpdate::FAILED, 1, translated.status().message(),
           launch.part());
    return;
  }
  run_prolog_then_start(launch, std::move(translated).value());
}

void Agent::on_step_launch(const overlay::Launch& launch) {
  const JobId id = launch.job_id();
  const std::uint32_t step = launch.step();
  auto fail = [&](const std::string& why) {
    spdlog::warn("job {} step {}: launch failed: {}", id, step, why);
    report(id, launch.attempt(), overlay::JobUpdate::FAILED, 1, why, std::nullopt, step);
  };
  switch (parts_.step_launch(launch)) {
    case PartTable::Launch::kStart: break;
    case PartTable::Launch::kReportStarted:
      report(id, launch.attempt(), overlay::JobUpdate::STARTED, 0, "", std::nullopt, step);
      return;
    case PartTable::Launch::kRefuse: return fail("the job is not running on this node");
    case PartTable::Launch::kHold:
    case PartTable::Launch::kIgnore: return;
  }
  Result<JobLaunch> translated =
      job_launch_from_message(launch, options_.rank, config_.ranks[options_.rank].name, host_);
  if (!translated.is_ok()) return fail(translated.status().message());
  translated->step = step;
  journal_part(launch);
  Status launched = executor_->launch(*translated, wall_clock_now());
  if (!launched.is_ok()) {
    part_journal_->ack(id, launch.attempt(), step);
    return fail(launched.message());
  }
  parts_.step_starting(id, step);
  report_started();
  sync_wait_fds();
}

void Agent::start_part(const overlay::Launch& launch, JobLaunch job) {
  const JobId id = launch.job_id();
  // An elastic job's first node keeps its node list files and resize socket.
  const bool first_node =
      launch.allocation_size() > 0 && launch.allocation(0).rank() == options_.rank;
  if (launch.elastic() && first_node) {
    const std::string root = options_.state_dir + "/elastic";
    std::error_code ec;
    std::filesystem::create_directories(root, ec);
    if (!ec) std::filesystem::permissions(root, std::filesystem::perms(0755), ec);
    const std::string dir =
        root + "/" + std::to_string(id) + "-" + std::to_string(launch.attempt());
    std::filesystem::remove_all(dir, ec);  // a crashed agent's leftovers
    auto files = ElasticJob::create(loop_, dir, launch.uid(), launch.gid(), launch.allocation());
    if (!files.is_ok()) {
      // Explicit rather than an elastic job that cannot hear of resizes.
      const std::string why = "elastic job files: " + files.status().message();
      spdlog::warn("job {}: {}", id, why);
      parts_.start_failed(id);
      report(id, launch.attempt(), overlay::JobUpdate::FAILED, 1, why, launch.part());
      return;
    }
    job::add_elastic_environment(job.env, (*files)->nodelist_path(), (*files)->hostfile_path(),
                                 (*files)->hostfile_mpich_path(), (*files)->socket_path());
    elastic_[id] = std::move(files).value();
  }

  Status launched = Status::ok();
  journal_part(launch);
  if (launch.restore_from().empty()) {
    launched = executor_->launch(job, wall_clock_now());
  } else {
    // This node's part of the checkpointed placement: the same index.
    // CRIU runs beside the loop; STARTED (or FAILED) once it is done.
    const std::string image_dir = launch.restore_from() + "/part-" + job.env["HPCQ_NODEID"];
    launched = executor_->begin_restore(job, image_dir, wall_clock_now());
    if (launched.is_ok()) {
      parts_.restoring(launch, script_env(id, job), image_dir);
      sync_wait_fds();
      return;
    }
    launched = Status(launched.code(),
                      std::string(overlay::kRestoreFailedReason) + ": " + launched.message());
  }
  if (!launched.is_ok() && launched.code() == Code::kInternal && launch.restore_from().empty()) {
    launched =
        Status(launched.code(), std::string(overlay::kNodeErrorReason) + ": " + launched.message());
  }
  if (!launched.is_ok()) {
    spdlog::warn("job {}: launch failed: {}", id, launched.message());
    part_journal_->ack(id, launch.attempt());
    parts_.start_failed(id);
    elastic_.erase(id);
    report(id, launch.attempt(), overlay::JobUpdate::FAILED, 1, launched.message(), launch.part());
    return;
  }
  parts_.starting(launch, script_env(id, job));
  report_started();  // at once where the executor is done already (TestExecutor)
  sync_wait_fds();
}

void Agent::report_started() {
  for (const LaunchStarted& started : executor_->take_started()) {
    // A restore's start is reported by on_restores_done; a part forgotten
    // meanwhile (stopped by a checkpoint) by nobody.
    std::optional<Part> part = parts_.started(started.id, started.step);
    if (!part) continue;
    report(started.id, part->attempt, overlay::JobUpdate::STARTED, 0, "", part->part, started.step);
  }
}

void Agent::on_restores_done() {
  for (const RestoreOutcome& outcome : executor_->finished_restores()) {
    std::optional<Part> restore = parts_.restored(outcome.id, outcome.status.is_ok());
    if (!restore) continue;
    if (!outcome.status.is_ok()) {
      const std::string why =
          std::string(overlay::kRestoreFailedReason) + ": " + outcome.status.message();
      spdlog::warn("job {}: launch failed: {}", outcome.id, why);
      part_journal_->ack(outcome.id, restore->attempt);
      elastic_.erase(outcome.id);
      report(outcome.id, restore->attempt, overlay::JobUpdate::FAILED, 1, why, restore->part);
      continue;
    }
    spdlog::info("job {}: restored from {}", outcome.id, restore->image_dir);
    report(outcome.id, restore->attempt, overlay::JobUpdate::STARTED, 0, "", restore->part);
  }
}

void Agent::journal_part(const overlay::Launch& launch) {
  Status kept = part_journal_->add(launch);
  if (!kept.is_ok()) {
    spdlog::warn("job {}: an agent restart would end it: {}", launch.job_id(), kept.message());
  }
}

void Agent::take_back_parts() {
  const std::vector<RunId> adopted = executor_->take_adopted();
  std::set<RunId> running(adopted.begin(), adopted.end());
  std::set<OutputSpool::Run> forwarding;
  for (const overlay::Launch& launch : part_journal_->entries()) {
    const JobId id = launch.job_id();
    if (running.erase({id, launch.step()}) == 0) {
      // Never started, or ended and reaped before the last agent left.
      part_journal_->ack(id, launch.attempt(), launch.step());
      continue;
    }
    Result<JobLaunch> job =
        job_launch_from_message(launch, options_.rank, config_.ranks[options_.rank].name, host_);
    if (job.is_ok() && job->forward_output) {
      forwarding.insert({id, launch.step()});
      for (const TaskSpec& task : job->tasks) {
        for (bool is_stderr : {false, true}) {
          output_log_.open_stream(id, launch.attempt(), launch.step(), task.rank, is_stderr);
        }
      }
    }
    if (!parts_.adopt(launch, job.is_ok() ? script_env(id, *job) : ScriptEnv{})) {
      spdlog::warn("job {} step {}: its part is not here any more: killed", id, launch.step());
      running.insert({id, launch.step()});
      continue;
    }
    if (launch.step() != 0) continue;
    spdlog::info("job {}: running on from the previous agent (attempt {}{})", id, launch.attempt(),
                 launch.elastic() ? "; it hears of no resize here any more" : "");
  }
  // Their streams go on from where the last agent left them.
  for (OutputLog::Chunk& chunk : output_spool_->take(forwarding)) {
    output_log_.restore(std::move(chunk));
  }
  // A shell with no Launch on record cannot be reported to the leader: ended.
  for (const RunId& run : running) {
    spdlog::warn("job {}: a shell of the previous agent with no launch on record: killed", run.id);
    Status s = run.step != 0 ? executor_->cancel_step(run.id, run.step) : executor_->cancel(run.id);
    if (!s.is_ok()) spdlog::warn("job {}: {}", run.id, s.message());
  }
}

std::optional<Part> Agent::forget(JobId id) {
  std::optional<Part> part = parts_.ended(id);
  if (part) part_journal_->ack(id, part->attempt);
  elastic_.erase(id);
  if (mpi_) mpi_->on_part_ended();
  return part;
}

}  // namespace hpcq::agent
