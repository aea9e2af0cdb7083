// Typed values of a job's life that cross the daemon's boundaries, converted
// to text only at its edges (the public API, the store, logs). The rest of
// the records (checkpoints, resizes, placements as plain structs) are to
// follow here (issue 19).
#pragma once

#include <optional>
#include <string_view>

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

}  // namespace hpcq::job
