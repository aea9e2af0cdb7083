#include "lib/job/resize_run.h"

#include <algorithm>
#include <utility>

namespace hpcq::job {

ResizeRun begin_resize_run(std::uint32_t seq, resource::Allocation before,
                           resource::Allocation after, ResizeKind kind, ResizeBy by, TimeUs now,
                           TimeUs timeout_us) {
  ResizeRun run;
  run.seq = seq;
  run.record.time_us = now;
  run.record.from = static_cast<int>(before.nodes.size());
  run.record.to = static_cast<int>(after.nodes.size());
  run.record.kind = kind;
  run.record.by = by;
  if (kind == ResizeKind::kExpand) {
    for (const resource::NodeAllocation& part : after.nodes) {
      const bool had = std::any_of(before.nodes.begin(), before.nodes.end(),
                                   [&part](const auto& p) { return p.rank == part.rank; });
      if (!had) run.added.insert(part.rank);
    }
  }
  run.before = std::move(before);
  run.after = std::move(after);
  run.deadline = now + timeout_us + kResizeMarginUs;
  return run;
}

void notice_sent(ResizeRun& run, TimeUs now, TimeUs timeout_us) {
  run.notified = true;
  run.deadline = now + timeout_us + kResizeMarginUs;
}

bool all_added_started(const ResizeRun& run, const std::set<Rank>& started_on) {
  return !run.notified && !run.added.empty() &&
         std::all_of(run.added.begin(), run.added.end(),
                     [&started_on](Rank r) { return started_on.count(r) > 0; });
}

bool answer_is_current(const ResizeRun& run, Rank from, std::uint32_t seq, std::uint32_t attempt,
                       int requeue_count) {
  return run.notified && run.seq == seq && attempt == static_cast<std::uint32_t>(requeue_count) &&
         !run.before.nodes.empty() && run.before.nodes.front().rank == from;
}

ResizeEnd on_answer(const ResizeRun& run, ResizeOutcome outcome, const std::string& reason) {
  ResizeEnd end;
  end.outcome = outcome;
  end.reason = reason;
  if (run.forced) return end;  // the node is gone already: whatever the answer
  if (run.record.kind == ResizeKind::kShrink && outcome == ResizeOutcome::kAcknowledged) {
    // The application has let the nodes go: take them back.
    end.step = ResizeEnd::Step::kTakeAway;
    end.event = "shrink";
    for (const resource::NodeAllocation& part : run.before.nodes) {
      const bool stays = std::any_of(run.after.nodes.begin(), run.after.nodes.end(),
                                     [&part](const auto& p) { return p.rank == part.rank; });
      if (!stays) end.removed.push_back(part.rank);
    }
  } else if (run.record.kind == ResizeKind::kExpand &&
             (outcome == ResizeOutcome::kDeclined || outcome == ResizeOutcome::kFailed)) {
    // The application refused the new nodes (or could not be told).
    end.step = ResizeEnd::Step::kUndo;
    end.removed.assign(run.added.begin(), run.added.end());
    end.event = "expand_undone";
  }
  return end;
}

ResizeEnd on_deadline(const ResizeRun& run) {
  if (!run.notified) {
    return {ResizeEnd::Step::kUndo,
            ResizeOutcome::kFailed,
            "the new nodes did not start the job in time",
            {run.added.begin(), run.added.end()},
            "expand_undone"};
  }
  return {ResizeEnd::Step::kKeep,
          ResizeOutcome::kTimedOut,
          "no answer from the job's first node",
          {},
          ""};
}

bool undone_by_added_node(const ResizeRun& run, Rank rank) {
  return !run.notified && run.added.count(rank) > 0;
}

ResizeEnd on_added_node_failed(const ResizeRun& run, const std::string& why) {
  return {ResizeEnd::Step::kUndo,
          ResizeOutcome::kFailed,
          why,
          {run.added.begin(), run.added.end()},
          "expand_failed"};
}

ResizeEnd on_run_end() {
  return {ResizeEnd::Step::kKeep, ResizeOutcome::kFailed, "the job ended", {}, ""};
}

ResizeRecord settled_record(ResizeRun run, const ResizeEnd& end, TimeUs now, double answer_seconds,
                            std::vector<std::string> nodes_after) {
  ResizeRecord record = std::move(run.record);
  record.outcome = end.outcome;
  record.reason = end.reason;
  record.answered_us = now;
  record.answer_seconds = answer_seconds;
  record.nodes = std::move(nodes_after);
  return record;
}

}  // namespace hpcq::job
