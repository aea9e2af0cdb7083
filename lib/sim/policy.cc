#include "lib/sim/policy.h"

#include <vector>

namespace hpcq::sim {
namespace {

constexpr PolicyEntry kPolicies[] = {
    {"fcfs", "allocate", "fcfs", "", "first come, first served; the head job blocks the queue"},
    {"easy", "allocate,backfill", "fcfs", "backfill.reservation_depth=1",
     "FCFS with EASY backfilling (one reservation, for the first blocked job)"},
    {"conservative", "allocate,backfill", "fcfs", "backfill.reservation_depth=unlimited",
     "FCFS with conservative backfilling (a reservation for every blocked job)"},
    // papers/004: conservative backfilling and the migratable gap queue
    // (--gap-queue names it; --checkpoint-cost and --container-efficiency
    // are the paper's t and c).
    {"gap", "allocate,backfill,gap", "fcfs", "backfill.reservation_depth=unlimited",
     "conservative backfilling with a migratable gap queue filling the holes (--gap-queue)"},
    // Slurm's usual setup: priority/multifactor (fair-share on the usage the
    // simulator charges, with --half-life) and EASY backfilling, the
    // plugin's default weights (lib/sched/plugins/priority.h).
    {"multifactor", "allocate,backfill", "priority", "backfill.reservation_depth=1",
     "multifactor priority (age, fair-share with --half-life) with EASY backfilling"},
    // RLScheduler's heuristics (lib/sched/plugins/heuristics.h). Their
    // "backfilling" is a restricted EASY (a job may jump the blocked head only
    // if it ends before the head's reservation); ours is full EASY, which
    // also lets a job through that uses only cores the head will not need
    // (the extra-nodes rule). The backfill action has no switch for that, so
    // the -easy rows may backfill a few more jobs than theirs.
    {"sjf", "allocate", "sjf", "", "shortest requested time first; the head job blocks"},
    {"sjf-easy", "allocate,backfill", "sjf", "backfill.reservation_depth=1",
     "shortest requested time first, EASY backfilling"},
    {"wfp3", "allocate", "wfp3", "", "WFP3: largest (wait/request)^3 * cores first"},
    {"wfp3-easy", "allocate,backfill", "wfp3", "backfill.reservation_depth=1",
     "WFP3 with EASY backfilling"},
    {"unicep", "allocate", "unicep", "", "UNICEP: largest wait / (log2(cores) * request) first"},
    {"unicep-easy", "allocate,backfill", "unicep", "backfill.reservation_depth=1",
     "UNICEP with EASY backfilling"},
    {"f1", "allocate", "f1", "",
     "F1 (Carastan-Santos & de Camargo): smallest log10(request)*cores + 870*log10(submit) first"},
    {"f1-easy", "allocate,backfill", "f1", "backfill.reservation_depth=1",
     "F1 with EASY backfilling"},
    // Paper 001's priority-based elastic policy (lib/sched/actions/elastic.h)
    // for jobs with a node range; rigid jobs go through it too, in priority
    // order. Backfill only adds reservations for the jobs it leaves waiting.
    {"elastic", "enqueue,elastic,allocate,backfill", "fcfs", "backfill.reservation_depth=1",
     "priority-based elastic: start below max, shrink lower priority, expand (--jobs)"},
    // Paper 000's fine-grained MPI placement (lib/sched/plugins/granularity.h)
    // for jobs with a profile; the default policy "none" is its baselines
    // (one worker on one node); --option granularity.policy=scale|granularity.
    {"granularity", "allocate", "fcfs,granularity", "granularity.policy=none",
     "FCFS; MPI jobs with a profile cut into workers and task groups (--jobs)"},
};

std::vector<std::string> split(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    out.emplace_back(list.substr(0, comma));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

std::span<const PolicyEntry> policies() { return kPolicies; }

std::string policy_names() {
  std::string names;
  for (const PolicyEntry& p : kPolicies) {
    if (!names.empty()) names += ", ";
    names += p.name;
  }
  return names;
}

Result<sched::SchedulerConfig> policy_config(std::string_view name) {
  for (const PolicyEntry& p : kPolicies) {
    if (p.name != name) continue;
    sched::SchedulerConfig config;
    config.actions = split(p.actions);
    config.plugins = split(p.plugins);
    for (const std::string& option : split(p.options)) {
      const std::size_t eq = option.find('=');
      config.options[option.substr(0, eq)] = option.substr(eq + 1);
    }
    return config;
  }
  return invalid_argument("unknown policy '" + std::string(name) + "' (known: " + policy_names() +
                          ")");
}

}  // namespace hpcq::sim
