// The nodes as the leader sees them: an agent's Hello brings its node up
// (topology, checkpoint ability) and, after a leader restart, the jobs it
// still runs are adopted; heartbeats keep it up; silence makes it
// unresponsive (no new work), then down (its jobs lose their parts); hpcq
// drain and resume. Owns the NodeEntry states and the pool's nodes.
#pragma once

#include <string>

#include "daemon/checkpoints.h"
#include "daemon/context.h"
#include "daemon/job_actions.h"
#include "daemon/job_reports.h"
#include "daemon/resizes.h"

namespace hpcq::daemon {

class NodeMonitor {
 public:
  NodeMonitor(Context& ctx, JobActions& actions, Resizes& resizes, Checkpoints& checkpoints,
              JobReports& reports)
      : ctx_(ctx),
        actions_(actions),
        resizes_(resizes),
        checkpoints_(checkpoints),
        reports_(reports) {}
  NodeMonitor(const NodeMonitor&) = delete;
  NodeMonitor& operator=(const NodeMonitor&) = delete;

  // When the leader began watching the nodes: a node that has not joined
  // node_down_after_ms later is down.
  void start_watching() { started_at_ = ctx_.now(); }
  void on_hello(Rank rank, const overlay::Hello& hello);
  void heard_from(NodeEntry& node);
  // Two-level liveness, as Flux's (see the definition).
  void check_heartbeats();
  // hpcq drain / resume of the node named `name`; `by` names who did it.
  Status drain(const std::string& name, bool drained, const std::string& reason,
               const std::string& by);
  // The agent's epilog or health check (overlay::NodeCheck): a failure
  // drains the node, unless it is drained already; a pass resumes a node
  // that a health check drained.
  void on_node_check(Rank rank, const overlay::NodeCheck& check);
  v1::ListNodesResponse list_nodes() const;
  v1::ListQueuesResponse list_queues() const;

 private:
  // What a Hello says of its agent: incarnation, versions, CPUs, checkpoints.
  void take_agent_facts(NodeEntry& node, const overlay::Hello& hello);
  void rejoin_restarted_agent(NodeEntry& node, const overlay::Hello& hello);
  // Which agent a Hello's jobs come from, as this leader knew its node.
  enum class Adoption {
    kNewAgent,        // a node down or not yet heard of: its parts go back into the pool
    kSameAgent,       // the process of before this leader's restart: a missing part never arrived
    kRestartedAgent,  // a new process on a node that stayed up: its parts are held already
  };
  void adopt_reported_jobs(NodeEntry& node, const overlay::Hello& hello, Adoption how);
  void node_down(NodeEntry& node, const std::string& reason);
  void set_schedulable_in_pool(Rank rank, bool schedulable);
  void persist_node(const NodeEntry& node);

  Context& ctx_;
  JobActions& actions_;
  Resizes& resizes_;
  Checkpoints& checkpoints_;
  JobReports& reports_;
  TimeUs started_at_ = 0;
};

}  // namespace hpcq::daemon
