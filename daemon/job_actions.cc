#include "daemon/job_actions.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include <google/protobuf/util/json_util.h>

#include "daemon/usage_record.h"
#include "lib/api/job_proto.h"
#include "lib/job/job_env.h"
#include "lib/overlay/messages.h"
#include "lib/store/store.h"

namespace hpcq::daemon {

void fill_node_allocs(const resource::Allocation& allocation,
                      google::protobuf::RepeatedPtrField<overlay::NodeAlloc>* out) {
  for (const auto& a : allocation.nodes) {
    overlay::NodeAlloc* n = out->Add();
    n->set_rank(a.rank);
    n->set_node(a.node);
    for (int c : a.cores) n->add_cores(c);
    for (int m : a.numa) n->add_numa(m);
    n->set_memory_bytes(a.memory_bytes);
    n->set_ntasks(a.ntasks);
    n->set_first_task(a.first_task);
    for (int g : a.gpus) n->add_gpus(g);
    for (const resource::WorkerPlacement& w : a.workers) {
      overlay::Worker* worker = n->add_workers();
      worker->set_id(w.id);
      worker->set_group(w.group);
      for (int r : w.ranks) worker->add_ranks(r);
      for (int c : w.cores) worker->add_cores(c);
    }
  }
}

void JobActions::apply(const job::Effects& effects) {
  using Kind = job::Effect::Kind;
  for (const job::Effect& effect : effects) {
    switch (effect.kind) {
      case Kind::kStored: {
        const job::Job& job = ctx_.table.at(effect.job).job;
        persist(job, effect.event, "{}");
        publish(job);
        if (job::is_terminal(job.state)) {
          ctx_.metrics.job_ended(state_label(job::state_name(job.state)), job.spec.queue);
        }
        spdlog::info("job {}: {} (exit code {}){}", job.id, effect.event, job.exit_code,
                     job.reason.empty() ? "" : ": " + job.reason);
        break;
      }
      case Kind::kPublished: publish(ctx_.table.at(effect.job).job); break;
      case Kind::kQueued:
        if (ctx_.decision_log) {
          const job::Job& job = ctx_.table.at(effect.job).job;
          ctx_.decision_log->queue(ctx_.now(), job,
                                   job_eligible_ranks(ctx_.nodes, ctx_.config.site, job.spec));
        }
        break;
      case Kind::kDequeued:
        if (ctx_.decision_log) ctx_.decision_log->dequeue(ctx_.now(), effect.job);
        break;
      case Kind::kRunEnded:
        if (ctx_.decision_log) ctx_.decision_log->end(ctx_.now(), effect.job);
        break;
      case Kind::kKillParts: kill_job_parts(ctx_.table.at(effect.job)); break;
      case Kind::kSchedule: schedule_soon(); break;
    }
  }
}

void JobActions::carry_out(JobEntry& entry, const job::AfterRun& after, TimeUs end_time) {
  switch (after.kind) {
    case job::AfterRun::Kind::kFinish:
      finish_job(entry, after.state, after.reason, end_time);
      break;
    case job::AfterRun::Kind::kRequeue: requeue_job(entry, after.reason); break;
    case job::AfterRun::Kind::kRequeueFromCheckpoint:
      requeue_from_checkpoint(entry, after.reason);
      break;
  }
  if (after.yields_to != 0) entry.yields_to = after.yields_to;
  schedule_soon();
}

void JobActions::schedule_soon() {
  if (cycle_posted_) return;
  cycle_posted_ = true;
  // Posted rather than run now, so that a burst of submissions or ends that
  // are already queued on the loop is scheduled in one cycle.
  ctx_.loop.post([this] {
    cycle_posted_ = false;
    if (cycle_) cycle_();
  });
}

void JobActions::charge_usage(const job::Job& job, TimeUs from, TimeUs end) {
  from = std::max(from, job.start_time);
  if (job.start_time <= 0 || end <= from) return;
  sched::UsageCharge charge;
  const double seconds = static_cast<double>(end - from) / 1e6;
  int gpus = 0;
  for (const auto& part : job.allocation.nodes) gpus += static_cast<int>(part.gpus.size());
  charge.core_seconds = job.allocation.total_cores() * seconds;
  std::uint64_t memory = 0;
  for (const auto& part : job.allocation.nodes) memory += part.memory_bytes;
  charge.memory_byte_seconds = static_cast<double>(memory) * seconds;
  charge.gpu_seconds = gpus * seconds;
  ctx_.usage.charge(job.uid, job.spec.account, charge, end);
  ctx_.usage_dirty = true;
}

void JobActions::persist_usage() {
  if (!ctx_.usage_dirty) return;
  ctx_.usage_dirty = false;
  store::WriteBatch batch;
  batch.put_record("usage", "ledger", encode_usage(ctx_.usage.entries()));
  ctx_.committer->submit(std::move(batch), [](Status s) {
    if (!s.is_ok()) spdlog::error("usage: store update failed: {}", s.message());
  });
}

// Fair-share: the job's current allocation is charged up to now, before a
// resize changes it, so that each size is charged for the time it was held.
void JobActions::charge_segment(JobEntry& entry) {
  const TimeUs t = ctx_.now();
  charge_usage(entry.job, entry.usage_from, t);
  entry.usage_from = t;
}

// The Launch message of a job's current attempt (every node gets the same).
overlay::Launch JobActions::make_launch(const job::Job& job) const {
  overlay::Launch launch;
  launch.set_job_id(job.id);
  launch.set_uid(job.uid);
  launch.set_gid(job.gid);
  launch.set_user(job.user);
  for (const auto& a : job.spec.argv) launch.add_argv(a);
  launch.set_script(job.spec.script);
  for (const auto& [k, v] : job::launch_environment(job)) (*launch.mutable_env())[k] = v;
  launch.set_cwd(job.spec.cwd);
  launch.set_stdout_path(job::expand_output_path(job.spec.output, job));
  launch.set_stderr_path(
      job::expand_output_path(job.spec.error.empty() ? job.spec.output : job.spec.error, job));
  fill_node_allocs(job.allocation, launch.mutable_allocation());
  launch.set_image(job.spec.image);
  launch.set_cpus_per_task(job.allocation.cpus_per_task);
  launch.set_gpus_per_task(job.allocation.gpus_per_task);
  launch.set_distribution(overlay::to_message(job.allocation.node_distribution));
  launch.set_cpu_bind(overlay::to_message(job.allocation.cpu_bind));
  launch.set_time_limit_s(job.spec.time_limit_s);
  launch.set_ntasks(job::task_count(job));
  launch.set_attempt(static_cast<uint32_t>(job.requeue_count));
  launch.set_elastic(job.spec.elastic && job.spec.max_nodes > 0);
  launch.set_batch(job.spec.batch);
  launch.set_forward_output(job.spec.forward_output);
  launch.set_warn_signal(job.spec.warn_signal);
  launch.set_warn_seconds(job.spec.warn_seconds);
  launch.set_warn_target(job::warn_target_word(job.spec.warn_target));
  launch.set_pty(job.spec.pty);
  launch.set_mpi(job.spec.mpi.empty() ? ctx_.config.mpi : job.spec.mpi);
  return launch;
}

void JobActions::send_launches(JobId id, int attempt) {
  JobEntry* found = ctx_.table.find(id);
  if (found == nullptr) return;
  JobEntry& entry = *found;
  if (entry.job.state != job::JobState::kRunning || entry.job.requeue_count != attempt ||
      !entry.launch) {
    return;
  }
  if (entry.kill_sent) {
    // Cancelled or preempted before any node heard of it: nothing ran.
    entry.running_on.clear();
    if (entry.outcome_reason.empty() && !entry.allocation_ended) {
      entry.outcome_reason = "ended before it was launched";
    }
    all_parts_ended(entry, ctx_.now());
    return;
  }
  entry.sent_at = ctx_.now();
  entry.launched = true;
  for (Rank rank : entry.running_on) {
    overlay::Envelope envelope;
    envelope.set_dst(rank);
    *envelope.mutable_launch() = *entry.launch;
    Status sent = ctx_.overlay->send(std::move(envelope));
    if (!sent.is_ok()) {
      // Repeated until confirmed (repeat_unconfirmed): the path may be
      // healing. A node that is really gone is declared down by its silence.
      spdlog::warn("job {}: launch on rank {} not sent yet: {}", id, rank, sent.message());
    }
  }
}

void JobActions::all_parts_ended(JobEntry& entry, TimeUs end_time) {
  carry_out(entry, job::JobTableCore::after_run(entry), end_time);
}

void JobActions::kill_job_parts(JobEntry& entry) {
  if (entry.kill_sent) return;
  entry.kill_sent = true;
  entry.sent_at = ctx_.now();
  for (Rank rank : entry.running_on) send_kill(entry, rank);
}

void JobActions::send_kill(JobEntry& entry, Rank rank) {
  kill_part(rank, entry.job.id, static_cast<uint32_t>(entry.job.requeue_count));
}

void JobActions::kill_part(Rank rank, JobId id, std::uint32_t attempt) {
  overlay::Envelope kill;
  kill.set_dst(rank);
  kill.mutable_kill()->set_job_id(id);
  kill.mutable_kill()->set_attempt(attempt);
  Status sent = ctx_.overlay->send(std::move(kill));
  if (!sent.is_ok()) spdlog::warn("job {}: kill on rank {}: {}", id, rank, sent.message());
}

void JobActions::launch_again(JobEntry& entry, Rank rank) {
  if (!entry.launch) entry.launch = std::make_shared<const overlay::Launch>(make_launch(entry.job));
  entry.launched = true;
  entry.sent_at = ctx_.now();
  overlay::Envelope envelope;
  envelope.set_dst(rank);
  *envelope.mutable_launch() = *entry.launch;
  (void)ctx_.overlay->send(std::move(envelope));
}

void JobActions::send_signal(JobEntry& entry, const std::set<Rank>& ranks, std::uint32_t step,
                             int signo) {
  constexpr std::size_t kSignalsKept = 16;
  JobEntry::SentSignal sent{++entry.signal_seq, static_cast<std::uint32_t>(entry.job.requeue_count),
                            step, signo, ranks};
  for (Rank rank : ranks) send_signal_to(entry, sent, rank);
  entry.signals_sent.push_back(std::move(sent));
  if (entry.signals_sent.size() > kSignalsKept) entry.signals_sent.pop_front();
}

void JobActions::send_signal_to(const JobEntry& entry, const JobEntry::SentSignal& sent,
                                Rank rank) {
  overlay::Envelope envelope;
  envelope.set_dst(rank);
  overlay::Signal* signal = envelope.mutable_signal();
  signal->set_job_id(entry.job.id);
  signal->set_attempt(sent.attempt);
  signal->set_step(sent.step);
  signal->set_signo(sent.signo);
  signal->set_seq(sent.seq);
  Status s = ctx_.overlay->send(std::move(envelope));
  if (!s.is_ok()) spdlog::warn("job {}: signal on rank {}: {}", entry.job.id, rank, s.message());
}

Status JobActions::send_input(JobEntry& entry, Rank rank, std::uint32_t step,
                              overlay::Input input) {
  constexpr std::size_t kInputKept = 64 * 1024;
  const auto attempt = static_cast<std::uint32_t>(entry.job.requeue_count);
  JobEntry::SentInput& sent = entry.input_sent[step];
  if (sent.attempt != attempt || sent.rank != rank) {
    sent = JobEntry::SentInput{};
    sent.attempt = attempt;
    sent.rank = rank;
  }
  input.set_job_id(entry.job.id);
  input.set_attempt(attempt);
  input.set_step(step);
  input.set_offset(sent.begin + sent.bytes.size());
  sent.bytes += input.data();
  sent.eof = sent.eof || input.eof();
  if (sent.bytes.size() > kInputKept) {
    const std::size_t drop = sent.bytes.size() - kInputKept;
    sent.bytes.erase(0, drop);
    sent.begin += drop;
  }
  overlay::Envelope envelope;
  envelope.set_dst(rank);
  *envelope.mutable_input() = std::move(input);
  return ctx_.overlay->send(std::move(envelope));
}

void JobActions::send_time_limit(const JobEntry& entry, Rank rank) {
  overlay::Envelope envelope;
  envelope.set_dst(rank);
  overlay::SetTimeLimit& limit = *envelope.mutable_set_time_limit();
  limit.set_job_id(entry.job.id);
  limit.set_attempt(static_cast<std::uint32_t>(entry.job.requeue_count));
  limit.set_time_limit_s(entry.job.spec.time_limit_s);
  (void)ctx_.overlay->send(std::move(envelope));
}

void JobActions::send_again(JobEntry& entry, Rank rank, const overlay::RunningJob& running) {
  const auto attempt = static_cast<std::uint32_t>(entry.job.requeue_count);
  if (running.attempt() != attempt) return;
  if (entry.time_limit_updated) send_time_limit(entry, rank);
  for (const JobEntry::SentSignal& sent : entry.signals_sent) {
    if (sent.attempt == attempt && sent.seq > running.signals() && sent.ranks.count(rank)) {
      send_signal_to(entry, sent, rank);
    }
  }
  for (const auto& [step, sent] : entry.input_sent) {
    if (sent.attempt != attempt || sent.rank != rank) continue;
    std::uint64_t received = 0;
    bool eof = false;
    for (const overlay::InputReceived& in : running.input()) {
      if (in.step() == step) {
        received = in.bytes();
        eof = in.eof();
      }
    }
    const std::uint64_t end = sent.begin + sent.bytes.size();
    if (received >= end && (eof || !sent.eof)) continue;
    // Lost bytes older than those kept are gone; the rest goes again.
    const std::uint64_t from = std::max(received, sent.begin);
    overlay::Input input;
    input.set_job_id(entry.job.id);
    input.set_attempt(attempt);
    input.set_step(step);
    input.set_offset(from);
    input.set_data(sent.bytes.substr(from - sent.begin));
    input.set_eof(sent.eof);
    overlay::Envelope envelope;
    envelope.set_dst(rank);
    *envelope.mutable_input() = std::move(input);
    (void)ctx_.overlay->send(std::move(envelope));
  }
}

void JobActions::repeat_unconfirmed() {
  const TimeUs t = ctx_.now();
  const TimeUs after = 2 * static_cast<TimeUs>(ctx_.config.heartbeat_interval_ms) * 1000;
  for (JobId id : ctx_.table.running()) {
    JobEntry& entry = ctx_.table.at(id);
    if (t - entry.sent_at < after) continue;
    if (entry.kill_sent) {
      // Until every node reports the end; a node that has no such job
      // ignores it.
      for (Rank rank : entry.running_on) send_kill(entry, rank);
      entry.sent_at = t;
      continue;
    }
    if (!entry.launch || !entry.launched) continue;  // adopted, or its start not yet committed
    bool repeated = false;
    for (Rank rank : entry.running_on) {
      // A part being taken away is not launched again (it may never have
      // started: an expansion undone).
      if (entry.started_on.count(rank) || entry.removing.count(rank)) continue;
      launch_again(entry, rank);
      repeated = true;
    }
    if (repeated)
      spdlog::info("job {}: launch repeated to the nodes that have not confirmed it", id);
  }
}

// The job's part on `rank` is gone (node down, or not found after a leader
// restart): the rest is killed and the job requeued (--requeue) or failed.
void JobActions::lose_part(JobEntry& entry, Rank rank, const std::string& why) {
  entry.running_on.erase(rank);
  kill_job_parts(entry);
  carry_out(entry,
            job::JobTableCore::after_node_lost(entry, why, restart_checkpoint(entry).has_value()),
            0);
}

void JobActions::requeue_from_checkpoint(JobEntry& entry, const std::string& why) {
  const std::optional<std::size_t> restart = restart_checkpoint(entry);
  if (!restart) {
    requeue_job(entry, why);
    return;
  }
  job::CheckpointRecord& from = entry.checkpoints[*restart];
  entry.job.spec.request.nodes = static_cast<int>(from.nodes.size());  // its images' layout
  requeue_job(entry, why + "; restarting from checkpoint " + from.image);
  entry.restore_from = from.image;
  from.restore_pending = true;
  persist_checkpoint(entry, *restart);
}

std::optional<std::size_t> JobActions::restart_checkpoint(const JobEntry& entry) const {
  return job::restart_checkpoint(entry.job, entry.checkpoints,
                                 entry.restoring ? entry.restored_image : std::string());
}

void JobActions::open_placement(JobEntry& entry) {
  job::Placement p;
  for (const auto& a : entry.job.allocation.nodes) p.nodes.push_back(a.node);
  p.start_us = entry.job.start_time;
  p.restored_from = entry.restored_image;
  entry.placements.push_back(std::move(p));
  persist_placement(entry, entry.placements.size() - 1);
}

void JobActions::close_placement(JobEntry& entry, const std::string& outcome) {
  if (entry.placements.empty() || entry.placements.back().end_us != 0) return;
  entry.placements.back().end_us = ctx_.now();
  entry.placements.back().outcome = outcome;
  persist_placement(entry, entry.placements.size() - 1);
}

// Placement records are kept under "<job>/<n>", n counting runs from 1.
void JobActions::persist_placement(const JobEntry& entry, std::size_t index) {
  persist_job_record(entry.job.id, "placement", index + 1, api::to_proto(entry.placements[index]));
}

void JobActions::release_held(JobEntry& entry) {
  for (Rank rank : entry.held_on) {
    resource::Allocation part = part_on(entry.job.allocation, rank);
    if (entry.cores_handed_over) part = without_cores(std::move(part));
    Status released = ctx_.pool.release(part);
    if (!released.is_ok()) spdlog::error("job {}: release: {}", entry.job.id, released.message());
  }
  entry.held_on.clear();
  entry.cores_handed_over = false;
  for (const auto& [rank, part] : entry.removing) {
    Status released = ctx_.pool.release(part);
    if (!released.is_ok()) spdlog::error("job {}: release: {}", entry.job.id, released.message());
  }
  entry.removing.clear();
  entry.part_of.clear();
  if (run_end_) run_end_(entry);
  entry.launch.reset();
}

void JobActions::end_run(JobEntry& entry, const std::string& outcome, TimeUs end_time) {
  release_held(entry);
  close_placement(entry, outcome);
  charge_usage(entry.job, entry.usage_from, end_time);
}

// end_time: when the job ended on its last node (the agent's clock), or 0 for now.
void JobActions::finish_job(JobEntry& entry, job::JobState state, const std::string& reason,
                            TimeUs end_time) {
  const TimeUs end = end_time > 0 ? end_time : ctx_.now();
  if (entry.job.state == job::JobState::kRunning) {
    end_run(entry, std::string(job::state_name(state)) + (reason.empty() ? "" : ": " + reason),
            end);
  }
  apply(ctx_.table.finish(entry, state, reason, end, ctx_.now()));
}

void JobActions::requeue_job(JobEntry& entry, const std::string& reason) {
  end_run(entry, "requeued: " + reason, ctx_.now());  // the work it did counts, though it is lost
  entry.restoring = false;
  entry.restored_image.clear();
  apply(ctx_.table.requeue(entry, reason));
}

void JobActions::persist(const job::Job& job, const std::string& event, const std::string& detail) {
  store::WriteBatch batch;
  batch.update_job(job);
  batch.append_event(job.id, ctx_.now(), event, detail);
  ctx_.committer->submit(std::move(batch), [id = job.id](Status s) {
    if (!s.is_ok()) spdlog::error("job {}: store update failed: {}", id, s.message());
  });
}

void JobActions::publish(const job::Job& job) {
  v1::JobEvent event;
  event.set_id(job.id);
  event.set_time_us(ctx_.now());
  event.set_state(api::to_proto(job.state));
  event.set_exit_code(job.exit_code);
  event.set_reason(job.reason);
  ctx_.events.append(std::move(event), job.uid);
  // Its agents sent its output before its end: readers may finish.
  if (job.spec.forward_output && job::is_terminal(job.state)) ctx_.output.end(job.id, 0);
}

// A job's record "<job>/<number>" of `kind` (load_job_records reads them).
void JobActions::persist_job_record(JobId id, const char* kind, std::size_t number,
                                    const google::protobuf::Message& record) {
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(record, &json);
  store::WriteBatch batch;
  batch.put_record(kind, std::to_string(id) + "/" + std::to_string(number), json);
  ctx_.committer->submit(std::move(batch), [id, kind](Status s) {
    if (!s.is_ok()) spdlog::error("job {}: {} record: {}", id, kind, s.message());
  });
}

// Checkpoint records are kept under "<job>/<n>", n counting from 1 in the
// order they were taken.
void JobActions::persist_checkpoint(const JobEntry& entry, std::size_t index) {
  persist_job_record(entry.job.id, "checkpoint", index + 1,
                     api::to_proto(entry.checkpoints[index]));
}

void JobActions::persist_checkpoint_in_flight(const JobEntry& entry) {
  persist_job_record(entry.job.id, "checkpoint", entry.checkpoints.size() + 1,
                     api::to_proto(entry.checkpointing->record));
}

// Resize records are kept as checkpoint records are.
void JobActions::persist_resize(const JobEntry& entry, std::size_t index) {
  persist_job_record(entry.job.id, "resize", index + 1, api::to_proto(entry.resizes[index]));
}

}  // namespace hpcq::daemon
