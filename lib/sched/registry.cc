#include "lib/sched/registry.h"

#include "lib/sched/actions/allocate.h"
#include "lib/sched/actions/backfill.h"
#include "lib/sched/actions/elastic.h"
#include "lib/sched/actions/enqueue.h"
#include "lib/sched/actions/gap.h"
#include "lib/sched/actions/preempt.h"
#include "lib/sched/actions/reclaim.h"
#include "lib/sched/plugins/drf.h"
#include "lib/sched/plugins/fairshare.h"
#include "lib/sched/plugins/fcfs.h"
#include "lib/sched/plugins/granularity.h"
#include "lib/sched/plugins/heuristics.h"
#include "lib/sched/plugins/licenses.h"
#include "lib/sched/plugins/limits.h"
#include "lib/sched/plugins/priority.h"
#include "lib/sched/plugins/proportion.h"

namespace hpcq::sched {
namespace {

// For actions that take no options.
template <typename T>
Result<std::unique_ptr<Action>> make_plain(const ActionOptions& options) {
  if (!options.empty()) {
    return invalid_argument("unknown scheduler option '" + std::string(T::kName) + "." +
                            options.begin()->first + "' (action '" + std::string(T::kName) +
                            "' takes no options)");
  }
  return std::unique_ptr<Action>(std::make_unique<T>());
}

// For plugins that take no options.
template <typename T>
Result<std::unique_ptr<Plugin>> make_plain_plugin(const PluginOptions& options) {
  if (!options.empty()) {
    return invalid_argument("unknown scheduler option '" + std::string(T::kName) + "." +
                            options.begin()->first + "' (plugin '" + std::string(T::kName) +
                            "' takes no options)");
  }
  return std::unique_ptr<Plugin>(std::make_unique<T>());
}

constexpr ActionEntry kActions[] = {
    {AllocateAction::kName, &make_plain<AllocateAction>},
    {BackfillAction::kName, &BackfillAction::create},
    {ElasticAction::kName, &ElasticAction::create},
    {EnqueueAction::kName, &make_plain<EnqueueAction>},
    {GapAction::kName, &GapAction::create},
    {PreemptAction::kName, &PreemptAction::create},
    {ReclaimAction::kName, &ReclaimAction::create},
};

constexpr PluginEntry kPlugins[] = {
    {FcfsPlugin::kName, &make_plain_plugin<FcfsPlugin>},
    {LimitsPlugin::kName, &make_plain_plugin<LimitsPlugin>},
    {LicensesPlugin::kName, &make_plain_plugin<LicensesPlugin>},
    {ProportionPlugin::kName, &make_plain_plugin<ProportionPlugin>},
    {SjfPlugin::kName, &make_plain_plugin<SjfPlugin>},
    {Wfp3Plugin::kName, &Wfp3Plugin::create},
    {UnicepPlugin::kName, &UnicepPlugin::create},
    {F1Plugin::kName, &make_plain_plugin<F1Plugin>},
    {PriorityPlugin::kName, &PriorityPlugin::create},
    {FairSharePlugin::kName, &make_plain_plugin<FairSharePlugin>},
    {DrfPlugin::kName, &DrfPlugin::create},
    {GranularityPlugin::kName, &GranularityPlugin::create},
};

}  // namespace

std::span<const ActionEntry> action_registry() { return kActions; }
std::span<const PluginEntry> plugin_registry() { return kPlugins; }

}  // namespace hpcq::sched
