// A scheduling plugin: supplies orderings, scores and predicates by
// registering typed hooks into each cycle's Session (Volcano's
// OnSessionOpen). A plugin may take options from the configuration
// ("priority.weight_age" reaches "priority" as "weight_age"), checked by its
// factory in registry.cc. Plugins hold no per-cycle state between cycles unless they
// say so; the Scheduler owns them and calls them on its one thread.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "lib/sched/session.h"

namespace hpcq::sched {

// Option name -> value, for one plugin.
using PluginOptions = std::map<std::string, std::string>;

class Plugin {
 public:
  virtual ~Plugin() = default;
  // The name in the configuration ("fcfs").
  virtual std::string_view name() const = 0;
  // Registers this cycle's hooks under name().
  virtual void on_session_open(Session& session) = 0;
};

}  // namespace hpcq::sched
