#include "lib/sched/scheduler.h"

#include <algorithm>
#include <span>

#include "lib/sched/registry.h"
#include "lib/sched/session.h"

namespace hpcq::sched {
namespace {

template <typename Entry>
std::string known_names(std::span<const Entry> table) {
  std::string names;
  for (const Entry& e : table) {
    if (!names.empty()) names += ", ";
    names += e.name;
  }
  return names;
}

// Checks the names in `names` against `table`; `kind` is "action" or "plugin".
template <typename Entry>
Result<std::vector<const Entry*>> lookup(std::span<const Entry> table,
                                         const std::vector<std::string>& names, const char* kind) {
  std::vector<const Entry*> out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    if (std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(i), name) !=
        names.begin() + static_cast<std::ptrdiff_t>(i)) {
      return invalid_argument("scheduler " + std::string(kind) + " '" + name + "' is listed twice");
    }
    auto entry =
        std::find_if(table.begin(), table.end(), [&](const Entry& e) { return e.name == name; });
    if (entry == table.end()) {
      return invalid_argument("unknown scheduler " + std::string(kind) + " '" + name +
                              "' (known: " + known_names(table) + ")");
    }
    out.push_back(&*entry);
  }
  return out;
}

// Splits "<name>.<option>" keys by action or plugin; each must be configured.
Result<std::map<std::string, ActionOptions>> split_options(const SchedulerConfig& config) {
  std::map<std::string, ActionOptions> out;
  auto configured = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  for (const auto& [key, value] : config.options) {
    const std::size_t dot = key.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == key.size()) {
      return invalid_argument(
          "scheduler option '" + key +
          "' is not <action or plugin>.<option> (e.g. backfill.reservation_depth)");
    }
    std::string owner = key.substr(0, dot);
    if (!configured(config.actions, owner) && !configured(config.plugins, owner)) {
      return invalid_argument("scheduler option '" + key + "' is for '" + owner +
                              "', which is not a configured action or plugin");
    }
    out[owner][key.substr(dot + 1)] = value;
  }
  return out;
}

}  // namespace

Result<Scheduler> Scheduler::create(const SchedulerConfig& config) {
  if (config.actions.empty()) {
    return invalid_argument("no scheduler actions configured (want e.g. actions = [\"allocate\"])");
  }
  auto actions = lookup(action_registry(), config.actions, "action");
  if (!actions.is_ok()) return actions.status();
  auto plugins = lookup(plugin_registry(), config.plugins, "plugin");
  if (!plugins.is_ok()) return plugins.status();
  auto options = split_options(config);
  if (!options.is_ok()) return options.status();
  Scheduler scheduler;
  for (const ActionEntry* entry : *actions) {
    const auto given = options->find(std::string(entry->name));
    auto action = entry->make(given != options->end() ? given->second : ActionOptions{});
    if (!action.is_ok()) return action.status();
    scheduler.actions_.push_back(std::move(action).value());
  }
  for (const PluginEntry* entry : *plugins) {
    const auto given = options->find(std::string(entry->name));
    auto plugin = entry->make(given != options->end() ? given->second : PluginOptions{});
    if (!plugin.is_ok()) return plugin.status();
    scheduler.plugins_.push_back(std::move(plugin).value());
  }
  return scheduler;
}

Decisions Scheduler::cycle(const Snapshot& snapshot) {
  Session session(snapshot);
  for (const auto& plugin : plugins_) plugin->on_session_open(session);
  for (const auto& action : actions_) action->on_session_open(session);
  for (const auto& action : actions_) action->execute(session);
  return session.take_decisions();
}

}  // namespace hpcq::sched
