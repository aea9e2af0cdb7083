// The one table of scheduling actions and plugins known by name.
//
// Adding a policy is adding a row here (and its files under actions/ or
// plugins/); nothing registers itself from a static initialiser. Tables are
// constant; safe from any thread.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "lib/core/status.h"
#include "lib/sched/action.h"
#include "lib/sched/plugin.h"

namespace hpcq::sched {

struct ActionEntry {
  std::string_view name;
  // kInvalidArgument, one line naming the option, for an option the action
  // does not know or a value it cannot use.
  Result<std::unique_ptr<Action>> (*make)(const ActionOptions& options);
};

struct PluginEntry {
  std::string_view name;
  // As for actions: kInvalidArgument for an option it does not know.
  Result<std::unique_ptr<Plugin>> (*make)(const PluginOptions& options);
};

std::span<const ActionEntry> action_registry();
std::span<const PluginEntry> plugin_registry();

}  // namespace hpcq::sched
