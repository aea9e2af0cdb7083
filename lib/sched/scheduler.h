// The scheduler: a pure function from a Snapshot to Decisions, configured by
// data (which actions run, in which order, and which plugins supply their
// hooks), as in Volcano: open a Session, let each plugin register its hooks,
// run each action, return the decisions.
//
// Deterministic: the same configuration and snapshot give the same decisions
// (ties: submit time, then job id; nodes in rank order). No I/O, no clock,
// no threads; the Scheduler is used by one thread (the daemon's event loop
// or the simulator).
//
// Errors: create() fails with kInvalidArgument on an unknown or repeated
// action or plugin name ("unknown scheduler action 'x' (known: allocate)")
// or on an empty action list, and on a bad option: a key that is not
// "<name>.<option>", names an action or plugin that is not configured, or
// that it rejects ("scheduler option 'backfill.reservation_depth': 'x' is not
// ...").
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/core/status.h"
#include "lib/sched/action.h"
#include "lib/sched/decision.h"
#include "lib/sched/plugin.h"
#include "lib/sched/snapshot.h"

namespace hpcq::sched {

struct SchedulerConfig {
  std::vector<std::string> actions = {"allocate"};
  std::vector<std::string> plugins = {"fcfs"};
  // Action and plugin options, "<name>.<option>" -> value, e.g.
  // {"backfill.reservation_depth", "1"}; see each action's and plugin's
  // header. An action and a plugin never share a name.
  std::map<std::string, std::string> options = {};
};

class Scheduler {
 public:
  static Result<Scheduler> create(const SchedulerConfig& config);

  Scheduler(Scheduler&&) noexcept = default;
  Scheduler& operator=(Scheduler&&) noexcept = default;
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  ~Scheduler() = default;

  // One cycle. The snapshot's pool must not change during the call.
  Decisions cycle(const Snapshot& snapshot);

 private:
  Scheduler() = default;

  std::vector<std::unique_ptr<Action>> actions_;
  std::vector<std::unique_ptr<Plugin>> plugins_;
};

}  // namespace hpcq::sched
