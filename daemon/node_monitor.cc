#include "daemon/node_monitor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "lib/core/protocol_version.h"
#include "lib/core/units.h"
#include "lib/overlay/messages.h"
#include "lib/store/codec.h"
#include "lib/store/store.h"

namespace hpcq::daemon {

v1::ListNodesResponse NodeMonitor::list_nodes() const {
  v1::ListNodesResponse response;
  std::map<Rank, int> running;
  for (JobId id : ctx_.table.running()) {
    for (const auto& a : ctx_.table.at(id).job.allocation.nodes) running[a.rank]++;
  }
  for (const auto& [rank, node] : ctx_.nodes) {
    v1::Node* n = response.add_nodes();
    n->set_name(node.name);
    n->set_rank(rank);
    std::string state = node.state == NodeState::kUp     ? "up"
                        : node.state == NodeState::kDown ? "down"
                                                         : "unknown";
    if (node.state == NodeState::kUp && node.unresponsive) {
      state = "unresponsive";
    } else if (node.drained && node.state == NodeState::kUp) {
      state = running[rank] > 0 ? "draining" : "drained";
    }
    n->set_state(state);
    n->set_reason(node.reason);
    n->set_checkpoint_capable(node.checkpoint_capable);
    n->set_checkpoint_reason(node.checkpoint_reason);
    n->set_checkpoint_other_users(node.checkpoint_other_users);
    n->set_checkpoint_other_users_reason(node.checkpoint_other_users_reason);
    n->set_cores(node.topology.num_cores());
    n->set_numa(static_cast<int>(node.topology.numa.size()));
    n->set_packages(node.topology.packages);
    n->set_memory_bytes(node.topology.memory_bytes);
    n->set_topology(node.topology.source);
    n->set_host_cpus(node.host_cpus);
    for (const std::string& f : node.features) n->add_features(f);
    for (const auto& [name, count] : node.gres) {
      (*n->mutable_gres())[name] = count;
      const resource::NodeState* in_pool = node.in_pool ? ctx_.pool.find(rank) : nullptr;
      (*n->mutable_free_gres())[name] = in_pool != nullptr ? in_pool->free_gres(name) : 0;
    }
    n->set_free_cores(node.in_pool ? ctx_.pool.free_cores(rank) : 0);
    n->set_gpus(node.topology.num_gpus());
    const resource::NodeState* pooled = node.in_pool ? ctx_.pool.find(rank) : nullptr;
    n->set_free_gpus(pooled ? pooled->free_gpus() : 0);
    n->set_running_jobs(running[rank]);
    n->set_agent_version(node.agent_version);
    n->set_protocol_version(node.protocol_version);
  }
  return response;
}

v1::ListQueuesResponse NodeMonitor::list_queues() const {
  std::set<Rank> busy;
  std::map<std::string, std::pair<int, int>> jobs;  // queue: running, pending
  for (JobId id : ctx_.table.running()) {
    const job::Job& job = ctx_.table.at(id).job;
    ++jobs[job.spec.queue].first;
    for (const auto& a : job.allocation.nodes) busy.insert(a.rank);
  }
  for (const auto& [at, id] : ctx_.table.pending()) {
    ++jobs[ctx_.table.at(id).job.spec.queue].second;
  }
  const SitePolicy& site = ctx_.config.site;
  std::vector<QueueConfig> queues = site.queues;
  if (queues.empty()) queues.emplace_back();  // one queue of every node, named ""
  v1::ListQueuesResponse response;
  for (const QueueConfig& q : queues) {
    v1::QueueSummary* s = response.add_queues();
    s->set_name(q.name);
    s->set_is_default(site.queues.empty() || q.name == site.default_queue);
    s->set_max_time_limit_s(q.limits.max_time_limit_s);
    const std::vector<std::string> none;
    const job::Constraint any;
    for (const auto& [rank, node] : ctx_.nodes) {
      if (!may_run_on(node.name, node.features, {q.nodes, none, none, any})) continue;
      s->add_nodes(node.name);
      const int cores = node.topology.num_cores();
      s->set_cores_total(s->cores_total() + cores);
      if (!schedulable(node) || !node.in_pool) {
        s->set_nodes_other(s->nodes_other() + 1);
        continue;
      }
      const int free = ctx_.pool.free_cores(rank);
      s->set_cores_idle(s->cores_idle() + free);
      s->set_cores_allocated(s->cores_allocated() + cores - free);
      if (busy.count(rank)) {
        s->set_nodes_allocated(s->nodes_allocated() + 1);
      } else {
        s->set_nodes_idle(s->nodes_idle() + 1);
      }
    }
    const auto counted = jobs.find(q.name);
    if (counted != jobs.end()) {
      s->set_jobs_running(counted->second.first);
      s->set_jobs_pending(counted->second.second);
    }
  }
  return response;
}

Status NodeMonitor::drain(const std::string& name, bool drained, const std::string& reason,
                          const std::string& by) {
  auto it = std::find_if(ctx_.nodes.begin(), ctx_.nodes.end(),
                         [&](const auto& n) { return n.second.name == name; });
  if (it == ctx_.nodes.end()) return not_found("no node " + quote(name));
  NodeEntry& node = it->second;
  node.drained = drained;
  node.reason = drained ? (reason.empty() ? "drained by " + by : reason) : "";
  if (node.in_pool) set_schedulable_in_pool(node.rank, schedulable(node));
  persist_node(node);
  spdlog::info("node {}: {}{}", name, drained ? "drained" : "resumed",
               drained ? " (" + node.reason + ")" : "");
  if (drained) resizes_.shrink_off(node.rank, job::ResizeBy::kDrain);
  if (!drained) actions_.schedule_soon();
  return Status::ok();
}

void NodeMonitor::on_node_check(Rank rank, const overlay::NodeCheck& check) {
  NodeEntry& node = ctx_.nodes.at(rank);
  if (check.seq() != 0) {
    overlay::Envelope ack;
    ack.set_dst(rank);
    ack.mutable_node_check_ack()->set_seq(check.seq());
    (void)ctx_.overlay->send(std::move(ack));
    // One sent again because our ack was lost: applied already (an admin
    // may have resumed the node since).
    if (check.seq() <= node.node_checks_applied) return;
    node.node_checks_applied = check.seq();
  }
  const bool by_health_check =
      node.drained && node.reason.rfind(overlay::kHealthCheckReason, 0) == 0;
  const std::string by =
      check.source() == overlay::NodeCheck::EPILOG ? "the epilog" : "the health check";
  if (check.failed()) {
    // An admin's drain keeps its reason; a health check's is brought up to date.
    if (!node.drained || (by_health_check && node.reason != check.reason())) {
      (void)drain(node.name, true, check.reason(), by);
    }
  } else if (check.source() == overlay::NodeCheck::HEALTH_CHECK && by_health_check) {
    (void)drain(node.name, false, "", by);
  }
}

void NodeMonitor::set_schedulable_in_pool(Rank rank, bool schedulable) {
  const resource::NodeState* node = ctx_.pool.find(rank);
  if (node == nullptr) return;
  const bool changed = node->schedulable() != schedulable;
  ctx_.pool.set_schedulable(rank, schedulable);
  if (changed && ctx_.decision_log) ctx_.decision_log->node_state(ctx_.now(), rank, schedulable);
}

namespace {

// Whether this leader takes an agent of the Hello's protocol. A refused one
// gets no Welcome, except an agent newer than this leader: it is told this
// leader's protocol, so that it stops with its own line (it is the one to
// wait for the leader's upgrade).
bool protocol_accepted(overlay::Overlay& overlay, Rank rank, const std::string& name,
                       const overlay::Hello& hello) {
  const ProtocolCheck check = check_agent_protocol(hello.protocol_version());
  if (check.accepted()) return true;
  spdlog::warn("overlay: {} (rank {}, hpcq {}): {}; refused", name, rank,
               hello.agent_version().empty() ? "unknown" : hello.agent_version(), check.reason);
  if (check.verdict == ProtocolCheck::Verdict::kPeerTooNew) {
    overlay::Envelope answer;
    answer.set_dst(rank);
    answer.mutable_welcome()->set_protocol_version(kProtocolVersion);
    (void)overlay.send(std::move(answer));
  }
  return false;
}

}  // namespace

void NodeMonitor::on_hello(Rank rank, const overlay::Hello& hello) {
  NodeEntry& node = ctx_.nodes.at(rank);
  // A refused agent leaves the node as it was.
  if (!protocol_accepted(*ctx_.overlay, rank, node.name, hello)) return;
  if (hello.name() != node.name) {
    spdlog::warn("overlay: rank {} says it is '{}' but the config names it '{}'; refused", rank,
                 hello.name(), node.name);
    return;
  }
  overlay::Envelope welcome;
  welcome.set_dst(rank);
  welcome.mutable_welcome()->set_heartbeat_interval_ms(ctx_.config.heartbeat_interval_ms);
  welcome.mutable_welcome()->set_protocol_version(kProtocolVersion);
  if (node.state == NodeState::kUp && node.incarnation == hello.incarnation()) {
    // A retried Hello (the agent had not yet seen our Welcome), or one after
    // the agent took another way here (the tree healed): what may have been
    // lost on the old way goes again.
    heard_from(node);
    for (const overlay::RunningJob& running : hello.running()) {
      JobEntry* entry = ctx_.table.find(running.job_id());
      if (entry && entry->job.state == job::JobState::kRunning && entry->running_on.count(rank)) {
        actions_.send_again(*entry, rank, running);
      }
    }
    (void)ctx_.overlay->send(std::move(welcome));
    return;
  }
  resource::NodeTopology topo = overlay::topology_from_message(hello.topology());
  if (node.state == NodeState::kUp) {
    // The agent restarted while the leader still counted on it (an upgrade,
    // a new configuration, a crash). Its job shells outlived it and it took
    // them back: the node keeps its place and its jobs, unless it came
    // back another shape.
    if (NodeShape{topo.num_cores(), topo.memory_bytes, topo.num_gpus()} ==
        ctx_.node_shapes.at(rank - 1)) {
      rejoin_restarted_agent(node, hello);
      (void)ctx_.overlay->send(std::move(welcome));
      return;
    }
    for (const overlay::JobUpdate& update : hello.finished()) reports_.on_job_update(rank, update);
    node_down(node, "its agent restarted with another topology");
  }
  // The same agent process as before a leader restart: what it does not
  // know of never reached it (a Launch lost in flight), rather than died.
  const bool same_agent = node.state == NodeState::kUnknown && node.incarnation != 0 &&
                          node.incarnation == hello.incarnation();
  take_agent_facts(node, hello);
  if (node.in_pool) {
    // A node that comes back after being declared down: its jobs were
    // already ended or requeued, and nothing of the pool is in use there.
    ctx_.pool.remove_node(rank);
    node.in_pool = false;
    if (ctx_.decision_log) ctx_.decision_log->node_gone(ctx_.now(), rank);
  }
  node.topology = std::move(topo);
  ctx_.node_shapes.at(rank - 1) =
      NodeShape{node.topology.num_cores(), node.topology.memory_bytes, node.topology.num_gpus()};
  node.state = NodeState::kUp;
  node.unresponsive = false;
  node.last_seen = ctx_.now();
  // Schedulable while the jobs it still runs are adopted (the pool gives no
  // cores on an unschedulable node), then as its drain says.
  Status added = ctx_.pool.add_node(rank, node.name, node.topology, /*schedulable=*/true);
  if (added.is_ok()) added = ctx_.pool.set_gres(rank, node.gres);
  if (!added.is_ok()) {
    spdlog::error("node {}: {}", node.name, added.message());
    node.state = NodeState::kDown;
    return;
  }
  node.in_pool = true;
  node.awaited = false;
  if (ctx_.decision_log) {
    ctx_.decision_log->node(ctx_.now(), rank, node.name, true, node.topology, node.gres);
  }
  if (!node.drained) node.reason.clear();
  adopt_reported_jobs(node, hello, same_agent ? Adoption::kSameAgent : Adoption::kNewAgent);
  set_schedulable_in_pool(rank, schedulable(node));
  (void)ctx_.overlay->send(std::move(welcome));
  persist_node(node);
  spdlog::info("node {} (rank {}) is up: {} cores, {} NUMA domains ({})", node.name, rank,
               node.topology.num_cores(), node.topology.numa.size(), node.topology.source);
  actions_.schedule_soon();
}

void NodeMonitor::take_agent_facts(NodeEntry& node, const overlay::Hello& hello) {
  if (node.incarnation != hello.incarnation()) node.node_checks_applied = 0;  // seqs start over
  node.incarnation = hello.incarnation();
  node.protocol_version = protocol_of(hello.protocol_version());
  node.agent_version = hello.agent_version();
  node.host_cpus = std::max(1, hello.host_cpus());
  node.core_host_cpus.assign(hello.core_host_cpus().begin(), hello.core_host_cpus().end());
  node.checkpoint_capable = hello.checkpoint_capable();
  node.checkpoint_reason = hello.checkpoint_reason();
  node.checkpoint_other_users = hello.checkpoint_other_users();
  node.checkpoint_other_users_reason = hello.checkpoint_other_users_reason();
}

// The node stays up and in the pool, its jobs' parts held.
void NodeMonitor::rejoin_restarted_agent(NodeEntry& node, const overlay::Hello& hello) {
  spdlog::info("node {} (rank {}): its agent restarted ({} jobs still running, {} ended meanwhile)",
               node.name, node.rank, hello.running_size(), hello.finished_size());
  take_agent_facts(node, hello);
  adopt_reported_jobs(node, hello, Adoption::kRestartedAgent);
  heard_from(node);
  persist_node(node);
  actions_.schedule_soon();
}

void NodeMonitor::adopt_reported_jobs(NodeEntry& node, const overlay::Hello& hello, Adoption how) {
  const Rank rank = node.rank;
  const bool restarted = how == Adoption::kRestartedAgent;
  // Ends that happened while the leader or the agent was away (or whose
  // report was lost).
  for (const overlay::JobUpdate& update : hello.finished()) reports_.on_job_update(rank, update);
  // Dumps answered while the leader was away: a part they stopped is gone.
  for (const overlay::CheckpointDone& done : hello.checkpoints_done()) {
    checkpoints_.on_checkpoint_done(rank, done);
  }
  std::set<JobId> reported;
  for (const overlay::RunningJob& r : hello.running()) {
    JobEntry* found = ctx_.table.find(r.job_id());
    if (!job::JobTableCore::adopts(found, rank, r.attempt()) ||
        (restarted && !found->held_on.count(rank))) {
      // Not ours to run any more (cancelled, requeued, failed elsewhere),
      // or a part this leader holds no cores for while the node stayed up:
      // killed, so that no job ever runs twice.
      actions_.kill_part(rank, r.job_id(), r.attempt());
      continue;
    }
    reported.insert(r.job_id());
    JobEntry& entry = *found;
    if (restarted) {
      // Not send_again: the new agent's counts of signals and input start at
      // nothing, so they would all be delivered twice; one lost during the
      // restart stays lost (docs/admin-guide.md). Its time limit is the
      // shell's own record, renewed here in case an update was lost.
      if (entry.time_limit_updated) actions_.send_time_limit(entry, rank);
      continue;
    }
    if (entry.held_on.count(rank)) continue;
    resource::Allocation part = part_on(entry.job.allocation, rank);
    if (entry.cores_handed_over) part = without_cores(std::move(part));
    Status taken = ctx_.pool.allocate(part);
    if (!taken.is_ok()) {
      spdlog::error("job {}: cannot adopt its part on {}: {}", r.job_id(), node.name,
                    taken.message());
      continue;
    }
    entry.held_on.insert(rank);
    entry.started_on.insert(rank);
    spdlog::info("job {}: adopted on {} (still running)", r.job_id(), node.name);
  }
  // Jobs the leader expected on this node that its agent neither runs nor
  // reported ended: lost (the agent restarted, or the launch never arrived).
  for (JobId id : ctx_.table.missing_on(rank, reported)) {
    JobEntry& entry = ctx_.table.at(id);
    if (how == Adoption::kSameAgent && !entry.kill_sent) {
      // Never arrived: launched now, and repeated until confirmed.
      Status taken = ctx_.pool.allocate(part_on(entry.job.allocation, rank));
      if (taken.is_ok()) {
        entry.held_on.insert(rank);
        actions_.launch_again(entry, rank);
        spdlog::info("job {}: its launch never reached {}; launched again", id, node.name);
        continue;
      }
    }
    if (restarted && !entry.kill_sent && entry.held_on.count(rank) &&
        !entry.started_on.count(rank) && entry.launch) {
      // Its launch raced the restart: the part never started there.
      actions_.launch_again(entry, rank);
      spdlog::info("job {}: its launch raced the restart of {}'s agent; launched again", id,
                   node.name);
      continue;
    }
    if (resizes_.lose_elastic_part(entry, rank, node.name)) continue;
    actions_.lose_part(
        entry, rank,
        "its part on " + node.name + (restarted ? " ended with its agent" : " was lost"));
  }
}

void NodeMonitor::heard_from(NodeEntry& node) {
  node.last_seen = ctx_.now();
  if (!node.unresponsive) return;
  node.unresponsive = false;
  set_schedulable_in_pool(node.rank, schedulable(node));
  spdlog::info("node {} (rank {}) is responsive again", node.name, node.rank);
  actions_.schedule_soon();
}

// Two-level liveness, as Flux's: a short silence only stops new work (the
// node may be busy or its network slow); a long one declares the node down
// and handles its jobs.
void NodeMonitor::check_heartbeats() {
  const TimeUs t = ctx_.now();
  const TimeUs down_limit = t - static_cast<TimeUs>(ctx_.config.node_down_after_ms) * 1000;
  const TimeUs quiet_limit = t - static_cast<TimeUs>(ctx_.config.node_unresponsive_after_ms) * 1000;
  for (auto& [rank, node] : ctx_.nodes) {
    if (node.state == NodeState::kUnknown && !node.awaited && started_at_ < down_limit) {
      // Configured but absent since the leader started: down, as Flux
      // counts a rank that never joined (DESIGN.md: "a node configured but
      // absent is simply down"). Its Hello brings it up whenever it comes.
      node.state = NodeState::kDown;
      if (!node.drained) node.reason = "has not joined";
      spdlog::warn("node {} (rank {}) is down: it has not joined in {} ms", node.name, rank,
                   ctx_.config.node_down_after_ms);
      continue;
    }
    bool watched =
        node.state == NodeState::kUp || (node.state == NodeState::kUnknown && node.awaited);
    if (!watched) continue;
    if (node.last_seen < down_limit) {
      node_down(node, "no heartbeat for " + std::to_string(ctx_.config.node_down_after_ms) + " ms");
    } else if (node.state == NodeState::kUp && !node.unresponsive && node.last_seen < quiet_limit) {
      node.unresponsive = true;
      set_schedulable_in_pool(rank, false);
      spdlog::warn("node {} (rank {}) is unresponsive: no heartbeat for {} ms", node.name, rank,
                   ctx_.config.node_unresponsive_after_ms);
    }
  }
}

void NodeMonitor::node_down(NodeEntry& node, const std::string& reason) {
  if (node.state == NodeState::kDown) return;
  spdlog::warn("node {} (rank {}) is down: {}", node.name, node.rank, reason);
  node.state = NodeState::kDown;
  node.unresponsive = false;
  set_schedulable_in_pool(node.rank, false);
  // Copied: finish_job and requeue_job take jobs out of ctx_.table.running().
  const std::vector<JobId> running(ctx_.table.running().begin(), ctx_.table.running().end());
  for (JobId id : running) {
    JobEntry& entry = ctx_.table.at(id);
    if (!entry.running_on.count(node.rank)) continue;
    if (resizes_.on_node_lost(entry, node)) continue;
    actions_.lose_part(entry, node.rank, "node " + node.name + " failed (" + reason + ")");
  }
  if (!node.drained) node.reason = reason;
  persist_node(node);
  actions_.schedule_soon();
}

void NodeMonitor::persist_node(const NodeEntry& node) {
  // A drain outlives restarts of the node and of the leader.
  std::string state = node.drained ? "drain" : node.state == NodeState::kUp ? "up" : "down";
  store::WriteBatch batch;
  // The agent's incarnation: after a leader restart, the same value in its
  // Hello means the agent did not restart meanwhile.
  batch.upsert_node(node.rank, node.name, state, store::encode_node_detail({node.incarnation}),
                    ctx_.now());
  ctx_.committer->submit(std::move(batch), [rank = node.rank](Status s) {
    if (!s.is_ok()) spdlog::error("node rank {}: store update failed: {}", rank, s.message());
  });
}

}  // namespace hpcq::daemon
