#include "lib/core/site_policy.h"

namespace hpcq {

const char* preempt_mode_name(PreemptMode mode) {
  switch (mode) {
    case PreemptMode::kOff: return "off";
    case PreemptMode::kRequeue: return "requeue";
    case PreemptMode::kCancel: return "cancel";
    case PreemptMode::kCheckpoint: return "checkpoint";
  }
  return "off";
}

const QueueConfig* SitePolicy::find_queue(const std::string& name) const {
  if (queues.empty()) return nullptr;
  const std::string& wanted =
      !name.empty() ? name : (!default_queue.empty() ? default_queue : queues.front().name);
  for (const QueueConfig& q : queues) {
    if (q.name == wanted) return &q;
  }
  return nullptr;
}

const QosConfig* SitePolicy::find_qos(const std::string& name) const {
  for (const QosConfig& q : qos) {
    if (q.name == name) return &q;
  }
  return nullptr;
}

}  // namespace hpcq
