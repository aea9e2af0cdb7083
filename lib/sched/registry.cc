#include "lib/sched/registry.h"

#include "lib/sched/actions/allocate.h"
#include "lib/sched/plugins/fcfs.h"

namespace hpcq::sched {
namespace {

template <typename T, typename Base>
std::unique_ptr<Base> make() {
  return std::make_unique<T>();
}

constexpr ActionEntry kActions[] = {
    {AllocateAction::kName, &make<AllocateAction, Action>},
};

constexpr PluginEntry kPlugins[] = {
    {FcfsPlugin::kName, &make<FcfsPlugin, Plugin>},
};

}  // namespace

std::span<const ActionEntry> action_registry() { return kActions; }
std::span<const PluginEntry> plugin_registry() { return kPlugins; }

}  // namespace hpcq::sched
