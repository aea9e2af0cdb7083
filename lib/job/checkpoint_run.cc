#include "lib/job/checkpoint_run.h"

#include <algorithm>
#include <utility>

namespace hpcq::job {

std::string checkpoint_image(const std::string& root, const Job& job, std::size_t taken) {
  return root + "/job-" + std::to_string(job.id) + "/" + std::to_string(taken + 1) + "-" +
         std::to_string(job.requeue_count);
}

std::string part_image_dir(const CheckpointRecord& record, std::size_t index) {
  return record.image + "/part-" + std::to_string(index);
}

CheckpointRun begin_checkpoint_run(const Job& job, CheckpointThen then, std::string image,
                                   std::vector<std::string> to, bool periodic, TimeUs now) {
  CheckpointRun run;
  run.record.time_us = now;
  run.record.then = then;
  run.record.image = std::move(image);
  run.record.to = std::move(to);
  run.record.periodic = periodic;
  for (const resource::NodeAllocation& part : job.allocation.nodes) {
    run.record.nodes.push_back(part.node);
    run.waiting.insert(part.rank);
  }
  run.deadline = now + kCheckpointTimeoutUs;
  return run;
}

bool periodic_checkpoint_due(const Job& job, const std::vector<CheckpointRecord>& taken,
                             TimeUs now) {
  if (job.state != JobState::kRunning || job.spec.checkpoint_interval_s <= 0) return false;
  TimeUs last = job.start_time;
  for (const CheckpointRecord& r : taken) last = std::max(last, r.time_us);
  return now - last >= job.spec.checkpoint_interval_s * kUsPerSecond;
}

namespace {

void add_failure(CheckpointRecord& record, const std::string& why) {
  record.outcome = record.outcome.empty() ? why : record.outcome + "; " + why;
}

}  // namespace

bool take_answer(JobRecord& record, CheckpointRun& run, Rank node, const std::string& node_name,
                 const CheckpointAnswer& answer) {
  if (record.job.state != JobState::kRunning ||
      answer.attempt != static_cast<std::uint32_t>(record.job.requeue_count) ||
      answer.image_dir.rfind(run.record.image + "/", 0) != 0 || !run.waiting.erase(node)) {
    return false;
  }
  if (!answer.ok) {
    add_failure(run.record, node_name + ": " + answer.reason);
  } else {
    run.record.image_bytes += answer.image_bytes;
    run.record.dump_seconds = std::max(run.record.dump_seconds, answer.dump_seconds);
  }
  if (answer.stopped) record.running_on.erase(node);
  return true;
}

void give_up_waiting(CheckpointRun& run, const std::string& late) {
  add_failure(run.record, late + ": no answer");
  run.waiting.clear();
}

namespace {

// Why a job that left its nodes with a good checkpoint is back in the queue.
std::string leave_reason(const JobRecord& record, const CheckpointRecord& checkpoint) {
  const bool stop = checkpoint.then == CheckpointThen::kStop;
  if (!record.preempted) return stop ? "checkpointed and stopped" : "checkpointed";
  if (record.preempted->for_job != 0) {
    return "preempted by job " + std::to_string(record.preempted->for_job) + ", checkpointed";
  }
  // The gap action's own saves: a move to a hole, or a slot's end.
  std::string to;
  for (const std::string& node : checkpoint.to) to += (to.empty() ? "" : ",") + node;
  return to.empty() ? "checkpointed at the end of its slot" : "checkpointed to move to " + to;
}

}  // namespace

CheckpointEnd end_checkpoint(JobRecord& record, CheckpointRun& run, bool asked, bool timed_out) {
  CheckpointRecord& checkpoint = run.record;
  const std::string name = "job " + std::to_string(record.job.id);
  CheckpointEnd end;
  end.ok = checkpoint.outcome.empty();
  if (end.ok) checkpoint.outcome = CheckpointRecord::kCheckpointOk;
  if (checkpoint.then == CheckpointThen::kContinue) {
    end.kind = CheckpointEnd::Kind::kRunsOn;
    if (!end.ok)
      end.error = name + ": checkpoint failed (" + checkpoint.outcome + "); the job runs on";
    return end;
  }
  if (!end.ok && asked && !timed_out &&
      record.running_on.size() == record.job.allocation.nodes.size()) {
    // Asked for by a user and no part was stopped (a failed dump resumes
    // its part): the job runs on where it was. A preemption's victim (no one
    // asked) must leave all the same: below.
    end.kind = CheckpointEnd::Kind::kRunsOn;
    end.error = name + ": checkpoint failed (" + checkpoint.outcome + "); the job runs on";
    return end;
  }
  if (!end.ok) {
    // The parts that were stopped are gone; the others still run: end
    // them, then run the job again from the start. Never lost, never twice.
    end.kind = CheckpointEnd::Kind::kRequeueFromStart;
    record.requeue_when_ended = "checkpoint failed (" + checkpoint.outcome + ")";
    end.error = name + ": checkpoint failed (" + checkpoint.outcome +
                "); the job is requeued to run from the start";
    return end;
  }
  end.kind = CheckpointEnd::Kind::kLeaves;
  end.why = leave_reason(record, checkpoint);
  end.hold = checkpoint.then == CheckpointThen::kStop;
  // With as many tasks on each node (checked before the dump), any
  // placement on as many nodes fits the images.
  record.job.spec.request.nodes = static_cast<int>(checkpoint.nodes.size());
  return end;
}

std::optional<std::size_t> restart_checkpoint(const Job& job,
                                              const std::vector<CheckpointRecord>& taken,
                                              const std::string& restored_image) {
  for (std::size_t i = taken.size(); i-- > 0;) {
    const CheckpointRecord& r = taken[i];
    const int nodes = static_cast<int>(r.nodes.size());
    if (!r.ok() || r.pruned || nodes == 0 || job.spec.request.ntasks % nodes != 0) continue;
    const bool this_run = r.time_us >= job.start_time;
    if (job.spec.checkpoint_interval_s > 0 && this_run) return i;
    if (!restored_image.empty() && r.image == restored_image) return i;
  }
  return std::nullopt;
}

NextRestore next_restore(const std::vector<CheckpointRecord>& taken) {
  NextRestore next;
  if (taken.empty()) return next;
  const CheckpointRecord& last = taken.back();
  if (last.then != CheckpointThen::kContinue && last.ok() && !last.restored) {
    next = {last.image, last.to};
  }
  for (const CheckpointRecord& r : taken) {
    if (r.restore_pending) next.image = r.image;
  }
  return next;
}

std::vector<std::size_t> mark_restored(std::vector<CheckpointRecord>& taken,
                                       const std::string& image) {
  std::vector<std::size_t> changed;
  for (std::size_t i = 0; i < taken.size(); ++i) {
    if (taken[i].image != image) continue;
    taken[i].restored = true;
    taken[i].restore_pending = false;
    changed.push_back(i);
  }
  return changed;
}

std::optional<CheckpointRun> resume_checkpoint_run(JobRecord& record,
                                                   std::vector<CheckpointRecord>& taken,
                                                   TimeUs now) {
  const bool resumes = record.job.state == JobState::kRunning && !taken.empty() &&
                       taken.back().in_flight() && taken.back().then != CheckpointThen::kContinue;
  for (std::size_t i = 0; i + (resumes ? 1 : 0) < taken.size(); ++i) {
    if (taken[i].in_flight()) taken[i].outcome = "unknown: the leader restarted during it";
  }
  if (!resumes) return std::nullopt;
  CheckpointRun run;
  run.record = std::move(taken.back());
  taken.pop_back();
  run.deadline = now + kCheckpointTimeoutUs;
  for (const resource::NodeAllocation& part : record.job.allocation.nodes) {
    run.waiting.insert(part.rank);
  }
  if (run.record.preempted) {
    record.preempted = Preemption{run.record.preempted_for, PreemptMode::kCheckpoint};
  }
  return run;
}

}  // namespace hpcq::job
