// The simulator's policy names and the scheduler configuration each stands
// for: one table, one row per policy (`hpcq simulate --policy NAME`). A
// policy is only a name for a SchedulerConfig; the actions and plugins it
// names are looked up by Scheduler::create(), so a row whose action does not
// exist in lib/sched fails there with its one-line error, not here.
//
// Tables are constant; safe from any thread. Errors: kInvalidArgument for an
// unknown name ("unknown policy 'x' (known: fcfs, easy, ...)").
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "lib/core/status.h"
#include "lib/sched/scheduler.h"

namespace hpcq::sim {

struct PolicyEntry {
  std::string_view name;
  std::string_view actions;  // comma-separated, in order
  std::string_view plugins;  // comma-separated
  std::string_view options;  // comma-separated "<action>.<option>=<value>"
  std::string_view summary;  // one line for --help
};

std::span<const PolicyEntry> policies();

// The known names, ", "-separated, for messages and --help.
std::string policy_names();

Result<sched::SchedulerConfig> policy_config(std::string_view name);

}  // namespace hpcq::sim
