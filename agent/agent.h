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
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "agent/call_forwarder.h"
#include "agent/elastic_job.h"
#include "agent/executor/executor.h"
#include "agent/executor/gpu_devices.h"
#include "agent/executor/leader_lease.h"
#include "agent/fence_tree.h"
#include "agent/launch_message.h"
#include "agent/node_scripts.h"
#include "agent/output_log.h"
#include "agent/output_spool.h"
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
  // What the site's prolog and epilog of the job are told (script_env_).
  void keep_script_env(JobId id, const JobLaunch& job);
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
  // PMI fences of MPI worlds across nodes: to the leader, and their outcome back.
  void send_pmi_events(std::vector<PmiEvent> events);
  // MPI fences through this node's place in the tree (fence_tree.h): a
  // contribution going up (this node's, or relayed), an outcome going down
  // (for this node, or relayed); on_relay takes both out of the overlay's
  // relay.
  bool on_relay(overlay::Envelope& envelope);
  void fence_up(overlay::PmiFence fence);
  void send_fence(overlay::PmiFence fence);
  void fence_done_down(Rank dst, const overlay::PmiFenceDone& done);
  void on_fence_done(const overlay::PmiFenceDone& done);
  // Fences and direct modex requests not answered yet are sent again.
  void repeat_unanswered_fences();
  // PMIx direct modex between the nodes of a world (PmiModexRequest).
  void on_modex_request(Rank from, const overlay::PmiModexRequest& request);
  void on_modex_reply(const overlay::PmiModexReply& reply);
  void answer_resize(const overlay::Resize& request, overlay::ResizeDone::Outcome outcome,
                     const std::string& reason, double answer_seconds);
  // The job's part ended or left this node: forget it (its elastic files too).
  void forget(JobId id);
  void remember_finished(JobId id, std::uint32_t attempt, std::uint32_t part);
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
  void run_epilog(JobId id);
  void run_health_check();
  // A health check's verdict is sent once; an epilog's failure until the
  // leader acknowledges it (unacknowledged_checks_, sent again with each
  // heartbeat).
  void send_node_check(overlay::NodeCheck::Source source, const std::string& failure);
  void repeat_unacknowledged_checks();
  // Launches held while an epilog runs here: started once none does.
  void release_held_launches();

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
  std::map<JobId, std::uint32_t> attempts_;                     // running jobs: attempt being run
  std::map<JobId, overlay::Checkpoint> checkpoints_in_flight_;  // dumps not yet answered
  // The latest answers sent, oldest first, repeated in every Hello: a leader
  // that restarted meanwhile may have missed one (a stopped part is neither
  // running nor reported ended, so nothing else would tell it).
  std::deque<overlay::CheckpointDone> checkpoints_answered_;
  // Restores CRIU is running: what to report when it is done.
  struct RestoreInFlight {
    std::uint32_t attempt = 0;
    std::uint32_t part = 0;
    std::string image_dir;
  };
  std::map<JobId, RestoreInFlight> restores_in_flight_;
  std::map<JobId, std::uint32_t> parts_;  // running jobs: Launch.part being run
  // Parts (step 0) and steps launched here whose tasks are still being
  // started: their STARTED goes when the executor says so (a repeated
  // Launch meanwhile is not answered), so that the leader counts on them
  // (a checkpoint, a resize's notice, input) only then.
  std::set<std::pair<JobId, std::uint32_t>> starting_;
  // Elastic jobs whose first node this is: their files and resize socket.
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
  // Steps running here, and those that ended (a repeated launch is ignored).
  std::set<std::pair<JobId, std::uint32_t>> steps_, finished_steps_;
  std::map<std::pair<JobId, std::uint32_t>, TimeUs>
      end_sent_at_;  // when each unacknowledged end was last sent
  // The PMI fence of each job (or step) that waits for its outcome, and when
  // it was last sent: sent again until answered, so that an MPI world in a
  // fence outlives a leader restart (the leader ignores a repeat).
  struct PendingFence {
    overlay::PmiFence fence;
    TimeUs sent_at = 0;
  };
  std::map<std::pair<JobId, std::uint32_t>, PendingFence> fences_;
  FenceTree fence_tree_;  // other nodes' contributions held here, and outcomes sent down
  // Bytes of fence keys that passed through since the allocator last handed
  // its free memory back (release_free_memory, at the heartbeat); and
  // whether it does so again at a job's end, when the outcomes queued for
  // its shell are gone too.
  std::size_t fence_bytes_since_release_ = 0;
  bool release_at_job_end_ = false;
  // The direct modex requests of this node's shells not answered yet, by
  // (job, step, the shell's request tag), sent again likewise.
  struct PendingModex {
    overlay::Envelope request;
    TimeUs sent_at = 0;
  };
  std::map<std::tuple<JobId, std::uint32_t, std::uint64_t>, PendingModex> modex_requests_;
  // (job, attempt) of the parts that ended here lately, oldest first: the
  // leader repeats a Launch it has no confirmation of, and a repeat that
  // arrives after the part already ran must not run it again.
  // Keyed by (job, attempt << 32 | part): a resize may give a node a new
  // part of the same attempt after its earlier part ended.
  std::set<std::pair<JobId, std::uint64_t>> finished_;
  std::deque<std::pair<JobId, std::uint64_t>> finished_order_;
  std::set<int> watched_fds_;
  // Forwarded output sent, kept to send again after the tree healed.
  OutputLog output_log_{64 * 1024};
  // Its chunks on disk for the next agent (output_spool.h).
  std::unique_ptr<OutputSpool> output_spool_;
  // What arrived of the leader's numbered signals (by job) and of standard
  // input (by job and step), reported in Hello: after the tree healed, the
  // leader sends again what was lost on the way, and a copy is not
  // delivered twice.
  std::map<JobId, std::uint64_t> signals_received_;
  struct InputReceived {
    std::uint64_t bytes = 0;
    bool eof = false;
  };
  std::map<std::pair<JobId, std::uint32_t>, InputReceived> input_received_;
  // The site's prolog, epilog and health check, run on the loop.
  NodeScripts scripts_{loop_};
  // Parts whose prolog runs: their launch goes on once it passes.
  std::map<JobId, overlay::Launch> in_prolog_;
  // What the prolog and epilog of each job running here are told
  // (HPCQ_JOB_ID, HPCQ_JOB_USER, HPCQ_JOB_NODELIST, ...).
  std::map<JobId, std::map<std::string, std::string>> script_env_;
  // Epilogs running, and the launches that wait for them: as Slurm's
  // COMPLETING node, this node starts no new job until its last one's
  // epilog has ended.
  int epilogs_running_ = 0;
  std::map<std::uint64_t, overlay::NodeCheck> unacknowledged_checks_;  // by seq
  std::uint64_t next_check_seq_ = 1;
  std::deque<overlay::Launch> held_launches_;
  bool health_check_running_ = false;
  // The node's hpcq command, forwarded to the leader (options_.socket); last,
  // so that its threads are gone before the loop and the overlay.
  std::unique_ptr<CallForwarder> forwarder_;
};

}  // namespace hpcq::agent
