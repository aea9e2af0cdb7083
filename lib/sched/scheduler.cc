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

// Builds the named objects from `table`; `kind` is "action" or "plugin".
template <typename Entry, typename T>
Status build(std::span<const Entry> table, const std::vector<std::string>& names, const char* kind,
             std::vector<std::unique_ptr<T>>& out) {
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
    out.push_back(entry->make());
  }
  return Status::ok();
}

}  // namespace

Result<Scheduler> Scheduler::create(const SchedulerConfig& config) {
  if (config.actions.empty()) {
    return invalid_argument("no scheduler actions configured (want e.g. actions = [\"allocate\"])");
  }
  Scheduler scheduler;
  HPCQ_RETURN_IF_ERROR(build(action_registry(), config.actions, "action", scheduler.actions_));
  HPCQ_RETURN_IF_ERROR(build(plugin_registry(), config.plugins, "plugin", scheduler.plugins_));
  return scheduler;
}

Decisions Scheduler::cycle(const Snapshot& snapshot) {
  Session session(snapshot);
  for (const auto& plugin : plugins_) plugin->on_session_open(session);
  for (const auto& action : actions_) action->execute(session);
  return session.take_decisions();
}

}  // namespace hpcq::sched
