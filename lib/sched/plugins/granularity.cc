#include "lib/sched/plugins/granularity.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace hpcq::sched {
namespace {

// Whether Algorithm 2 deals the ranks into groups whose loads differ by at
// most one: only then does the allocator's even spread over N_g nodes give
// each group a node of exactly its size.
bool even_groups(int ranks, const resource::Granularity& g) {
  if (g.workers < g.groups) return false;  // a group would be empty
  auto workers = resource::split_workers(ranks, g, 0, 0);
  if (!workers.is_ok()) return false;
  std::vector<int> load(static_cast<std::size_t>(g.groups), 0);
  for (const resource::Worker& w : *workers) load[static_cast<std::size_t>(w.group)] += w.slots();
  const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
  return *hi - *lo <= 1;
}

}  // namespace

Result<std::unique_ptr<Plugin>> GranularityPlugin::create(const PluginOptions& options) {
  resource::GranularityPolicy policy = resource::GranularityPolicy::kNone;
  bool task_group = true;
  for (const auto& option : options) {
    const std::string& key = option.first;
    const std::string& value = option.second;
    if (key == kPolicy) {
      const std::optional<resource::GranularityPolicy> parsed = resource::parse_policy(value);
      if (!parsed) {
        return invalid_argument("scheduler option 'granularity.policy': '" + value +
                                "' is not scale, granularity or none");
      }
      policy = *parsed;
    } else if (key == kTaskGroup) {
      if (value != "true" && value != "false") {
        return invalid_argument("scheduler option 'granularity.task_group': '" + value +
                                "' is not true or false");
      }
      task_group = value == "true";
    } else {
      return invalid_argument("unknown scheduler option 'granularity." + key +
                              "' (known: policy, task_group)");
    }
  }
  return std::unique_ptr<Plugin>(std::make_unique<GranularityPlugin>(policy, task_group));
}

std::optional<resource::Granularity> GranularityPlugin::shape(const PendingJob& job, int nodes,
                                                              int usable_cores) const {
  if (!job.profile || nodes < 1) return std::nullopt;
  const int per_node = usable_cores / std::max(1, job.request.cpus_per_task);
  if (per_node < 1) return std::nullopt;
  resource::GranularityRequest request;
  request.ranks = job.request.ntasks;
  request.profile = *job.profile;
  request.policy = policy_;
  request.nodes_available = nodes;
  request.cores_per_node = per_node;
  request.user_workers = job.workers;
  Result<resource::Granularity> chosen = resource::choose_granularity(request);
  if (!chosen.is_ok()) return std::nullopt;
  resource::Granularity g = *chosen;
  if (even_groups(request.ranks, g)) return g;
  // Only a user's worker count gets here (the policies' counts divide
  // evenly): fewer groups, never fewer nodes than the ranks need.
  const int needed = (request.ranks + per_node - 1) / per_node;
  for (int n = g.groups - 1; n >= std::max(needed, 1); --n) {
    const resource::Granularity fewer{n, g.workers, n};
    if (even_groups(request.ranks, fewer)) return fewer;
  }
  g.workers = g.groups;
  return g;
}

void GranularityPlugin::count(const resource::Allocation& allocation, int sign) {
  for (const resource::NodeAllocation& part : allocation.nodes) {
    std::set<int> groups;
    for (const resource::WorkerPlacement& w : part.workers) groups.insert(w.group);
    groups_on_[part.rank] += sign * std::max<int>(1, static_cast<int>(groups.size()));
  }
}

