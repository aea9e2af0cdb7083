// A scheduling action: one step of a cycle (allocate, backfill, preempt...),
// run in the configured order over the Session, using the hooks that plugins
// registered. The Scheduler owns its actions and runs them on its one
// thread.
//
// An action may take options from the configuration (SchedulerConfig's
// "backfill.reservation_depth" reaches "backfill" as "reservation_depth");
// its factory in registry.cc rejects names and values it does not know.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "lib/sched/session.h"

namespace hpcq::sched {

// Option name -> value, for one action.
using ActionOptions = std::map<std::string, std::string>;

class Action {
 public:
  virtual ~Action() = default;
  // The name in the configuration ("allocate").
  virtual std::string_view name() const = 0;
  // Before any action of the cycle runs (e.g. "gap" takes the gap jobs out
  // of the other actions' hands).
  virtual void on_session_open(Session& /*session*/) {}
  virtual void execute(Session& session) = 0;
};

}  // namespace hpcq::sched
