#include "lib/job/records.h"

namespace hpcq::job {

const char* checkpoint_then_name(CheckpointThen then) {
  switch (then) {
    case CheckpointThen::kContinue: return "continue";
    case CheckpointThen::kRequeue: return "requeue";
    case CheckpointThen::kStop: return "stop";
  }
  return "continue";
}

std::optional<CheckpointThen> parse_checkpoint_then(std::string_view text) {
  for (CheckpointThen then :
       {CheckpointThen::kContinue, CheckpointThen::kRequeue, CheckpointThen::kStop}) {
    if (text == checkpoint_then_name(then)) return then;
  }
  return std::nullopt;
}

}  // namespace hpcq::job
