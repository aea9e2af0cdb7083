#include "daemon/job_reports.h"

#include <chrono>

#include "lib/overlay/messages.h"

namespace hpcq::daemon {

void JobReports::start() {
  ctx_.output.on_credit_due([this] { ctx_.loop.post([this] { send_output_credit(); }); });
  ctx_.loop.run_every(std::chrono::milliseconds(ctx_.config.heartbeat_interval_ms), [this] {
    ctx_.output.credit_again();
    send_output_credit();
  });
}

JobReports::~JobReports() { ctx_.output.on_credit_due(nullptr); }

void JobReports::send_output_credit() {
  for (const JobOutput::Credit& c : ctx_.output.take_credit()) {
    overlay::Envelope envelope;
    envelope.set_dst(c.node);
    overlay::OutputCredit& credit = *envelope.mutable_output_credit();
    credit.set_job_id(c.id);
    credit.set_attempt(c.attempt);
    credit.set_step(c.step);
    credit.set_rank(static_cast<std::uint32_t>(c.rank));
    credit.set_stream(c.is_stderr ? overlay::Output::STDERR : overlay::Output::STDOUT);
    credit.set_granted(c.granted);
    credit.set_consumed(c.consumed);
    (void)ctx_.overlay->send(std::move(envelope));  // lost: sent again while it waits
  }
}

std::optional<std::string> JobReports::on_job_update(Rank rank, const overlay::JobUpdate& update) {
  // Recorded (or stale): either way the agent may forget it, but only once
  // whatever this update changed is committed. Batches commit in order, so an
  // empty one submitted after the job's record completes after it: an
  // acknowledged end is never lost.
  std::optional<std::string> drain;
  if (update.step() != 0) {
    steps_.on_update(rank, update);
  } else {
    drain = handle_job_update(rank, update);
  }
  if (update.kind() != overlay::JobUpdate::STARTED) ack_after_commit(rank, update);
  return drain;
}

void JobReports::on_output(Rank rank, overlay::Output&& output) {
  const JobEntry* found = ctx_.table.find(output.job_id());
  if (found == nullptr) return;
  const JobEntry& entry = *found;
  // Output of an earlier attempt, or from a node the job or step no longer runs on.
  if (entry.job.state != job::JobState::kRunning ||
      output.attempt() != static_cast<std::uint32_t>(entry.job.requeue_count) ||
      !entry.running_on.count(rank)) {
    return;
  }
  if (output.step() != 0 ? !Steps::is_running_on(entry, output.step(), rank)
                         : !entry.job.spec.forward_output) {
    return;
  }
  JobOutput::Source source;
  source.incarnation = output.incarnation();
  source.attempt = output.attempt();
  source.rank = static_cast<int>(output.rank());
  source.is_stderr = output.stream() == overlay::Output::STDERR;
  source.offset = output.offset();
  source.node = rank;
  ctx_.output.append(entry.job.id, output.step(), source, std::move(*output.mutable_data()));
}

void JobReports::ack_after_commit(Rank rank, const overlay::JobUpdate& update) {
  const JobId job = update.job_id();
  const std::uint32_t attempt = update.attempt(), step = update.step();
  ctx_.committer->submit(store::WriteBatch{}, [this, rank, job, attempt, step](Status) {
    ctx_.loop.post([this, rank, job, attempt, step] {
      overlay::Envelope ack;
      ack.set_dst(rank);
      ack.mutable_job_update_ack()->set_job_id(job);
      ack.mutable_job_update_ack()->set_attempt(attempt);
      ack.mutable_job_update_ack()->set_step(step);
      (void)ctx_.overlay->send(std::move(ack));
    });
  });
}

std::optional<std::string> JobReports::handle_job_update(Rank rank,
                                                         const overlay::JobUpdate& update) {
  JobEntry* found = ctx_.table.find(update.job_id());
  if (found == nullptr) return std::nullopt;
  JobEntry& entry = *found;
  if (entry.job.state != job::JobState::kRunning ||
      update.attempt() != static_cast<uint32_t>(entry.job.requeue_count) ||
      !entry.running_on.count(rank)) {
    return std::nullopt;  // stale: from an earlier attempt, or the job already ended
  }
  if (auto part = entry.part_of.find(rank);
      part != entry.part_of.end() && update.part() != part->second) {
    return std::nullopt;  // stale: from a part an earlier resize took off this node
  }
  if (resizes_.on_part_update(entry, rank, update)) return std::nullopt;
  job::JobState end;
  switch (update.kind()) {
    case overlay::JobUpdate::STARTED:
      entry.started_on.insert(rank);
      resizes_.on_part_started(entry);
      return std::nullopt;
    case overlay::JobUpdate::COMPLETED: end = job::JobState::kCompleted; break;
    case overlay::JobUpdate::FAILED: end = job::JobState::kFailed; break;
    case overlay::JobUpdate::CANCELLED: end = job::JobState::kCancelled; break;
    case overlay::JobUpdate::TIMEOUT: end = job::JobState::kTimeout; break;
    default: return std::nullopt;
  }
  if (entry.restoring && end == job::JobState::kFailed &&
      update.reason().rfind(overlay::kRestoreFailedReason, 0) == 0) {
    // Never lost: the checkpoint could not be restored, so run it afresh.
    entry.requeue_when_ended =
        ctx_.nodes.at(rank).name + ": " + update.reason() + "; running it from the start";
  }
  const std::string& node = ctx_.nodes.at(rank).name;
  std::optional<std::string> drain;
  if (end == job::JobState::kFailed && !entry.restoring &&
      update.reason().rfind(overlay::kNodeErrorReason, 0) == 0) {
    // The node could not start it: run it elsewhere (the node is drained).
    entry.requeue_when_ended = node + ": " + update.reason();
    drain = "job " + std::to_string(entry.job.id) + ": " + update.reason();
  }
  const std::string reason = update.reason().empty() ? "" : node + ": " + update.reason();
  entry.job.cpu_time_us += update.cpu_time_us();
  entry.job.max_memory_bytes = std::max(entry.job.max_memory_bytes, update.max_memory_bytes());
  actions_.apply(ctx_.table.part_ended(entry, rank, end, update.exit_code(), reason));
  if (entry.running_on.empty()) actions_.all_parts_ended(entry, update.time_us());
  return drain;
}

}  // namespace hpcq::daemon
