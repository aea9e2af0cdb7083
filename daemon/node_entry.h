// What hpcqd knows of one node: its state as the leader sees it (up, down,
// drained, unresponsive), its topology and what it can checkpoint.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/site_policy.h"
#include "lib/job/constraint.h"
#include "lib/job/job.h"
#include "lib/resource/topology.h"

namespace hpcq::daemon {

enum class NodeState { kUnknown, kUp, kDown };

struct NodeEntry {
  Rank rank = 0;
  std::string name;
  NodeState state = NodeState::kUnknown;
  resource::NodeTopology topology;
  int host_cpus = 1;
  std::vector<int> core_host_cpus;  // by core id, as the agent pins them (Hello)
  TimeUs last_seen = 0;
  bool in_pool = false;
  std::uint64_t incarnation = 0;
  // What its agent said in its latest Hello: the protocol it speaks (0: no
  // Hello yet) and its hpcq version ("0.1.0+88f0ac6"; empty before protocol 2).
  std::uint32_t protocol_version = 0;
  std::string agent_version;
  // After a leader restart: a node that ran jobs is awaited; if it does not
  // say Hello within node_down_after_ms it is declared down like a silent node.
  bool awaited = false;
  std::vector<std::string> features;  // [[rank]] features (-C/--constraint)
  std::map<std::string, int> gres;    // [[rank]] gres (--gres), given to the pool
  bool drained = false;               // hpcq drain: no new work until hpcq resume
  bool unresponsive = false;          // up, but silent for node_unresponsive_after_ms: no new work
  std::string reason;                 // why it is drained or down
  std::uint64_t node_checks_applied = 0;  // the last epilog failure (NodeCheck.seq) drained for
  bool checkpoint_capable = false;
  std::string checkpoint_reason;
  bool checkpoint_other_users = false;  // and of users other than root
  std::string checkpoint_other_users_reason;
};

using NodeMap = std::map<Rank, NodeEntry>;

// Whether new work may go to the node.
bool schedulable(const NodeEntry& node);
// The ranks of the nodes named `names` (a vector, or a checkpoint record's
// repeated "to"), ascending; unknown names skipped.
template <typename Names>
std::vector<Rank> ranks_of(const NodeMap& nodes, const Names& names) {
  std::vector<Rank> ranks;
  for (const auto& [rank, node] : nodes) {
    if (std::find(names.begin(), names.end(), node.name) != names.end()) ranks.push_back(rank);
  }
  return ranks;  // ascending: the map's order
}

// Where a job may run: one of its queue's nodes (`pool`; empty: every
// node), within -w's names (`nodelist`) if given, not one -x names
// (`exclude`), and with the features -C asks for (`constraint`).
struct NodeFilter {
  const std::vector<std::string>& pool;
  const std::vector<std::string>& nodelist;
  const std::vector<std::string>& exclude;
  const job::Constraint& constraint;
};
bool may_run_on(const std::string& name, const std::vector<std::string>& features,
                const NodeFilter& filter);

// The ranks a job may run on (may_run_on), ascending.
// Empty when the filter filters nothing (the scheduler's "any"). Where it
// leaves no node, a rank no node has, so that the job waits rather than runs
// anywhere.
std::vector<Rank> eligible_ranks(const NodeMap& nodes, const NodeFilter& filter);
// The same for a job: its queue's nodes (in `site`), -w, -x and -C. A
// constraint that no longer parses (validate() parsed it at submit) leaves
// no node: the job waits.
std::vector<Rank> job_eligible_ranks(const NodeMap& nodes, const SitePolicy& site,
                                     const job::JobSpec& spec);

}  // namespace hpcq::daemon
