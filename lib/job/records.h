// Typed records of a job's life that cross the daemon's boundaries: its
// checkpoints, its runs (placements) and its resizes. Converted to the
// public API's messages, and through them to the store's JSON, only at the
// edges (lib/api/job_proto.h); the daemon and the pure protocol cores
// (lib/job/checkpoint_run.h, lib/job/resize_run.h) use these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/ids.h"

namespace hpcq::job {

// What a checkpoint does to the job once its images are written: it runs
// on (kContinue), goes back to the queue to be restored where it next starts
// (kRequeue: hpcq migrate, a preemption by checkpoint), or the same but held
// until released (kStop).
enum class CheckpointThen { kContinue, kRequeue, kStop };

// "continue", "requeue", "stop": the public API's and the store's words.
const char* checkpoint_then_name(CheckpointThen then);
// nullopt for anything else.
std::optional<CheckpointThen> parse_checkpoint_then(std::string_view text);

// One checkpoint of a job (hpcq checkpoint, migrate, --checkpoint-interval,
// a preemption by checkpoint, a gap move).
struct CheckpointRecord {
  TimeUs time_us = 0;
  CheckpointThen then = CheckpointThen::kContinue;
  std::vector<std::string> nodes;  // where it was dumped
  std::string image;               // the images' directory
  std::uint64_t image_bytes = 0;
  double dump_seconds = 0;       // the slowest node's dump
  std::string outcome;           // "ok", or why not; empty while in flight
  bool restored = false;         // a later start restored it
  bool restore_pending = false;  // the job's next start restores it (after a node loss)
  bool periodic = false;         // taken for --checkpoint-interval
  bool pruned = false;           // its images were removed: a newer periodic one replaced it
  std::vector<std::string> to;   // the nodes its restore may use (migrate --to); empty: any
  // The scheduler took the job off its nodes (a preemption, a gap move or
  // slot end): its cores went to the job it left for as the dump began.
  bool preempted = false;
  JobId preempted_for = 0;  // the job it left for (0: the gap action's own)

  bool ok() const { return outcome == kCheckpointOk; }
  bool in_flight() const { return outcome.empty(); }
  static constexpr char kCheckpointOk[] = "ok";
  bool operator==(const CheckpointRecord&) const = default;
};

// One run of a job: where, from when to when, and how it ended.
struct Placement {
  std::vector<std::string> nodes;
  TimeUs start_us = 0;
  TimeUs end_us = 0;          // 0 while it runs
  std::string restored_from;  // the image it was restored from; empty: started afresh
  std::string outcome;        // how the run ended: "completed", "requeued: ...", ...
  bool operator==(const Placement&) const = default;
};

enum class ResizeKind { kShrink, kExpand };
// kNone: in flight.
enum class ResizeOutcome { kNone, kAcknowledged, kDeclined, kTimedOut, kFailed };
// Who asked: hpcq resize, the scheduler's "elastic" action, the loss of a
// node under an elastic job, or a drain of one of its nodes.
enum class ResizeBy { kUser, kScheduler, kNodeDown, kDrain };

// "shrink", "expand"; "", "acknowledged", "declined", "timed_out", "failed";
// "user", "scheduler", "node_down", "drain": the public API's and the store's words.
const char* resize_kind_name(ResizeKind kind);
const char* resize_outcome_name(ResizeOutcome outcome);
const char* resize_by_name(ResizeBy by);
std::optional<ResizeKind> parse_resize_kind(std::string_view text);
std::optional<ResizeOutcome> parse_resize_outcome(std::string_view text);
std::optional<ResizeBy> parse_resize_by(std::string_view text);

// One shrink or expansion of a running elastic job.
struct ResizeRecord {
  TimeUs time_us = 0;  // when the leader asked the application
  int from = 0;        // node count before
  int to = 0;          // node count asked for
  ResizeKind kind = ResizeKind::kShrink;
  ResizeOutcome outcome = ResizeOutcome::kNone;
  std::string reason;  // for kFailed (and the application's own words); empty otherwise
  ResizeBy by = ResizeBy::kUser;
  TimeUs answered_us = 0;          // when the outcome was known
  double answer_seconds = 0;       // the agent's measure: signal to the application's answer
  std::vector<std::string> nodes;  // the job's nodes after it
  bool operator==(const ResizeRecord&) const = default;
};

}  // namespace hpcq::job
