// hpcq.toml: the one configuration file shared by hpcqd and every hpcq-agent
// (like Flux's bootstrap config: every process sees the same rank table).
//
// Every key is documented in etc/hpcq.toml. Unknown keys and bad values are
// errors that name file:line and the key. Plain values; load_config reads the
// file, parse_config takes text (tests, fuzzing).
#pragma once

#include <csignal>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lib/core/status.h"
// Plain data only (no functions of lib/sched are called here): the site's
// queues, QOS and accounts are parsed straight into the scheduler's type.
#include "lib/core/site_policy.h"

namespace hpcq {

// What a running hpcq-agent takes as "end this node's jobs and leave"
// (hpcq-agent --drain-and-exit sends it; hpcq stop too). SIGTERM and SIGINT
// leave the jobs running for the next agent to take back.
inline constexpr int kAgentDrainSignal = SIGUSR1;
// <agent state dir>/agent.pid: where --drain-and-exit finds the running agent.
inline constexpr char kAgentPidFile[] = "agent.pid";

// --mpi's and leader.mpi's value that offers the tasks both PMI-1 and PMIx
// (a world of one task gets PMI-1 alone: it has no peer to exchange with).
inline constexpr char kMpiBoth[] = "pmi1,pmix";
// Whether `mpi` is a value that --mpi and leader.mpi take.
inline bool known_mpi(const std::string& mpi) {
  return mpi == "pmi1" || mpi == "pmix" || mpi == kMpiBoth || mpi == "none";
}
// agent.pmi_max_kvs_bytes' range: one key and value of PMI's largest sizes
// fit a few times over; a fence of 16 GiB is far past any MPI's need.
inline constexpr std::int64_t kPmiMinKvsBytes = 4096;
inline constexpr std::int64_t kPmiMaxKvsBytes = std::int64_t{16} << 30;

struct RankConfig {
  std::string name;      // node name (HPCQ_NODELIST entry)
  std::string endpoint;  // ZeroMQ endpoint its overlay ROUTER binds (tcp://host:port)
  // Rank 0 with failover (issue 25): every leader candidate's endpoint, where
  // the leader's children look for whichever leads (`endpoint` is the one
  // this hpcqd binds, hpcqd --endpoint). Otherwise just `endpoint`.
  std::vector<std::string> endpoints;
  std::string public_key;  // Z85 CURVE public key; the allow-list is the set of these
  std::string topology;    // agents: "host", "synthetic:...", a bare synthetic string, "xml:PATH"
  // The node's features ("a100", "ib"), what a job's -C/--constraint asks for.
  std::vector<std::string> features;
  // gres = { nvme = 2 }: generic resources, units a job's --gres takes per node.
  std::map<std::string, int> gres;
};

// A web portal allowed to call the API over TCP (as slurmrestd's JWT users):
// its bearer token (stored as the hex SHA-256 of the token, never the token),
// the users it may act for ("*": any user but root), and its request rate.
struct PortalConfig {
  std::string name;
  std::string token_sha256;  // 64 lowercase hex digits
  std::vector<std::string> users;
  double rate_per_s = 20;  // sustained; bursts up to twice this
};

struct ClusterConfig {
  std::string source = "<defaults>";  // file the values came from
  // [overlay]
  int fanout = 16;
  int heartbeat_interval_ms = 1000;
  int node_unresponsive_after_ms = 3000;  // no new work; running jobs left alone
  int node_down_after_ms = 10000;         // its jobs fail or are requeued
  // How long an agent's jobs outlive the last heartbeat the leader answered
  // (counted from when that heartbeat was sent): past it each job shell
  // kills its tasks itself (agent/executor/leader_lease.h), so that they
  // are gone before the leader, node_down_after_ms after it last heard the
  // node, requeues them elsewhere. The margin, one heartbeat, covers the
  // shell's 100 ms look at the lease and the kill.
  int fence_after_ms() const { return node_down_after_ms - heartbeat_interval_ms; }
  // [leader]
  std::string state_dir = "/var/lib/hpcq";
  std::string socket = "/run/hpcq/hpcqd.sock";
  std::string secret_key = "/etc/hpcq/keys/leader.key";
  std::int64_t default_time_limit_s = 3600;
  std::int64_t max_time_limit_s = 0;  // 0: none
  // Where checkpoint images go: a directory every agent can write and read
  // (a shared file system on a real cluster). Empty: <state_dir>/checkpoints.
  std::string checkpoint_dir;
  // Where the leader's state lives: "sqlite" (<state_dir>/hpcq.db, the
  // default) or "etcd" (replicated by etcd 3.4 at etcd_endpoints, under
  // etcd_prefix; issue 25, lib/store/etcd_store.h).
  std::string store = "sqlite";
  std::vector<std::string> etcd_endpoints;  // "host:port" of the members' client URLs
  std::string etcd_prefix = "/hpcq/";
  // TLS to etcd: the CA's PEM file (empty: plain gRPC), and this leader's
  // certificate and key for etcd's --client-cert-auth.
  std::string etcd_ca, etcd_cert, etcd_key;
  // The secret hpcqd seals what it writes to etcd with (lib/store/seal.h):
  // a file of 64 hex digits that only hpcqd may read.
  std::string store_key;
  // true: hpcqd also runs on an etcd without client certificates, and
  // without a store_key. Anyone who reaches such an etcd can run jobs as any
  // user; only for an etcd no one else can reach.
  bool etcd_insecure = false;
  // With the etcd store: the leader's lease (daemon/leadership.h). A dead
  // leader's standby takes over about this long after it died.
  int lease_s = 3;
  // How long an elastic job's application has to answer a resize notice
  // (hpcq issue 7); past it a shrink counts as declined and an expansion
  // keeps its nodes (outcome "timed_out").
  int resize_timeout_ms = 30000;
  // The process-management interfaces a job's tasks get when the job does
  // not choose (--mpi): "pmi1", "pmix", both (kMpiBoth) or "none".
  std::string mpi = kMpiBoth;
  // [api]: users and groups (besides root) who may act on every job and node,
  // and the same gRPC service over TCP with TLS, for portals.
  std::vector<std::string> admin_users;
  std::vector<std::string> admin_groups;
  std::string api_listen;         // "HOST:PORT"; empty: the unix socket only
  std::string api_tls_cert;       // PEM server certificate (chain)
  std::string api_tls_key;        // PEM private key; must not be readable by others
  std::string api_tls_client_ca;  // set: mutual TLS, clients need a certificate it signed
  int api_max_message_bytes = 4 << 20;
  std::vector<PortalConfig> portals;  // [[portal]]
  // [scheduler]
  std::vector<std::string> actions = {"allocate"};
  std::vector<std::string> plugins = {"fcfs"};
  // Pending jobs, in order, a cycle run on an event (a submission, an end)
  // considers (as Slurm's default_queue_depth); every full_cycle_interval_s
  // a cycle considers full_queue_depth (as Slurm's periodic pass over the
  // queue; 0 s: none).
  int queue_depth = 100;
  int full_queue_depth = 1000;
  std::int64_t full_cycle_interval_s = 1;
  // [scheduler.options]: "<action or plugin>.<option>" -> value (also written
  // as sub-tables: [scheduler.options.backfill] reservation_depth = 1).
  std::map<std::string, std::string> scheduler_options;
  // Fair-share usage decays by half over this many seconds (0: never).
  std::int64_t usage_half_life_s = 7 * 24 * 3600;
  // Where hpcqd records what each scheduling cycle saw and decided (JSON
  // lines, replayable with `hpcq simulate --replay`); empty: not recorded.
  std::string decision_log;
  // [metrics] listen: where hpcqd serves /metrics for Prometheus
  // ("127.0.0.1:9464"); empty: not served.
  std::string metrics_listen;
  bool metrics_per_node = false;  // [metrics] per_node: hpcq_node_* gauges, one series per node
  // [[queue]], [[qos]], [[account]], [[user]]
  SitePolicy site;
  // [agent]
  std::string agent_state_dir = "/var/lib/hpcq/agent";
  // Where the job directories go (<run_dir>/rank-R/jobs/<id>/): made and
  // removed with every job, so a node-local tmpfs (/run) saves a disk file
  // system's inode work; nothing there needs to outlive a reboot. Empty:
  // under agent_state_dir. The end journal stays in agent_state_dir.
  std::string agent_run_dir;
  std::string agent_secret_key = "/etc/hpcq/keys/agent.key";
  // Where the agent serves the hpcq command of its node, forwarding each call
  // to the leader (agent/call_forwarder.h); empty: not served. On nodes
  // without hpcqd, /run/hpcq/hpcqd.sock: the command's default.
  std::string agent_socket;
  std::string job_shell = "";  // empty: installed libexec path
  int kill_grace_s = 5;
  // pids.max of a process job's cgroup on a node: this many per core the job
  // has there (threads count too); 0: no limit. Contains a fork bomb.
  std::int64_t pids_per_core = 1024;
  // A job's PMI key space (shell/pmi.h, pmix_world.h): the bytes of
  // keys and values one node's job shell holds, and what one fence carries
  // from all of a world's nodes together (the most any agent or hpcqd holds
  // of it). Past it a put (PMIx: a fence) is answered with an error.
  std::int64_t pmi_max_kvs_bytes = 64 << 20;
  // The signal an elastic job's tasks on its first node get with a resize
  // notice: "SIGUSR1" (default), "SIGUSR2", "SIGHUP" or "SIGINT" (with or
  // without "SIG"), or "none" (0) for a job that only watches its resize
  // socket.
  int resize_signal = 10;  // SIGUSR1 on Linux
  // The site's programs each agent runs as root (Slurm's Prolog, Epilog and
  // HealthCheckProgram), absolute paths; empty: none. The prolog runs
  // before a job's first task on a node (failing: the job is requeued, the
  // node drained), the epilog after its last (failing: the node drained),
  // each within agent_script_timeout_s; the health check every
  // health_check_interval_s (failing: the node drained with what it said,
  // resumed once it passes again).
  std::string agent_prolog, agent_epilog, agent_health_check;
  int agent_script_timeout_s = 60;
  int agent_health_check_interval_s = 60;
  // The device files of each GPU of a node, by GPU id (Slurm's gres.conf
  // File=): for nodes whose GPUs the agent cannot find them for (an
  // emulated node, a driver other than NVIDIA's or DRM's). Applies to every
  // node with GPUs; empty: found by the agent.
  std::vector<std::vector<std::string>> agent_gpu_devices;
  // A job's own /tmp and /dev/shm on each node: "off", "dir" (directories
  // in the job's directory, bind-mounted) or "tmpfs" (a tmpfs each),
  // removed with the job.
  std::string agent_private_tmp = "off";
  // This node shares its host with other nodes (hpcq start's emulated
  // cluster): tasks get the MPI settings that needs (lib/job/job_env.h).
  bool agent_shared_host = false;
  // [[rank]]: rank 0 is the leader
  std::vector<RankConfig> ranks;
};

Result<ClusterConfig> load_config(const std::string& path);

// `hpcq simulate --cluster FILE`: the simulated nodes, in rank order, as
// groups of identical nodes:
//   [[nodes]]
//   count = 128        # default 1
//   cores = 16         # a flat node of 16 cores, or instead:
//   topology = "pack:2 numa:2 core:8 pu:1"   # as [[rank]] topology
struct SimNodeGroup {
  int count = 1;
  int cores = 0;                      // > 0: a flat node of this many cores
  std::string topology;               // otherwise: an agent topology spec
  std::vector<std::string> features;  // as [[rank]] features, for a job's "constraint"
  std::map<std::string, int> gres;    // as [[rank]] gres, for a job's "gres"
  std::string where;                  // FILE:LINE of its [[nodes]], for messages
};
struct SimClusterConfig {
  std::vector<SimNodeGroup> groups;
  std::map<std::string, int> licenses;  // [licenses], as hpcq.toml's
};
Result<SimClusterConfig> load_sim_cluster(const std::string& path);
Result<SimClusterConfig> parse_sim_cluster(const std::string& text, const std::string& name);
Result<ClusterConfig> parse_config(const std::string& text, const std::string& name);

// Adds to `plugins` the scheduler plugins `site` needs besides those named:
// "licenses" where it counts licenses (hpcqd's config and hpcq simulate).
void add_site_plugins(const SitePolicy& site, std::vector<std::string>& plugins);

}  // namespace hpcq