void GranularityPlugin::on_session_open(Session& session) {
  nodes_ = 0;
  usable_cores_ = 0;
  groups_on_.clear();
  if (const resource::NodePool* pool = session.snapshot().pool; pool != nullptr) {
    for (const resource::NodeState& node : pool->nodes()) {
      if (!node.schedulable()) continue;
      ++nodes_;
      usable_cores_ = std::max(usable_cores_, node.total_cores() - node.reserved_cores());
    }
  }
  for (const RunningJob& r : session.snapshot().running) count(r.allocation, 1);

  const std::string name(kName);
  session.add_shape(name, [this](const PendingJob& job, resource::ResourceRequest& request) {
    const std::optional<resource::Granularity> g = shape(job, nodes_, usable_cores_);
    if (g) request.nodes = g->groups;
  });

  session.add_placed(name, [this](const PendingJob& job, resource::Allocation& allocation) {
    const std::optional<resource::Granularity> g = shape(job, nodes_, usable_cores_);
    if (!g || allocation.nodes.size() != static_cast<std::size_t>(g->groups)) return;
    auto workers = resource::split_workers(job.request.ntasks, *g, 0, 0);
    if (!workers.is_ok()) return;
    const auto groups = static_cast<std::size_t>(g->groups);
    std::vector<std::vector<const resource::Worker*>> members(groups);
    std::vector<int> load(groups, 0);
    for (const resource::Worker& w : *workers) {
      members[static_cast<std::size_t>(w.group)].push_back(&w);
      load[static_cast<std::size_t>(w.group)] += w.slots();
    }
    // Biggest group to the node with the most tasks; ties by group id and
    // by the allocation's node order, so the answer is deterministic.
    std::vector<std::size_t> by_load(groups);
    std::vector<std::size_t> by_tasks(groups);
    for (std::size_t i = 0; i < groups; ++i) by_load[i] = by_tasks[i] = i;
    std::stable_sort(by_load.begin(), by_load.end(),
                     [&load](std::size_t a, std::size_t b) { return load[a] > load[b]; });
    std::stable_sort(by_tasks.begin(), by_tasks.end(), [&allocation](std::size_t a, std::size_t b) {
      return allocation.nodes[a].ntasks > allocation.nodes[b].ntasks;
    });
    for (std::size_t i = 0; i < groups; ++i) {
      if (allocation.nodes[by_tasks[i]].ntasks != load[by_load[i]]) return;  // not our shape
    }
    const auto cpt = static_cast<std::size_t>(std::max(1, allocation.cpus_per_task));
    // Built aside and stored only when every node's layout took its group.
    std::vector<std::vector<resource::WorkerPlacement>> on_node(groups);
    for (std::size_t i = 0; i < groups; ++i) {
      const resource::NodeAllocation& part = allocation.nodes[by_tasks[i]];
      std::size_t slot = 0;
      for (const resource::Worker* w : members[by_load[i]]) {
        resource::WorkerPlacement placed;
        placed.id = w->id;
        placed.group = w->group;
        placed.ranks = w->ranks;
        const std::size_t first = slot * cpt;
        const std::size_t last = (slot + static_cast<std::size_t>(w->slots())) * cpt;
        if (last > part.cores.size()) return;  // a layout this plugin does not know
        placed.cores.assign(part.cores.begin() + static_cast<std::ptrdiff_t>(first),
                            part.cores.begin() + static_cast<std::ptrdiff_t>(last));
        std::sort(placed.cores.begin(), placed.cores.end());
        slot += static_cast<std::size_t>(w->slots());
        on_node[by_tasks[i]].push_back(std::move(placed));
      }
    }
    for (std::size_t i = 0; i < groups; ++i) allocation.nodes[i].workers = std::move(on_node[i]);
  });

  if (!task_group_) return;
  session.add_node_score(name, [this](const PendingJob& job, const resource::NodeState& node) {
    if (!job.profile) return 0.0;
    const auto it = groups_on_.find(node.rank());
    return it == groups_on_.end() ? 0.0 : -static_cast<double>(it->second);
  });
  session.add_on_allocate(name, [this](const PendingJob&, const resource::Allocation& allocation) {
    count(allocation, 1);
  });
  session.add_on_deallocate(
      name,
      [this](const PendingJob&, const resource::Allocation& allocation) { count(allocation, -1); });
}

}  // namespace hpcq::sched
