// Where does a job fit now? A pure function of a request and a NodePool.
//
// Policy (exclusive cores unless the request oversubscribes; task layout as
// described in allocation.h):
//   - nodes = N: ntasks spread as evenly as possible over N nodes, the first
//     nodes getting the extra task (a node that cannot hold the extra task
//     may take one fewer when a later chosen node can: the extras go to the
//     earliest chosen nodes that fit them). The earliest nodes that fit are
//     chosen.
//   - nodes = 0: as few nodes as the tasks fit on, filling nodes greedily in
//     node order; among the sets of that minimal size the one that is
//     earliest in node order is chosen (a 4-task job on a cluster whose
//     first node has 2 free cores and whose second has 8 goes to the second).
//   - every task gets cpus_per_task cores; a node holds
//     floor(free cores / cpus_per_task) tasks at most (with kSingleNumaNode,
//     the sum over its domains of floor(free cores in the domain /
//     cpus_per_task)); an oversubscribing request counts the cores it may
//     share instead of the free ones, and prefers free cores to shared ones.
//     Reserved system cores are never given.
//   - within a node (as Kubernetes' topology manager, best-effort): the
//     fewest NUMA domains, then the fewest packages, then the lowest domain
//     ids that can hold the node's tasks with each task inside one domain;
//     only when no set can do that may a task span domains (then the fewest
//     domains by free cores, domains taken in package order). Cores are the
//     lowest free ids of each domain. core_distribution kBlock fills a domain
//     before the next; kCyclic deals the tasks round-robin over the chosen
//     domains. NumaPolicy kNone takes the lowest free cores in id order.
//   - gpus_per_task: each task's GPUs come from its cores' NUMA domain when
//     the node can do that for all its tasks (the domains are then chosen
//     for cores and GPUs together); otherwise (best effort) each task gets
//     the free GPUs nearest its cores: same domain, same package, any.
//     kSingleNumaNode refuses the node instead.
//   - gpus_per_node: the GPUs from the fewest NUMA domains, and the tasks'
//     cores from those domains when they hold them.
//   - mem_per_cpu_bytes: a node gives this times its cores, and holds no more
//     tasks than its free memory pays for.
//   - mem_per_node_bytes must fit each node's free memory; it becomes each
//     NodeAllocation's memory_bytes (0 when the request names none).
//   - gres: a node is a candidate only with each asked generic resource's
//     count free; every NodeAllocation holds that count of each.
//   - exclusive (whole nodes): a node is a candidate only when idle
//     (NodeState::idle(): no core, GPU, memory or gres unit in use by
//     anyone, no oversubscribing job), and the tasks are counted and chosen
//     as above. Each NodeAllocation then holds the whole node: every core
//     but the reserved ones, every GPU, all its memory and every gres unit,
//     so that nothing else is placed there while it runs (every request
//     needs a core; the pool refuses the rest). The tasks get an even share
//     of their node's cores: the allocation's cpus_per_task is the widest
//     share (at least the request's) that every node's tasks fit with under
//     the request's NUMA policy and GPUs per task, each task's share placed
//     by the rules above; the cores left over (fewer than a task's share,
//     or the domains a kSingleNumaNode task cannot reach) come last in the
//     part's cores, the job's but bound to no task.
//   - nodes that are not schedulable are skipped.
// Deterministic: the same request and pool give the same Allocation.
//
// Threads: pure; safe from any thread on a pool nobody is changing.
// Errors: an unsatisfiable or malformed request yields nullopt; use
// check_request() to tell the two apart.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "lib/core/status.h"
#include "lib/resource/allocation.h"
#include "lib/resource/node_pool.h"

namespace hpcq::resource {

// kInvalidArgument unless ntasks >= 1, cpus_per_task >= 1, nodes >= 0,
// nodes <= ntasks (every node of a job runs at least one task), GPU counts
// >= 0 and not both per node and per task, memory not both per node and
// per CPU, every gres count >= 1, and not both exclusive and oversubscribe.
Status check_request(const ResourceRequest& request);

// Over all nodes of the pool in rank order.
std::optional<Allocation> find_allocation(const ResourceRequest& request, const NodePool& pool);

// Over `candidates` in this preference order (the scheduler's plugins filter
// and order nodes); the Allocation lists its nodes in this order too. The
// pointers must stay valid for the call; they must be distinct.
std::optional<Allocation> find_allocation(const ResourceRequest& request,
                                          std::span<const NodeState* const> candidates);

// How many tasks of `request` this node could hold now (0 when not
// schedulable or its memory, GPUs or gres do not fit). O(NUMA domains + GPUs);
// find_allocation places on a node exactly when this says the tasks fit.
int task_capacity(const ResourceRequest& request, const NodeState& node);

// The global ranks of the tasks on allocation.nodes[node_index], in local
// order (block: consecutive from first_task; cyclic: dealt round-robin over
// the allocation's nodes). Empty for an index out of range.
std::vector<int> task_ranks(const Allocation& allocation, std::size_t node_index);

// Each task's cores, bound PUs (per allocation.cpu_bind), NUMA domains and
// GPUs on allocation.nodes[node_index], whose hardware is `topology`: what
// the agent needs for per-task affinity and CUDA_VISIBLE_DEVICES. Core or
// GPU ids outside the topology are skipped (a bug upstream, not a crash).
// A part with fewer cores than its tasks times cpus_per_task (a smaller
// node added to an exclusive elastic job) gives each task an even share.
std::vector<TaskPlacement> task_layout(const Allocation& allocation, std::size_t node_index,
                                       const NodeTopology& topology);

}  // namespace hpcq::resource
