// hpcq-agent's core: one node's member of the overlay.
//
// Says Hello to the leader with the node's topology, sends heartbeats, turns
// Launch messages into executor launches (mapping the logical allocation
// onto host CPUs), reports every job's start and end, and relays messages for
// its subtree (lib/overlay does the relaying).
//
// Emulated nodes (launch_message.h): a synthetic topology may be larger than
// the host; its logical cores are what `hpcq status` shows and what a task
// sees in HPCQ_CPUS.
//
// Thread: everything runs on the agent's event loop.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "agent/call_forwarder.h"
#include "agent/elastic_job.h"
#include "agent/executor/executor.h"
#include "agent/executor/gpu_devices.h"
#include "agent/executor/leader_lease.h"
#include "agent/launch_message.h"
#include "agent/mpi_relay.h"
#include "agent/node_scripts.h"
#include "agent/output_log.h"
#include "agent/output_spool.h"
#include "agent/part_table.h"
#include "agent/run_journal.h"
#include "lib/core/config.h"
#include "lib/overlay/event_loop.h"
#include "lib/overlay/overlay.h"
#include "lib/resource/topology.h"

namespace hpcq::agent {

struct AgentOptions {
  Rank rank = 0;
  std::string state_dir;  // the end journal; names the agent's cgroups
  std::string run_dir;    // job directories (jobs/<id>/); empty: state_dir
  std::string secret_key;
  std::string topology;              // overrides the rank's topology in the config
  std::string job_shell;             // path of hpcq-job-shell
  std::string executor = "process";  // or "test" (executor.h)
  std::string socket;                // the node's hpcq command (call_forwarder.h); empty: none
};

class Agent {
 public:
  static Result<std::unique_ptr<Agent>> create(const ClusterConfig& config, AgentOptions options);
  ~Agent();

  void run();  // returns after stop()
  // Any thread. The node's jobs run on, for the next agent on this node to
  // take back (its restart or upgrade keeps them); `end_jobs`: they end too
  // (hpcq-agent --drain-and-exit, hpcq stop).
  void stop(bool end_jobs = false);
  // After run(): 0, or 1 when the agent stopped itself (its leader is older:
  // lib/core/protocol_version.h).
  int exit_code() const { return exit_code_; }

 private:
  Agent(const ClusterConfig& config, AgentOptions options);
  Status start();
  // The executor ([agent] executor, options_.executor) and the lease file
  // its jobs' shells watch.
  Status start_executor();
  // Heartbeats, time limits and ends, the health check.
  void start_timers();
  // The parts and steps a previous agent on this node left running, as its
  // part journal and the executor found them (job_starts.cc).
  void take_back_parts();
  // What the site's prolog and epilog of the job are told.
  ScriptEnv script_env(JobId id, const JobLaunch& job) const;
  // Before its shell starts: the next agent finds it by this.
  void journal_part(const overlay::Launch& launch);
  // The device files of the node's GPUs: [agent] gpu_devices, else found
  // from the host's drivers (gpu_devices.h); none for a node without GPUs.
  Result<GpuDevices> gpu_devices() const;
  void send_hello();
  void send_heartbeat();
  // The leader answered what this agent sent at `sent_at` (boot clock): the
  // node's jobs may run on until fence_after_ms after it (leader_lease.h).
  void renew_lease(TimeUs sent_at);
  void on_message(overlay::Envelope&& envelope);
  void on_launch(const overlay::Launch& launch);
  void on_kill(const overlay::Kill& kill);
  void on_checkpoint(const overlay::Checkpoint& request);
  void on_checkpoints_done();  // the executor's finished dumps: answered
  void on_restores_done();     // the executor's finished restores: reported
  void send_checkpoint_done(const overlay::Checkpoint& request, overlay::Envelope envelope);
  void on_resize(const overlay::Resize& request);
  void on_signal(const overlay::Signal& request);
  void on_set_time_limit(const overlay::SetTimeLimit& request);
  void on_input(const overlay::Input& input);
  // The leader's room for a task stream: to the OutputLog and the job shell.
  void on_output_credit(const overlay::OutputCredit& credit);
  void on_usage_query(const overlay::UsageQuery& query);
  // Forwarded output (hpcq run) to the leader, one Output message per chunk.
  void send_output(std::vector<TaskOutput> chunks);
  void send_output_chunk(const OutputLog::Chunk& chunk);
  // The way to the leader changed: what may have been lost on the old way
  // is sent again, then a Hello (with the ends not yet acknowledged).
  void on_reroute();
  void answer_resize(const overlay::Resize& request, overlay::ResizeDone::Outcome outcome,
                     const std::string& reason, double answer_seconds);
  // The job's part ended or left this node: forget it (its elastic files
  // too); what the table had of it.
  std::optional<Part> forget(JobId id);
  void repeat_unacknowledged_ends();
  // The executor's ends, and its finished dumps and restores, reported.
  void on_job_exits();
  void sync_wait_fds();
  // STARTED for each launch whose tasks the executor says have all started
  // (starting_): launch() does not wait for them (job_starts.cc).
  void report_started();
  // part: the Launch.part the update is about; unset: the part running here.
  // `step` set: about that step of the job, not the job.
  void report(JobId id, std::uint32_t attempt, overlay::JobUpdate::Kind kind, int exit_code,
              const std::string& reason, std::optional<std::uint32_t> part = std::nullopt,
              std::uint32_t step = 0, const JobExit* measured = nullptr);
  // A step of a job running here (Launch.step): started in the job's cgroup.
  void on_step_launch(const overlay::Launch& launch);
  // A job's part once the site's prolog (if any) has passed: started, or
  // restored from its checkpoint.
  void start_part(const overlay::Launch& launch, JobLaunch job);
  // The site's programs ([agent] prolog, epilog, health_check), in
  // site_programs.cc. A translated launch goes through the prolog (if any)
  // to start_part.
  void run_prolog_then_start(const overlay::Launch& launch, JobLaunch job);
  void run_epilog(JobId id, ScriptEnv env);
  void run_health_check();
  // A health check's verdict is sent once; an epilog's failure until the
  // leader acknowledges it (unacknowledged_checks_, sent again with each
  // heartbeat).
  void send_node_check(overlay::NodeCheck::Source source, const std::string& failure);
  void repeat_unacknowledged_checks();

