#include "daemon/checkpoints.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "lib/core/units.h"

namespace hpcq::daemon {
void Checkpoints::request(JobEntry& entry, job::CheckpointThen then, std::vector<std::string> to,
                          bool elsewhere, CheckpointPromise promise) {
  const JobId id = entry.job.id;
  const job::Job& job = entry.job;
  const std::string name = "job " + std::to_string(id);
  if (elsewhere) {
    if (then == job::CheckpointThen::kContinue || !to.empty()) {
      return promise->set_value(
          invalid_argument("elsewhere: only for a job that leaves its nodes, without --to"));
    }
    if (Status ok = checkpointable(entry, then); !ok.is_ok()) return promise->set_value(ok);
    auto others = other_nodes_for(entry);
    if (!others.is_ok()) return promise->set_value(others.status());
    to = std::move(others).value();
  }
  if (!to.empty()) {
    if (then == job::CheckpointThen::kContinue) {
      return promise->set_value(
          invalid_argument("--to: only when the job leaves its nodes "
                           "(migrate, or --then requeue|stop)"));
    }
    for (const std::string& node : to) {
      const bool known = std::any_of(ctx_.nodes.begin(), ctx_.nodes.end(),
                                     [&](const auto& n) { return n.second.name == node; });
      if (!known) return promise->set_value(invalid_argument("--to: unknown node " + quote(node)));
    }
    const std::set<std::string> distinct(to.begin(), to.end());
    const std::size_t needed = job.allocation.nodes.size();
    if (distinct.size() < needed) {
      return promise->set_value(invalid_argument(
          "--to: " + name + " runs on " + std::to_string(needed) +
          " nodes and is restored on as many; " + std::to_string(distinct.size()) + " given"));
    }
  }
  Status started = begin_checkpoint(entry, then, promise, to);
  if (!started.is_ok()) promise->set_value(started);
}

std::string Checkpoints::checkpoint_root() const {
  return ctx_.config.checkpoint_dir.empty() ? ctx_.config.state_dir + "/checkpoints"
                                            : ctx_.config.checkpoint_dir;
}

Result<std::vector<std::string>> Checkpoints::other_nodes_for(const JobEntry& entry) const {
  const job::Job& job = entry.job;
  std::set<Rank> own;
  for (const auto& part : job.allocation.nodes) own.insert(part.rank);
  std::vector<std::string> picked;
  // Each node of the job is restored whole on one other node: it needs as
  // many free cores and GPUs as that part holds.
  std::set<Rank> taken;
  for (const resource::NodeAllocation& part : job.allocation.nodes) {
    for (const auto& [rank, node] : ctx_.nodes) {
      if (own.count(rank) || taken.count(rank) || node.state != NodeState::kUp || node.drained ||
          node.unresponsive || !node.in_pool || !node.checkpoint_capable) {
        continue;
      }
      const resource::NodeState* pooled = ctx_.pool.find(rank);
      if (pooled == nullptr || pooled->free_cores() < static_cast<int>(part.cores.size()) ||
          pooled->free_gpus() < static_cast<int>(part.gpus.size())) {
        continue;
      }
      taken.insert(rank);
      picked.push_back(node.name);
      break;
    }
  }
  if (picked.size() < job.allocation.nodes.size()) {
    return failed_precondition(
        "job " + std::to_string(job.id) + " stays where it is: it needs " +
        std::to_string(job.allocation.nodes.size()) + " other node(s) with " +
        std::to_string(job.allocation.nodes.front().cores.size()) + " free cores, and " +
        std::to_string(picked.size()) + " can take it now (--to names nodes to wait for)");
  }
  return picked;
}

Status Checkpoints::checkpointable(const JobEntry& entry, job::CheckpointThen then) const {
  const job::Job& job = entry.job;
  const std::string name = "job " + std::to_string(job.id);
  if (job.state != job::JobState::kRunning) {
    return failed_precondition(name + " is " + job::state_name(job.state) +
                               ": only running jobs can be checkpointed");
  }
  // A restore needs each node's part to hold as many tasks as its image:
  // it asks for as many nodes as the dump, which gives every node the same
  // count only when the tasks divide evenly over them.
  const int nodes = static_cast<int>(job.allocation.nodes.size());
  if (then != job::CheckpointThen::kContinue && job.spec.request.ntasks % nodes != 0) {
    return failed_precondition(name + " runs " + std::to_string(job.spec.request.ntasks) +
                               " tasks on " + std::to_string(nodes) +
                               " nodes, unevenly, so a restore could not lay them out the same "
                               "way; only --then continue");
  }
  if (entry.checkpointing) return failed_precondition(name + " is being checkpointed already");
  if (entry.resizing || !entry.removing.empty()) {
    return failed_precondition(name + " is being resized");
  }
  if (entry.kill_sent || entry.cancel_requested || entry.preempted ||
      !entry.requeue_when_ended.empty()) {
    return failed_precondition(name + " is ending");
  }
  if (!entry.launched || entry.started_on != entry.running_on) {
    return failed_precondition(name + " has not started on all of its nodes yet");
  }
  for (Rank rank : entry.running_on) {
    const NodeEntry& node = ctx_.nodes.at(rank);
    if (!node.checkpoint_capable) {
      return failed_precondition(
          "node " + node.name + " cannot checkpoint: " +
          (node.checkpoint_reason.empty() ? "no working CRIU" : node.checkpoint_reason));
    }
    if (job.uid != 0 && !node.checkpoint_other_users) {
      return failed_precondition("node " + node.name + " cannot checkpoint " + name + " (of uid " +
                                 std::to_string(job.uid) +
                                 "): " + node.checkpoint_other_users_reason);
    }
  }
  return Status::ok();
}

Status Checkpoints::begin_checkpoint(JobEntry& entry, job::CheckpointThen then,
                                     CheckpointPromise promise, const std::vector<std::string>& to,
                                     bool periodic) {
  HPCQ_RETURN_IF_ERROR(checkpointable(entry, then));
  const job::Job& job = entry.job;
  JobEntry::Checkpointing op;
  static_cast<job::CheckpointRun&>(op) = job::begin_checkpoint_run(
      job, then, job::checkpoint_image(checkpoint_root(), job, entry.checkpoints.size()), to,
      periodic, ctx_.now());
  op.promise = std::move(promise);
  for (std::size_t i = 0; i < job.allocation.nodes.size(); ++i) {
    const resource::NodeAllocation& part = job.allocation.nodes[i];
    overlay::Envelope envelope;
    envelope.set_dst(part.rank);
    overlay::Checkpoint* c = envelope.mutable_checkpoint();
    c->set_job_id(job.id);
    c->set_attempt(static_cast<uint32_t>(job.requeue_count));
    c->set_image_dir(job::part_image_dir(op.record, i));
    c->set_stop(then != job::CheckpointThen::kContinue);
    Status sent = ctx_.overlay->send(std::move(envelope));
    if (!sent.is_ok())
      spdlog::warn("job {}: checkpoint to {}: {}", job.id, part.node, sent.message());
  }
  spdlog::info("job {}: checkpoint ({}) into {}", job.id, job::checkpoint_then_name(then),
               op.record.image);
  entry.checkpointing = std::move(op);
  actions_.persist_checkpoint_in_flight(entry);
  return Status::ok();
}

// --checkpoint-interval: a running job whose last checkpoint of this run (or
// its start) is older than its interval is checkpointed now, and runs on.
void Checkpoints::checkpoint_due_jobs() {
  for (JobId id : ctx_.table.running()) {
    JobEntry& entry = ctx_.table.at(id);
    if (entry.checkpointing ||
        !job::periodic_checkpoint_due(entry.job, entry.checkpoints, ctx_.now()))
      continue;
    if (!checkpointable(entry, job::CheckpointThen::kContinue).is_ok()) continue;  // next tick
    Status s =
        begin_checkpoint(entry, job::CheckpointThen::kContinue, nullptr, {}, /*periodic=*/true);
    if (!s.is_ok()) spdlog::warn("job {}: periodic checkpoint: {}", id, s.message());
  }
}

void Checkpoints::on_checkpoint_done(Rank rank, const overlay::CheckpointDone& done) {
  JobEntry* found = ctx_.table.find(done.job_id());
  if (found == nullptr || !found->checkpointing) return;
  JobEntry& entry = *found;
  job::CheckpointAnswer answer;
  answer.attempt = done.attempt();
  answer.image_dir = done.image_dir();
  answer.ok = done.ok();
  answer.reason = done.reason();
  answer.image_bytes = done.image_bytes();
  answer.dump_seconds = done.dump_seconds();
  answer.stopped = done.stopped();
  if (!job::take_answer(entry, *entry.checkpointing, rank, ctx_.nodes.at(rank).name, answer)) {
    return;
  }
  if (entry.checkpointing->waiting.empty()) finish_checkpoint(entry, /*timed_out=*/false);
}

void Checkpoints::finish_checkpoint(JobEntry& entry, bool timed_out) {
  JobEntry::Checkpointing op = std::move(*entry.checkpointing);
  entry.checkpointing.reset();
  const job::CheckpointEnd end = job::end_checkpoint(entry, op, op.promise != nullptr, timed_out);
  const job::CheckpointRecord& record = op.record;
  entry.checkpoints.push_back(record);
  actions_.persist_checkpoint(entry, entry.checkpoints.size() - 1);
  const JobId id = entry.job.id;
  const char* then = job::checkpoint_then_name(record.then);
  switch (end.kind) {
    case job::CheckpointEnd::Kind::kRunsOn:
      spdlog::info("job {}: {}checkpoint ({}) {}{}", id, record.periodic ? "periodic " : "", then,
                   record.outcome, end.ok ? "" : ": it runs on");
      if (end.ok && record.periodic) prune_periodic_checkpoints(entry);
      break;
    case job::CheckpointEnd::Kind::kRequeueFromStart:
      spdlog::warn("job {}: checkpoint ({}) {}: requeued to run from the start", id, then,
                   record.outcome);
      if (entry.running_on.empty()) {
        actions_.all_parts_ended(entry, ctx_.now());
      } else {
        actions_.kill_job_parts(entry);
      }
      break;
    case job::CheckpointEnd::Kind::kLeaves: {
      const std::optional<job::Preemption> preempted = entry.preempted;
      actions_.requeue_job(entry, end.why);
      if (preempted) entry.yields_to = preempted->for_job;
      entry.restore_from = record.image;
      entry.restore_to = ranks_of(ctx_.nodes, record.to);
      if (end.hold) {
        auto held = ctx_.table.hold(entry, true, "checkpointed; held until released", ctx_.now());
        if (held.is_ok()) actions_.apply(*held);  // requeued: pending
      }
      actions_.schedule_soon();
      break;
    }
  }
  if (!op.promise) return;
  op.promise->set_value(end.ok ? Result<job::CheckpointRecord>(record)
                               : Result<job::CheckpointRecord>(failed_precondition(end.error)));
}

// A good periodic checkpoint replaces the earlier periodic ones: their
// images go (the records stay, marked pruned), unless a restore needs them.
void Checkpoints::prune_periodic_checkpoints(JobEntry& entry) {
  const std::string& newest = entry.checkpoints.back().image;
  for (std::size_t i = 0; i + 1 < entry.checkpoints.size(); ++i) {
    job::CheckpointRecord& r = entry.checkpoints[i];
    if (!r.periodic || r.pruned || r.restore_pending || r.image == newest ||
        r.image == entry.restored_image || r.image == entry.restore_from) {
      continue;
    }
    std::error_code ec;
    std::filesystem::remove_all(r.image, ec);
    if (ec) {
      spdlog::warn("job {}: removing {}: {}", entry.job.id, r.image, ec.message());
      continue;
    }
    r.pruned = true;
    actions_.persist_checkpoint(entry, i);
  }
}

// A record without an outcome was in flight when the leader stopped
// (job::resume_checkpoint_run says which is waited for again: the agents
// repeat their answers in their Hello, and the deadline kills and requeues
// the job as for a node that never answers). A job that left its nodes for
// another job is adopted without its cores.
void Checkpoints::resume_in_flight(JobEntry& entry, TimeUs now) {
  std::optional<job::CheckpointRun> run = job::resume_checkpoint_run(entry, entry.checkpoints, now);
  if (!run) return;
  entry.cores_handed_over = run->record.preempted;
  spdlog::info("job {}: waiting again for its checkpoint ({}) into {}", entry.job.id,
               job::checkpoint_then_name(run->record.then), run->record.image);
  JobEntry::Checkpointing op;
  static_cast<job::CheckpointRun&>(op) = std::move(*run);
  entry.checkpointing = std::move(op);
}

// A job being dumped to leave its nodes (a preemption by checkpoint, a move)
// runs on none of its cores: CRIU freezes its tasks before it dumps them.
// So its cores go back to the pool at once and the job it leaves for starts
// without waiting for the dump (papers/004: a regular job never waits for a
// gap job's save); its memory and GPUs stay taken until its parts end. A
// dump that fails lets the tasks run on until they are killed (they are
// requeued from their last good checkpoint): briefly, the cores are shared.
void Checkpoints::hand_over_cores(JobEntry& entry) {
  if (entry.cores_handed_over) return;
  if (entry.checkpointing) {
    // So that a leader restarted before the dump's answers adopts the job
    // without its cores (the job it left for has them).
    job::CheckpointRecord& record = entry.checkpointing->record;
    record.preempted = true;
    record.preempted_for = entry.preempted ? entry.preempted->for_job : 0;
    actions_.persist_checkpoint_in_flight(entry);
  }
  for (Rank rank : entry.held_on) {
    resource::Allocation cores = part_on(entry.job.allocation, rank);
    for (resource::NodeAllocation& part : cores.nodes) {
      part.memory_bytes = 0;
      part.gpus.clear();
      part.gres.clear();
    }
    Status released = ctx_.pool.release(cores);
    if (!released.is_ok()) spdlog::error("job {}: hand over: {}", entry.job.id, released.message());
  }
  entry.cores_handed_over = true;
  actions_.schedule_soon();  // the job they were freed for starts in the next cycle
}

void Checkpoints::check_deadlines() {
  const TimeUs t = ctx_.now();
  std::vector<JobId> overdue;
  for (JobId id : ctx_.table.running()) {
    const JobEntry& entry = ctx_.table.at(id);
    if (entry.checkpointing && t > entry.checkpointing->deadline) overdue.push_back(id);
  }
  for (JobId id : overdue) {
    JobEntry& entry = ctx_.table.at(id);
    // A node that did not answer may have stopped its part or not: it is
    // told to kill it and no longer waited for.
    std::string late;
    for (Rank rank : entry.checkpointing->waiting) {
      late += (late.empty() ? "" : ",") + ctx_.nodes.at(rank).name;
      actions_.send_kill(entry, rank);
      entry.running_on.erase(rank);
    }
    job::give_up_waiting(*entry.checkpointing, late);
    finish_checkpoint(entry, /*timed_out=*/true);
  }
}

}  // namespace hpcq::daemon
