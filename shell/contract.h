// The contract between the executor (in hpcq-agent) and the job shell
// (shell/main.cc), the one header both sides include: what a shell is asked
// to run (JobLaunch, launch.json), what it answers (results.json), the
// frames on its channel, its fds and signals, and the files of its job
// directory. A shell outlives its agent and an upgraded agent takes it back
// (shell_record.h), so a change here must stay readable across one build
// to the next, as the overlay's wire does.
//
// The executor writes <job dir>/launch.json (encode_launch) before it starts
// the shell; the shell reads it (decode_launch), runs the tasks and, when the
// last task has ended, writes <job dir>/results.json (encode_results) that the
// executor turns into the job's exit reason (describe_results). Files rather
// than pipes so that a checkpointed job (CRIU) can be restored by a later
// agent that finds everything it needs in the job directory.
//
// Plain values and pure functions; safe from any thread. Decoding errors are
// kInvalidArgument naming the file's problem ("launch.json: field 'argv' ...").
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/config.h"
#include "lib/core/ids.h"
#include "lib/core/status.h"

namespace hpcq::agent {

struct TaskSpec {
  int rank = 0;                            // global task rank (HPCQ_TASK_RANK)
  std::vector<int> host_cpus;              // host CPU ids this task is bound to (sched_setaffinity)
  std::string logical_cpus;                // e.g. "4-5": exported as HPCQ_CPUS
  std::map<std::string, std::string> env;  // this task's own (CUDA_VISIBLE_DEVICES, ...)
  int worker = 0;                          // index in JobLaunch::workers
  std::vector<int> gpus = {};              // the node's GPUs (ids) this task may open
  // Filled by the executor on a node whose GPUs' device files it knows: the
  // cgroup the task joins before it execs, where the node's other GPUs
  // cannot be opened (gpu_devices.h). Empty: the task stays where it is.
  std::string device_cgroup = {};
};

// One worker (container) of the job on this node: its tasks share a cgroup
// (and, for an image job, one OCI container) with these limits. A job that
// the scheduler did not split has one worker per node, the node's whole part.
struct WorkerSpec {
  int id = 0;                             // the worker's id within the job (the scheduler's)
  int group = 0;                          // its task group
  std::vector<int> host_cpus, host_mems;  // cpuset.cpus / cpuset.mems
  std::uint64_t memory_limit_bytes = 0;   // 0: no limit of its own
  // Filled by the executor: the directories of the worker's own cgroup (one
  // per v1 controller; one on v2). Empty: the tasks stay in the job's cgroup
  // (a node with one worker: the job's cgroup is the worker's).
  std::vector<std::string> cgroup_dirs;
  // Filled by the executor for an image job: what the job shell runs for
  // this worker instead of forking its tasks (runc with the worker's bundle),
  // and the results.json that the shell inside the container writes.
  std::vector<std::string> command;
  std::string results;
};

struct JobLaunch {
  JobId id = 0;
  // Set: a step of the running job `id` (hpcq run inside an allocation): its
  // tasks run in a cgroup under the job's, in a PID namespace of their own.
  std::uint32_t step = 0;
  std::uint32_t uid = 0, gid = 0;
  std::string user;  // tasks run as this user, with `groups`
  // The user's home directory (HOME, unless the job's environment sets one)
  // and groups, from the name service, resolved by the executor: the shell
  // uses no name service (loading its modules in every shell and task was a
  // fifth of a short job's CPU). No groups: the job's gid alone.
  std::string home;
  std::vector<std::uint32_t> groups;
  std::vector<std::string> argv;           // command run by every task
  std::string script;                      // if non-empty: written to <job dir>/script (0700,
                                           // owned by uid) and run with argv[1..] as arguments
  std::map<std::string, std::string> env;  // job-wide environment (HPCQ_JOB_ID, ...)
  std::string cwd;
  std::string stdout_path, stderr_path;  // absolute; empty: /dev/null
  std::string hostfile;                  // content of the file HPCQ_HOSTFILE names
  // TMPDIR: the job's own directory on this node, shared by its steps and
  // removed with the job, as Flux's shell gives one (each emulated node
  // gets its own, so that MPI's per-host files do not meet); empty: the
  // caller's TMPDIR is left as it is (an --image job).
  std::string tmpdir;
  std::vector<TaskSpec> tasks;            // this node's tasks, grouped by worker
  std::vector<WorkerSpec> workers;        // at least one (TaskSpec::worker indexes it)
  std::string image;                      // non-empty: OCI rootfs or bundle (runc)
  std::vector<int> host_cpus, host_mems;  // cpuset.cpus / cpuset.mems of the job's cgroup
  std::uint64_t memory_limit_bytes = 0;   // 0: no limit
  std::int64_t time_limit_s = 0;          // 0: none
  // hpcq batch: the first node runs the script as its one task; the others
  // have no tasks and hold their part (the shell waits for SIGTERM or SIGKILL).
  bool batch = false;
  // hpcq run: each task's stdout and stderr are pipes the shell reads and
  // sends, framed (encode_output_frame), on fd kOutputFd to the executor.
  bool forward_output = false;
  // --signal: this signal to the tasks warn_seconds before the time limit;
  // a batch job's to its script's shell (the task) and to its steps, or to
  // one of them (sbatch's default: the steps; its B:, the script).
  int warn_signal = 0;
  int warn_seconds = 0;
  bool warn_script = true;
  bool warn_steps = true;
  // hpcq run --pty: task 0's stdin, stdout and stderr are a terminal.
  bool pty = false;
  // The agent's lease file (leader_lease.h): the shell kills its tasks once
  // the deadline in it has passed. Empty: no watch.
  std::string leader_lease;
  // --mpi pmi1: the shell serves PMI-1 (pmi.h) to each task, on a socket
  // named by PMI_FD, in this world; --mpi pmix: it hosts an OpenPMIx server
  // for them instead (pmix_world.h); pmi1,pmix: both. Empty kvsname: none. A world of more
  // than one node exchanges its keys over the channel (kOutputFd): the
  // forwarding job's, or else one the shell opens to the executor's
  // JobFiles::pmi_socket when its tasks first need it, so that a job whose
  // tasks do not use PMI holds no socket to the agent (and can be
  // checkpointed).
  struct PmiWorld {
    std::string api = "pmi1";  // "pmi1", "pmix" or "pmi1,pmix"
    bool offers_pmi1() const { return api == "pmi1" || api == kMpiBoth; }
    bool offers_pmix() const { return api == "pmix" || api == kMpiBoth; }
    std::string kvsname;          // PMIx: the namespace
    int size = 0;                 // PMI_SIZE
    int nodes = 0;                // nodes with ranks of the world
    std::string process_mapping;  // PMI_process_mapping; empty: not given
    // [agent] pmi_max_kvs_bytes: the bytes of keys and values the shell's
    // server holds (PMIx: one fence's contribution) before it refuses a put.
    std::int64_t max_kvs_bytes = std::int64_t{64} << 20;
    // The world's layout, for PMIx's node and process maps: the nodes'
    // names in allocation order, this node's index among them, and the node
    // of each rank (empty where the launch did not place every rank).
    std::vector<std::string> node_names;
    int node = 0;
    std::vector<int> node_of_rank;
    // The overlay rank of each of node_names' nodes: where a PMIx direct
    // modex request for one of its ranks goes.
    std::vector<std::uint32_t> node_ranks;
  } pmi;
  // Whether the shell and the executor talk on kOutputFd from the start.
  bool has_channel() const { return forward_output; }
  // Whether the shell may open the channel later (its PMI world spans nodes).
  bool channel_on_demand() const { return !has_channel() && !pmi.kvsname.empty() && pmi.nodes > 1; }
  // Whether the shell hosts an OpenPMIx server for the tasks (--mpi pmix or
  // pmi1,pmix).
  bool pmix_server() const {
    return image.empty() && !pmi.kvsname.empty() && pmi.offers_pmix() && !tasks.empty();
  }
};

// The job shell's second argument (after the job directory) when the
// executor has already put it in the job's own /proc (a mount namespace with
// a proc of the job's PID namespace; process_executor_launch.cc).
constexpr char kOwnProcFlag[] = "--own-proc";
// What the executor sends a shell that hosts a PMIx server or holds its
// channel's other end (kHeldChannelFd) before a checkpoint: CRIU cannot take
// the server's TCP listener and thread along, nor an external socket whose
// peer is in the dump. The shell closes the held end, drops the server if no
// task has connected to it and answers in JobFiles::pmix_answer:
// kPmixDropped, or kPmixInUse (then it keeps it).
inline int prepare_dump_signal() { return SIGRTMIN + 1; }
constexpr char kPmixDropped[] = "dropped\n";
constexpr char kPmixInUse[] = "in use\n";

// Appended to the job shell's path: its build with an OpenPMIx server, for
// --mpi pmix launches only (agent/executor/meson.build says why two).
constexpr char kPmixShellSuffix[] = "-pmix";

// The job shell's channel to the executor (a SOCK_SEQPACKET socket) when the
// job forwards its output or serves PMI (JobLaunch::has_channel): one frame
// per chunk of a task's output, input for task 0, or a PMI fence's data.
constexpr int kOutputFd = 4;
// The job shell (not the container shell) reads one byte here before it
// does anything: the executor writes it once the shell is in the job's
// cgroups. The shell is cloned sharing the agent's memory until its exec,
// and such a child must not join a cgroup itself: cgroup v2's cpuset moves
// a joining task's memory (here the agent's) to the cgroup's NUMA nodes.
constexpr int kGoFd = 5;
// The executor's own end of the channel, which the job shell holds and never
// reads, so that the channel outlives the agent: the next agent takes that
// end back from the shell (pidfd_getfd) with the frames still queued on it,
// and the shell's output waits in the socket and its pipes meanwhile
// (process_executor_adopt.cc). The shell closes it before a dump
// (prepare_dump_signal: CRIU takes the shell's end as an external socket,
// which it would not be with both ends in the dumped tree), so a job
// checkpointed and left running has no channel to hand to another agent.
constexpr int kHeldChannelFd = 6;
constexpr std::size_t kOutputFrameData = 60 * 1024;  // bytes of data per frame, at most

// A chunk of a PMI fence's data (pmi.h): from the shell, the node's
// contribution to fence `seq`; to it, the merged contributions of every
// node. The data of a fence is split over frames; `last` marks its final
// one. (A world that breaks is ended by killing its parts, not by failing
// its fence.) To the shell, `failed`: the fence cannot complete and `data`
// says why (its keys from all nodes passed the job's PMI limit); one frame.
struct FenceFrame {
  std::uint32_t seq = 0;
  bool last = true;
  std::string data;
  bool failed = false;
};
// A fence's data as frames of at most kOutputFrameData bytes each.
std::vector<FenceFrame> split_fence(std::uint32_t seq, std::string_view data);

// PMIx direct modex (pmix_world.cc): a task asked for a key of a rank on
// another node before any fence had carried it. From the shell, kRequest
// asks overlay rank `node` for world rank `rank`'s data on behalf of the
// shell's request `tag`; the agent there hands the shell a kRequest whose
// `tag` it chose, and that shell answers with kData frames (`status`: a
// pmix_status_t; the data split like a fence's, `last` on the final one),
// which come back to the asking shell with its own tag.
struct ModexFrame {
  enum class Kind : std::uint8_t { kRequest = 1, kData = 2 };
  Kind kind = Kind::kRequest;
  bool last = true;
  std::uint64_t tag = 0;
  std::uint32_t rank = 0;  // kRequest: the world rank whose data is asked
  std::uint32_t node = 0;  // kRequest from the shell: the overlay rank of its node
  std::int32_t status = 0;
  std::string data;
};
// A kData answer as frames of at most kOutputFrameData bytes of data each.
std::vector<ModexFrame> split_modex(std::uint64_t tag, std::int32_t status, std::string_view data);

struct OutputFrame {
  int rank = 0;
  bool is_stderr = false;
  std::string data;
  std::optional<FenceFrame> fence;  // set: not output but a fence's chunk
  std::optional<ModexFrame> modex;  // set: a direct modex request or answer
  // Set: a task ended the MPI world; the job's code, and why in `data`.
  std::optional<int> failure_code;
  TimeUs failure_seen_at = 0;  // when the shell saw it (its wall clock); 0: not said
};
// A frame: the rank (4 bytes, little-endian), the stream (1 byte: 1 stdout,
// 2 stderr), then the data. A fence frame: its seq (4 bytes), 3, a flags
// byte (1: last), then the data.
std::string encode_output_frame(int rank, bool is_stderr, std::string_view data);
std::string encode_output_frame(const FenceFrame& fence);
// A modex frame: 0 (4 bytes), 5, its kind, a flags byte (1: last), its tag
// (8 bytes), rank, node, status (4 each), then the data.
std::string encode_output_frame(const ModexFrame& modex);
// A task that ended its MPI world: 0 (4 bytes), 4, the job's exit code and
// when the shell saw it (wall clock, microseconds) in decimal, a space
// between, a newline, then why ("task 3: exited with code 5").
std::string encode_failure_frame(int code, TimeUs seen_at, std::string_view why);
Result<OutputFrame> decode_output_frame(std::string_view frame);

// What the executor sends the shell on the same socket: task 0's standard
// input, its end, or its terminal's new size (rows and cols, both > 0); or a
// fence's outcome.
struct TaskInput {
  std::string data;
  bool eof = false;
  std::uint32_t rows = 0, cols = 0;
  std::optional<FenceFrame> fence;  // set: not input but a fence's chunk
  std::optional<ModexFrame> modex;  // set: a direct modex request or answer
};
// A flags byte (1: eof), rows and cols (4 bytes each, little-endian), the
// data. A fence frame: flags 4 (| 8: last, | 32: failed), its seq, 0, data.
std::string encode_input_frame(const TaskInput& input);
std::string encode_input_frame(const FenceFrame& fence);
// A modex frame: flags 16, then the same body as encode_output_frame's.
std::string encode_input_frame(const ModexFrame& modex);
Result<TaskInput> decode_input_frame(std::string_view frame);

// The files of one job directory.
struct JobFiles {
  explicit JobFiles(std::string dir);
  std::string dir;
  std::string launch;          // launch.json: the JobLaunch, root-only
  std::string script;          // the batch script, when there is one
  std::string hostfile;        // HPCQ_HOSTFILE
  std::string hostfile_mpich;  // HPCQ_HOSTFILE_MPICH
  std::string tmpdir;          // TMPDIR (JobLaunch::tmpdir), the user's
  std::string private_dir;     // root-only: tmp/ and shm/, the job's /tmp and /dev/shm (if any)
  std::string pmi_socket;      // where the executor takes the shell's channel on demand
  std::string pmix_answer;     // the shell's answer to prepare_dump_signal()
  std::string results;         // results.json, written by the shell at its end
  std::string shell_log;       // the shell's own stdout/stderr
  std::string shell_record;    // shell.json: the executor's, for a restarted agent (shell_record.h)
  std::string oci_dir;         // OCI bundles (one per worker) and runc's state
};

// How one task ended, as the shell saw it.
struct TaskResult {
  int rank = 0;
  int local = 0;      // HPCQ_LOCAL_TASK
  int exit_code = 0;  // 128 + signal when killed
  int signal = 0;     // 0 when it exited
  std::string error;  // why it could not be started (then exit_code is 127)
  // Ended by the shell because another rank of its MPI world failed: it
  // neither decides the job's code nor names its failure.
  bool ended_by_shell = false;
};

struct ShellResults {
  int exit_code = 0;  // 0 if every task exited 0, else the highest task exit code
  // CPU time (user + system) of every process the shell reaped: the tasks
  // and whatever they left behind (getrusage RUSAGE_CHILDREN).
  std::int64_t cpu_time_us = 0;
  std::vector<TaskResult> tasks;
};

// MPICH hydra's form ("NODE:N" lines) of a hostfile of "NODE slots=N"
// lines (Open MPI's, JobLaunch::hostfile): hydra refuses "slots=".
std::string mpich_hostfile(std::string_view hostfile);

// Writes the directory's HPCQ_HOSTFILE (`hostfile`, Open MPI's form) and
// HPCQ_HOSTFILE_MPICH, replacing what is there: a restored job's files name
// where it runs now.
Status write_hostfiles(const JobFiles& files, const std::string& hostfile, uid_t uid, gid_t gid);

// A launch built without workers (tests, older callers) gets one: the node's
// whole part, in the job's cgroup. Then every task names a worker.
void ensure_workers(JobLaunch& launch);

std::string encode_launch(const JobLaunch& launch);
Result<JobLaunch> decode_launch(std::string_view json);

std::string encode_results(const ShellResults& results);
Result<ShellResults> decode_results(std::string_view json);

// The job's code from its tasks' codes: 0 if all are 0, else the highest.
int job_exit_code(const std::vector<TaskResult>& tasks);

// One line naming the task that decided the job's failure, e.g.
// "task 1: exited with code 3" or "task 0: chdir /x: No such file or directory";
// empty when every task exited 0.
std::string describe_results(const ShellResults& results);
// The same line for one task: "task 3: exited with code 5".
std::string describe_task(const TaskResult& task);

}  // namespace hpcq::agent
