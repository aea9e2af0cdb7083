#include "daemon/resizes.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "lib/resource/allocator.h"
#include "lib/sched/resize.h"
#include "lib/sched/snapshot.h"

namespace hpcq::daemon {
namespace {

std::vector<std::string> node_names(const resource::Allocation& allocation) {
  std::vector<std::string> names;
  for (const auto& part : allocation.nodes) names.push_back(part.node);
  return names;
}

}  // namespace

void Resizes::request(JobEntry& entry, int nodes, ResizePromise promise) {
  const JobId id = entry.job.id;
  const job::Job& job = entry.job;
  const std::string name = "job " + std::to_string(id);
  if (!job.spec.elastic || job.spec.max_nodes == 0) {
    return promise->set_value(
        failed_precondition(name + " is not elastic (submit it with -N MIN-MAX --elastic)"));
  }
  const int lo = job.spec.request.nodes;
  const int hi = job.spec.max_nodes;
  if (nodes < lo || nodes > hi) {
    return promise->set_value(invalid_argument("--nodes: " + std::to_string(nodes) +
                                               " is outside " + name + "'s range " +
                                               std::to_string(lo) + "-" + std::to_string(hi)));
  }
  if (job.state != job::JobState::kRunning) {
    return promise->set_value(failed_precondition(name + " is " + job::state_name(job.state) +
                                                  ": only running jobs can be resized"));
  }
  const int current = static_cast<int>(job.allocation.nodes.size());
  if (nodes == current) {
    return promise->set_value(
        failed_precondition(name + " runs on " + std::to_string(current) + " nodes already"));
  }
  if (std::string why = blocked(entry); !why.empty()) {
    return promise->set_value(failed_precondition(name + " cannot be resized now: " + why));
  }
  Status asked = Status::ok();
  if (nodes < current) {
    // The last nodes first, so that the first node (the application's
    // contact) stays, as the "elastic" action does.
    std::vector<Rank> ranks;
    for (int i = current - 1; i >= nodes; --i) {
      ranks.push_back(job.allocation.nodes[static_cast<std::size_t>(i)].rank);
    }
    asked = begin_shrink(entry, ranks, job::ResizeBy::kUser, promise);
  } else {
    std::vector<const resource::NodeState*> candidates;
    for (const resource::NodeState& node : ctx_.pool.nodes()) {
      if (!node.schedulable()) continue;
      const bool has = std::any_of(job.allocation.nodes.begin(), job.allocation.nodes.end(),
                                   [&node](const auto& part) { return part.rank == node.rank(); });
      if (!has) candidates.push_back(&node);
    }
    std::optional<resource::Allocation> more =
        resource::find_allocation(sched::request_at(job.spec.request, nodes - current), candidates);
    if (!more) {
      return promise->set_value(failed_precondition(
          name + ": no room for " + std::to_string(nodes - current) + " more node(s) now"));
    }
    asked = begin_expand(entry, std::move(*more), job::ResizeBy::kUser, promise);
  }
  if (!asked.is_ok()) promise->set_value(asked);
}

std::string Resizes::blocked(const JobEntry& entry) const {
  if (entry.job.state != job::JobState::kRunning) return "the job is not running";
  if (!entry.job.spec.elastic || entry.job.spec.max_nodes == 0) return "the job is not elastic";
  if (entry.resizing) return "a resize is in flight";
  if (!entry.removing.empty()) return "parts of an earlier resize are still ending";
  if (entry.checkpointing) return "the job is being checkpointed";
  if (entry.kill_sent || entry.cancel_requested || entry.preempted ||
      !entry.requeue_when_ended.empty()) {
    return "the job is ending";
  }
  // Every node has confirmed its part (by STARTED, or by reporting it to a
  // restarted leader, which does not launch an adopted job again).
  if (entry.started_on != entry.running_on) {
    return "the job has not started on all of its nodes yet";
  }
  if (entry.job.allocation.nodes.empty()) return "the job has no nodes";
  return "";
}

Status Resizes::begin_shrink(JobEntry& entry, const std::vector<Rank>& ranks, job::ResizeBy by,
                             ResizePromise promise) {
  job::Job& job = entry.job;
  const std::string name = "job " + std::to_string(job.id);
  if (std::string why = blocked(entry); !why.empty()) {
    return failed_precondition(name + " cannot be resized now: " + why);
  }
  if (std::find(ranks.begin(), ranks.end(), job.allocation.nodes.front().rank) != ranks.end()) {
    // The application's contact (the agent that relays its answer) stays.
    return invalid_argument(name + ": a shrink cannot take the job's first node");
  }
  auto after = sched::shrunk(job.allocation, ranks);
  if (!after.is_ok()) return Status(after.status().code(), name + ": " + after.status().message());
  if (static_cast<int>(after->nodes.size()) < job.spec.request.nodes) {
    return invalid_argument(name + ": a shrink below the range's minimum");
  }
  JobEntry::Resizing r = resizing_to(entry, std::move(after).value(), job::ResizeKind::kShrink, by);
  r.promise = std::move(promise);
  entry.resizing = std::move(r);
  spdlog::info("job {}: shrink {} -> {} nodes asked ({})", job.id, entry.resizing->record.from,
               entry.resizing->record.to, job::resize_by_name(by));
  send_resize_notice(entry);
  return Status::ok();
}

Status Resizes::begin_expand(JobEntry& entry, resource::Allocation added, job::ResizeBy by,
                             ResizePromise promise) {
  job::Job& job = entry.job;
  const std::string name = "job " + std::to_string(job.id);
  if (std::string why = blocked(entry); !why.empty()) {
    return failed_precondition(name + " cannot be resized now: " + why);
  }
  auto after = sched::expanded(job.allocation, added);
  if (!after.is_ok()) return Status(after.status().code(), name + ": " + after.status().message());
  if (static_cast<int>(after->nodes.size()) > job.spec.max_nodes) {
    return invalid_argument(name + ": an expansion above the range's maximum");
  }
  for (const auto& part : added.nodes) {
    auto node = ctx_.nodes.find(part.rank);
    if (node == ctx_.nodes.end() || !schedulable(node->second)) {
      return failed_precondition(name + ": node rank " + std::to_string(part.rank) +
                                 " is not schedulable");
    }
  }
  Status taken = ctx_.pool.allocate(added);
  if (!taken.is_ok()) return Status(taken.code(), name + ": " + taken.message());
  JobEntry::Resizing r = resizing_to(entry, std::move(after).value(), job::ResizeKind::kExpand, by);
  r.promise = std::move(promise);
  for (const auto& part : added.nodes) {
    entry.held_on.insert(part.rank);
    entry.running_on.insert(part.rank);
    entry.part_of[part.rank] = r.seq;
  }
  actions_.charge_segment(entry);
  job.allocation = r.after;
  entry.resizing = std::move(r);
  overlay::Launch launch = actions_.make_launch(job);
  launch.set_part(entry.resizing->seq);
  entry.launch = std::make_shared<const overlay::Launch>(std::move(launch));
  spdlog::info("job {}: expand {} -> {} nodes ({}): launching on the new nodes", job.id,
               entry.resizing->record.from, entry.resizing->record.to, job::resize_by_name(by));
  // As at a start: the new parts are launched once the allocation is
  // committed, so that a restarted leader knows the nodes are the job's.
  const JobId id = job.id;
  const std::uint32_t seq = entry.resizing->seq;
  store::WriteBatch batch;
  batch.update_job(job);
  batch.append_event(job.id, ctx_.now(), "expand", "{}");
  ctx_.committer->submit(std::move(batch), [this, id, seq](Status s) {
    if (!s.is_ok()) spdlog::error("job {}: store update failed: {}", id, s.message());
    ctx_.loop.post([this, id, seq] {
      JobEntry* found = ctx_.table.find(id);
      if (found == nullptr) return;
      JobEntry& e = *found;
      if (!e.resizing || e.resizing->seq != seq || !e.launch) return;
      e.sent_at = ctx_.now();
      for (Rank rank : e.resizing->added) {
        overlay::Envelope envelope;
        envelope.set_dst(rank);
        *envelope.mutable_launch() = *e.launch;
        Status sent = ctx_.overlay->send(std::move(envelope));
        if (!sent.is_ok()) spdlog::warn("job {}: launch on rank {}: {}", id, rank, sent.message());
      }
    });
  });
  return Status::ok();
}

void Resizes::send_resize_notice(JobEntry& entry) {
  JobEntry::Resizing& r = *entry.resizing;
  job::notice_sent(r, ctx_.now(), resize_timeout());
  overlay::Envelope envelope;
  envelope.set_dst(r.before.nodes.front().rank);
  overlay::Resize* m = envelope.mutable_resize();
  m->set_job_id(entry.job.id);
  m->set_attempt(static_cast<std::uint32_t>(entry.job.requeue_count));
  m->set_seq(r.seq);
  m->set_kind(r.record.kind == job::ResizeKind::kShrink ? overlay::Resize::SHRINK
                                                        : overlay::Resize::EXPAND);
  fill_node_allocs(r.after, m->mutable_allocation());
  m->set_timeout_ms(ctx_.config.resize_timeout_ms);
  m->set_forced(r.forced);
  Status sent = ctx_.overlay->send(std::move(envelope));
  // Not repeated: a lost notice times out, which is a safe outcome both ways.
  if (!sent.is_ok()) {
    spdlog::warn("job {}: resize notice not sent: {}", entry.job.id, sent.message());
  }
}

void Resizes::on_resize_done(Rank rank, const overlay::ResizeDone& done) {
  JobEntry* found = ctx_.table.find(done.job_id());
  if (found == nullptr) return;
  JobEntry& entry = *found;
  if (!entry.resizing || !job::answer_is_current(*entry.resizing, rank, done.seq(), done.attempt(),
                                                 entry.job.requeue_count)) {
    spdlog::info("job {}: stale resize answer (seq {}) ignored", done.job_id(), done.seq());
    return;
  }
  using job::ResizeOutcome;
  ResizeOutcome outcome = ResizeOutcome::kFailed;
  switch (done.outcome()) {
    case overlay::ResizeDone::ACKNOWLEDGED: outcome = ResizeOutcome::kAcknowledged; break;
    case overlay::ResizeDone::DECLINED: outcome = ResizeOutcome::kDeclined; break;
    case overlay::ResizeDone::TIMED_OUT: outcome = ResizeOutcome::kTimedOut; break;
    default: break;
  }
  settle(entry, job::on_answer(*entry.resizing, outcome, done.reason()), done.answer_seconds());
}

// Carries out what settles the resize, then records it (store too) and
// answers hpcq resize.
void Resizes::settle(JobEntry& entry, const job::ResizeEnd& end, double answer_seconds) {
  JobEntry::Resizing& r = *entry.resizing;
  if (end.step != job::ResizeEnd::Step::kKeep) {
    take_parts_away(entry, end.removed);
    actions_.charge_segment(entry);
    entry.job.allocation = end.step == job::ResizeEnd::Step::kUndo ? r.before : r.after;
    actions_.persist(entry.job, end.event, "{}");
  }
  ResizePromise promise = std::move(r.promise);
  const TimeUs t = ctx_.now();
  job::ResizeRecord record = job::settled_record(std::move(*entry.resizing), end, t, answer_seconds,
                                                 node_names(entry.job.allocation));
  entry.resizing.reset();
  entry.last_resize = t;
  entry.resizes.push_back(record);
  actions_.persist_resize(entry, entry.resizes.size() - 1);
  spdlog::info("job {}: {} {} -> {} {}{} (answer in {:.3f} s)", entry.job.id,
               job::resize_kind_name(record.kind), record.from, record.to,
               job::resize_outcome_name(record.outcome),
               record.reason.empty() ? "" : ": " + record.reason, answer_seconds);
  if (promise) promise->set_value(std::move(record));
  actions_.schedule_soon();
}

void Resizes::take_parts_away(JobEntry& entry, const std::vector<Rank>& ranks) {
  for (Rank rank : ranks) {
    resource::Allocation part = part_on(entry.job.allocation, rank);
    if (part.nodes.empty()) continue;
    entry.held_on.erase(rank);
    if (!entry.running_on.count(rank)) {
      // Ended already (or never launched): nothing to wait for.
      Status released = ctx_.pool.release(part);
      if (!released.is_ok()) spdlog::error("job {}: release: {}", entry.job.id, released.message());
      entry.part_of.erase(rank);
      continue;
    }
    entry.removing[rank] = std::move(part);
    send_part_kill(entry, rank);
  }
}

void Resizes::send_part_kill(JobEntry& entry, Rank rank) {
  overlay::Envelope kill;
  kill.set_dst(rank);
  overlay::Kill* k = kill.mutable_kill();
  k->set_job_id(entry.job.id);
  k->set_attempt(static_cast<uint32_t>(entry.job.requeue_count));
  k->set_only_part(true);
  auto part = entry.part_of.find(rank);
  k->set_part(part == entry.part_of.end() ? 0 : part->second);
  Status sent = ctx_.overlay->send(std::move(kill));
  if (!sent.is_ok()) {
    spdlog::warn("job {}: kill on rank {}: {}", entry.job.id, rank, sent.message());
  }
}

// Asks every elastic job that runs on `rank` (and could do without it) to
// shrink off it; a job that declines keeps running there, as a rigid job
// does on a drained node.
void Resizes::shrink_off(Rank rank, job::ResizeBy by) {
  for (JobId id : ctx_.table.running()) {
    JobEntry& entry = ctx_.table.at(id);
    const job::Job& job = entry.job;
    if (!job.spec.elastic || job.spec.max_nodes == 0 || !entry.held_on.count(rank)) continue;
    Status asked = begin_shrink(entry, {rank}, by, nullptr);
    if (!asked.is_ok()) {
      spdlog::info("job {}: not shrunk off rank {}: {}", id, rank, asked.message());
    }
  }
}

// An elastic job above its minimum whose part on a dead node is gone goes on
// without it: its allocation shrinks at once (the node is gone whatever the
// application says) and the application is told as of any shrink (outcome
// recorded, kind "shrink", by "node_down"). False when this does not apply
// (not elastic, at its minimum, the dead node is its first, something in
// flight): the caller then fails or requeues the job as a rigid one.
bool Resizes::lose_elastic_part(JobEntry& entry, Rank rank, const std::string& node_name) {
  job::Job& job = entry.job;
  if (!job.spec.elastic || job.spec.max_nodes == 0) return false;
  if (job.allocation.nodes.empty() || job.allocation.nodes.front().rank == rank) return false;
  if (static_cast<int>(job.allocation.nodes.size()) - 1 < job.spec.request.nodes) return false;
  if (entry.resizing || !entry.removing.empty() || entry.checkpointing || entry.kill_sent ||
      entry.cancel_requested || entry.preempted || !entry.requeue_when_ended.empty()) {
    return false;
  }
  const std::vector<Rank> gone = {rank};
  auto after = sched::shrunk(job.allocation, gone);
  if (!after.is_ok()) return false;
  Status released = ctx_.pool.release(part_on(job.allocation, rank));
  if (!released.is_ok()) spdlog::error("job {}: release: {}", job.id, released.message());
  entry.held_on.erase(rank);
  entry.running_on.erase(rank);
  entry.started_on.erase(rank);
  entry.part_of.erase(rank);
  JobEntry::Resizing r = resizing_to(entry, std::move(after).value(), job::ResizeKind::kShrink,
                                     job::ResizeBy::kNodeDown);
  r.forced = true;
  actions_.charge_segment(entry);
  job.allocation = r.after;
  actions_.persist(job, "shrink", "{}");
  entry.resizing = std::move(r);
  spdlog::warn("job {}: node {} is down: the elastic job goes on without it ({} -> {} nodes)",
               job.id, node_name, entry.resizing->record.from, entry.resizing->record.to);
  send_resize_notice(entry);
  return true;
}

void Resizes::check_deadlines() {
  const TimeUs t = ctx_.now();
  std::vector<JobId> overdue;
  for (JobId id : ctx_.table.running()) {
    const JobEntry& entry = ctx_.table.at(id);
    if (entry.resizing && t > entry.resizing->deadline) overdue.push_back(id);
  }
  for (JobId id : overdue) {
    JobEntry& entry = ctx_.table.at(id);
    settle(entry, job::on_deadline(*entry.resizing), 0);
  }
  // Parts taken away by a resize: told again until each reports its end.
  for (JobId id : ctx_.table.running()) {
    JobEntry& entry = ctx_.table.at(id);
    for (const auto& [rank, part] : entry.removing) send_part_kill(entry, rank);
  }
}

JobEntry::Resizing Resizes::resizing_to(JobEntry& entry, resource::Allocation after,
                                        job::ResizeKind kind, job::ResizeBy by) const {
  JobEntry::Resizing r;
  static_cast<job::ResizeRun&>(r) =
      job::begin_resize_run(++entry.resize_seq, entry.job.allocation, std::move(after), kind, by,
                            ctx_.now(), resize_timeout());
  return r;
}

TimeUs Resizes::resize_timeout() const {
  return static_cast<TimeUs>(ctx_.config.resize_timeout_ms) * 1000;
}

bool Resizes::on_part_update(JobEntry& entry, Rank rank, const overlay::JobUpdate& update) {
  if (auto removed = entry.removing.find(rank); removed != entry.removing.end()) {
    if (update.kind() == overlay::JobUpdate::STARTED) return true;
    // A part a resize took away has ended: its cores are free; the job
    // goes on without it, whatever the part's end.
    Status released = ctx_.pool.release(removed->second);
    if (!released.is_ok()) spdlog::error("job {}: release: {}", entry.job.id, released.message());
    entry.removing.erase(removed);
    entry.running_on.erase(rank);
    entry.started_on.erase(rank);
    entry.part_of.erase(rank);
    spdlog::info("job {}: its part on {} has ended (resized away)", entry.job.id,
                 ctx_.nodes.at(rank).name);
    // The job's other parts may have ended meanwhile (it was cancelled).
    if (entry.running_on.empty()) {
      actions_.all_parts_ended(entry, update.time_us());
    } else {
      actions_.schedule_soon();
    }
    return true;
  }
  if (entry.resizing && job::undone_by_added_node(*entry.resizing, rank) &&
      update.kind() != overlay::JobUpdate::STARTED) {
    // An added node could not start its part: the expansion fails, the job
    // goes on as it was. This part has ended already; the others are killed.
    const std::string& node = ctx_.nodes.at(rank).name;
    spdlog::warn("job {}: expansion failed on {}: {}", entry.job.id, node, update.reason());
    settle(entry,
           job::on_added_node_failed(
               *entry.resizing,
               node + ": " + (update.reason().empty() ? "part ended at start" : update.reason())),
           0);
    return on_part_update(entry, rank, update);  // now a removed part's end
  }
  return false;
}

void Resizes::on_part_started(JobEntry& entry) {
  if (entry.resizing && job::all_added_started(*entry.resizing, entry.started_on)) {
    send_resize_notice(entry);  // expand: the nodes are added, then the app is told
  }
}

bool Resizes::on_node_lost(JobEntry& entry, const NodeEntry& node) {
  if (entry.resizing && job::undone_by_added_node(*entry.resizing, node.rank)) {
    // An expansion onto this node had not been told to the app yet: it
    // fails, and the job goes on as it was (the added parts are taken
    // away; this one is gone with its node, just below).
    settle(entry, job::on_added_node_failed(*entry.resizing, "node " + node.name + " went down"),
           0);
  }
  if (auto removed = entry.removing.find(node.rank); removed != entry.removing.end()) {
    // A part a resize took away: the job does not need it.
    Status released = ctx_.pool.release(removed->second);
    if (!released.is_ok()) spdlog::error("job {}: release: {}", entry.job.id, released.message());
    entry.removing.erase(removed);
    entry.running_on.erase(node.rank);
    entry.part_of.erase(node.rank);
    return true;
  }
  return lose_elastic_part(entry, node.rank, node.name);
}

void Resizes::on_run_end(JobEntry& entry) {
  if (entry.resizing) settle(entry, job::on_run_end(), 0);
}

}  // namespace hpcq::daemon
