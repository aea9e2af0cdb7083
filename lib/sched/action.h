// A scheduling action: one step of a cycle (allocate, backfill, preempt...),
// run in the configured order over the Session, using the hooks that plugins
// registered. The Scheduler owns its actions and runs them on its one
// thread.
#pragma once

#include <string_view>

#include "lib/sched/session.h"

namespace hpcq::sched {

class Action {
 public:
  virtual ~Action() = default;
  // The name in the configuration ("allocate").
  virtual std::string_view name() const = 0;
  virtual void execute(Session& session) = 0;
};

}  // namespace hpcq::sched