  const ClusterConfig config_;
  const AgentOptions options_;
  overlay::EventLoop loop_;
  resource::NodeTopology topology_;
  HostMapping host_;  // topology_'s cores on this host's CPUs and memory nodes
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<overlay::Overlay> overlay_;
  bool welcomed_ = false;
  int exit_code_ = 0;
  // How long the node's jobs may run without the leader, and the file their
  // shells read it from; the oldest Hello not yet answered by a Welcome.
  LeaderLease lease_;
  std::optional<LeaseFile> lease_file_;
  TimeUs hello_unanswered_since_ = 0;
  bool lease_lost_logged_ = false;
  std::uint64_t incarnation_ = 0;  // random per start: tells the leader a retry from a restart
  // The parts and steps of jobs on this node, each in its state (held, in
  // its prolog, restoring, starting, running); the dumps in flight and their
  // answers. A part's STARTED goes when the executor says its tasks have
  // all started (a repeated Launch meanwhile is not answered), so that the
  // leader counts on it (a checkpoint, a resize's notice, input) only then.
  PartTable parts_;
  // Elastic jobs whose first node this is: their files and resize socket
  // (the I/O of parts in parts_, dropped with them).
  std::map<JobId, std::unique_ptr<ElasticJob>> elastic_;
  // Ends reported but not yet acknowledged by the leader, on disk too;
  // repeated in every Hello so that they survive a leader restart, a
  // partition, and a restart of this agent.
  std::unique_ptr<EndJournal> unacknowledged_;
  // The Launch of each part and step running here, from before its start
  // until its end is in unacknowledged_: what the next agent takes them
  // back with.
  std::unique_ptr<PartJournal> part_journal_;
  std::atomic<bool> end_jobs_on_exit_{false};
  Status checkpoint_;         // the executor's checkpoint_capability() at start
  Status checkpoint_others_;  // its checkpoint_of_other_users() at start
  std::map<std::pair<JobId, std::uint32_t>, TimeUs>
      end_sent_at_;  // when each unacknowledged end was last sent
  // The MPI worlds across nodes: fences, their outcomes, modex requests.
  std::unique_ptr<MpiRelay> mpi_;
  std::set<int> watched_fds_;
  // Forwarded output sent, kept to send again after the tree healed.
  OutputLog output_log_{64 * 1024};
  // Its chunks on disk for the next agent (output_spool.h).
  std::unique_ptr<OutputSpool> output_spool_;
  // The site's prolog, epilog and health check, run on the loop.
  NodeScripts scripts_{loop_};
  std::map<std::uint64_t, overlay::NodeCheck> unacknowledged_checks_;  // by seq
  std::uint64_t next_check_seq_ = 1;
  bool health_check_running_ = false;
  // The node's hpcq command, forwarded to the leader (options_.socket); last,
  // so that its threads are gone before the loop and the overlay.
  std::unique_ptr<CallForwarder> forwarder_;
};

}  // namespace hpcq::agent
