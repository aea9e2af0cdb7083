// The process executor: runs a job's tasks on this node in the job's cgroups,
// under a job shell that is PID 1 of a new PID namespace.
//
//   launch:  cgroups job-<id> (cgroup.h) with the job's cpuset and memory
//            limit; <state_dir>/jobs/<id>/ with launch.json, hostfile, script;
//            clone(CLONE_NEWPID) a child that waits until its PID is in the
//            cgroups, then execs hpcq-job-shell, which forks the tasks and
//            says when they have been started: a byte on a pipe that is one
//            of wait_fds(), read without blocking (take_started). Until then
//            the shell forwards no signal: those for the tasks wait here.
//   workers: a node running several workers of a split job gives each its
//            own cgroup below the job's (worker-<id>: its cpuset, mems and
//            memory share); each task joins its worker's before it execs.
//            On v2 the shell then sits in a leaf of its own ("shell"), as the
//            kernel allows no process beside child cgroups.
//   images:  a job with an image runs each worker in an OCI container: the
//            executor writes <job dir>/oci/worker-<id>/ (config.json from
//            oci_bundle.h, the worker's own launch.json, hostfile, script;
//            owned by the job's user), and the shell runs `runc run` for each
//            worker instead of forking tasks; runc makes the worker's cgroup.
//            Checkpoint: `runc checkpoint` of each container (checkpoint.h)
//            into <image_dir>/worker-<id>; restore: a new shell whose
//            workers run `runc restore` from those images with bundles
//            rewritten for the new allocation.
//   end:     the shell exits with the job's code once every task has ended;
//            the kernel then kills whatever else is left in the namespace.
//            reap() reports the job after the cgroups are removed.
//   cancel:  SIGKILL to the shell (a namespace's init: everything in it dies).
//   timeout: SIGTERM to the shell, which forwards it to every process of the
//            job; SIGKILL after the grace period.
//   checkpoint: `criu dump` of the shell's tree (checkpoint.h), frozen with
//            the job's freezer cgroup; the job directory is copied into
//            <image_dir>/job-dir and <image_dir>/hpcq-checkpoint.json names the
//            job and its directory (written last: a dir without it holds no
//            usable checkpoint). kStop: CRIU kills the tree, the executor
//            reaps the shell, removes the cgroups and job dir and forgets the
//            job (reap() does not report it).
//   restore: (begin_restore: CRIU and the pinning on a thread, as dumps; the
//            rest on the caller's thread in finished_restores) the job directory comes back at the
//            path it had (the shell and the tasks hold files there by path; every node has the same
//            state dir in a real cluster) with the new launch.json/hostfile; new cgroups with the
//            new cpuset and memory limit; `criu restore` runs inside them, so the tree is born
//            there, as a child of this process (--restore-sibling); then, frozen, every thread of
//            every task is pinned (sched_setaffinity) to its new task's CPUs (a process belongs to
//            the task whose HPCQ_LOCAL_TASK its ancestor below the shell has). From there on it is
//            like a launched job.
// A PID namespace whose init is a session leader is what CRIU needs to
// checkpoint the whole job (DESIGN.md, "Executors"); the shell holds no pipe
// or socket once its tasks have started.
//
// Ownership: the executor owns its jobs' processes, pidfds, cgroups and job
// directories; shutdown() (also run by the destructor) kills and removes all.
// Threads: not thread-safe; one thread (the agent's event loop) calls it all.
// Dumps (begin_checkpoint) run CRIU on a thread of their own, which touches
// nothing but its Dump record; the calling thread finishes them.
// The caller must not set SIGCHLD to SIG_IGN (children would not be waitable)
// and must not reap children it did not start (waitpid(-1)).
// Errors: kInvalidArgument for a malformed launch, kAlreadyExists for a job
// that is already running here, kNotFound for an unknown job, and the
// cgroup/system errors of cgroup.h.
// Code: process_executor_launch.cc (a job's start), process_executor.cc (a
// running job and its steps: signals, limits, output, input, ends) and
// process_executor_checkpoint.cc (dumps and restores).
#pragma once

#include <sys/types.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/executor/cgroup.h"
#include "agent/executor/checkpoint.h"
#include "agent/executor/executor.h"
#include "agent/executor/gpu_devices.h"
#include "agent/executor/oci_bundle.h"
#include "agent/executor/posix.h"
#include "agent/executor/shell_channel.h"
#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "shell/contract.h"

namespace hpcq::agent {

struct ExecutorConfig {
  std::string instance;        // e.g. "rank-3": cgroups under <controller>/hpcq/<instance>/job-<id>
  std::string state_dir;       // job dirs under <state_dir>/jobs/<id>/; job users must be able
                               // to traverse it (their script and hostfile live there)
  std::string job_shell_path;  // path of hpcq-job-shell
  std::string container_shell_path;            // path of hpcq-container-shell (image jobs)
  std::string runc_path = "runc";              // from PATH unless absolute
  std::int64_t container_pids_limit = 32768;   // pids.max of each container
  std::int64_t pids_per_core = 1024;           // pids.max of a job: this many per host CPU; 0: none
  TimeUs kill_grace = 5 * kUsPerSecond;        // time limit: from SIGTERM to SIGKILL
  std::string cgroup_root = "/sys/fs/cgroup";  // see CgroupHierarchy::detect
  std::string criu_path;                       // empty: "criu" from PATH (see probe_criu)
  int criu_timeout_s = 300;  // a dump or restore running longer is killed (and fails)
  // The device files of this node's GPUs (gpu_devices.h): each task of a
  // process job is kept from opening the GPUs that are not its own, and an
  // image job's containers get theirs. Empty: no isolation (none known).
  GpuDevices gpu_devices;
  // A process job's own /tmp and /dev/shm ([agent] private_tmp): "off";
  // "dir": <job dir>/private/{tmp,shm}, bind-mounted in the job's mount
  // namespace (its steps' too); "tmpfs": the same with a tmpfs mounted on
  // each first. Removed with the job. The state directory may then not lie
  // under /tmp or /dev/shm (the shell reads it by path). CRIU cannot dump
  // the binds yet: such a node says it cannot checkpoint.
  std::string private_tmp = "off";
  // [agent] pmi_max_kvs_bytes: each job shell's PMI server holds no more
  // keys (pmi.h), and a node's contribution to a fence that carries more
  // (a shell's channel written to by hand) is dropped and fails the job.
  std::int64_t pmi_max_kvs_bytes = std::int64_t{64} << 20;
  // The agent's lease file (leader_lease.h), named in every launch.json:
  // each job shell kills its tasks once the lease has run out. Empty: none.
  std::string leader_lease;
  // Take back the job shells a previous agent on this node left running
  // (shell_record.h) instead of killing them.
  bool take_back_shells = false;
};

class ProcessExecutor final : public Executor {
 public:
  // Detects cgroup v1/v2, takes back the shells a previous instance of the
  // same name left running (config.take_back_shells) and removes the rest of
  // what it left behind: cgroups (killing what is in them) and directories.
  static Result<std::unique_ptr<ProcessExecutor>> create(ExecutorConfig config);
  ~ProcessExecutor() override;
  ProcessExecutor(const ProcessExecutor&) = delete;
  ProcessExecutor& operator=(const ProcessExecutor&) = delete;

  // Returns once the shell runs in the job's cgroups, without waiting for
  // its tasks: take_started() names the job once the shell says all are
  // started (a task that cannot be started, e.g. a bad cwd, makes the job
  // end kFailed: see reap()), or ends first, or has not said so within 10 s
  // (a wedged machine: the job is then left to end on its own). On error
  // nothing of the job is left.
  Status launch(const JobLaunch& launch, TimeUs now) override;

  // Kills the job's whole process tree; reap() reports it as kCancelled
  // (unless it had already ended). Its steps end as at the job's end (see
  // end_with_job). kNotFound if the job is not running here.
  Status cancel(JobId id) override;
  Status cancel_step(JobId id, std::uint32_t step) override;

  // Jobs past their time limit get SIGTERM, and SIGKILL kill_grace later;
  // they are reported as kTimeout. Steps ended with their job get SIGKILL
  // kill_grace after it.
  void check_timeouts(TimeUs now) override;

  // Non-blocking. The jobs that ended since the last call and whose
  // processes and cgroups are all gone (their job directories are removed).
  std::vector<JobExit> reap() override;
  std::vector<LaunchStarted> take_started() override;
  std::vector<TaskOutput> take_output() override;
  std::vector<PmiEvent> take_pmi_events() override;
  Status fence_done(JobId id, std::uint32_t step, std::uint32_t seq,
                    const std::string& data) override;
  Status fence_failed(JobId id, std::uint32_t step, std::uint32_t seq,
                      const std::string& why) override;
  Status deliver_modex(JobId id, std::uint32_t step, const ModexFrame& frame) override;

  // pidfds that become readable when a job's shell ends, and the pipes on
  // which shells say their tasks are started; poll them, then call reap()
  // and take_started() and fetch this list again (reap() closes the fds of
  // the jobs it has seen end, and both close the pipes that have spoken).
  // A job whose cgroups are slow to empty has none left: call reap() now
  // and then as well (the agent does, with check_timeouts).
  std::vector<int> wait_fds() const override;

  std::vector<JobId> running() const override;  // launched and not yet reported by reap()
  // To the job shell, which forwards SIGTERM, SIGINT, SIGHUP, SIGUSR1 and
  // SIGUSR2 to every task (other signals reach the shell only); held until
  // its tasks are started (the shell takes none before).
  Status signal(JobId id, int signo) override;
  Status signal_step(JobId id, std::uint32_t step, int signo) override;
  Status set_time_limit(JobId id, std::int64_t seconds) override;
  Result<LiveUsage> usage(JobId id, std::uint32_t step) const override;
  Status write_input(JobId id, std::uint32_t step, const TaskInput& input) override;
  Status grant_output(JobId id, std::uint32_t step, int rank, bool is_stderr,
                      std::uint64_t bytes) override;

  // The job's cgroup directories (empty if unknown), for tests and CRIU.
  std::vector<std::string> cgroup_dirs(JobId id) const;

  CgroupVersion cgroup_version() const { return hierarchy_.version(); }

  // Kills every job, waits for its processes, removes cgroups and job dirs.
  // Jobs killed here are not reported by reap().
  void shutdown() override;
  // Leaves every job running, for the next instance to take back.
  void detach() override;
  std::vector<RunId> take_adopted() override;

  // Runs probe_criu(config.criu_path) on the first call.
  Status checkpoint_capability() override;
  Status checkpoint_of_other_users() override;
  // See executor.h and the file comment. Errors name the job and, for CRIU's
  // failures, the first error of its log and the log's path.
  Status begin_checkpoint(JobId id, const std::string& image_dir, CheckpointThen then) override;
  std::vector<CheckpointOutcome> finished_checkpoints() override;
  Status begin_restore(const JobLaunch& launch, const std::string& image_dir, TimeUs now) override;
  std::vector<RestoreOutcome> finished_restores() override;

 private:
  // Where `runc restore` of a worker works: CRIU's restore.log, runc's PID file.
  static std::string restore_work_dir(const JobFiles& files, int worker);
  // A dump in flight: CRIU runs on `thread`, which sets status, seconds and
  // then done, and writes a byte to the notify pipe.
  struct Dump {
    CheckpointThen then = CheckpointThen::kContinue;
    std::string meta;  // hpcq-checkpoint.json, renamed into place on success
    CriuDump criu;
    // An image job: `runc checkpoint` of each container instead (criu unused
    // but for image_dir), into <image_dir>/worker-<id>.
    std::vector<RuncDump> containers;
    std::chrono::steady_clock::time_point start;
    std::thread thread;
    Status status;
    double seconds = 0;
    std::atomic<bool> done{false};
  };
  CheckpointOutcome finish_dump(JobId id);  // joins; the loop thread's half
  struct Job {
    JobId id = 0;
    std::uint32_t step = 0;   // a step of job `id` (in steps_), not the job
    pid_t pid = -1;           // the shell, in our PID namespace
    int pidfd = -1;           // -1 once the shell has been waited for
    std::string dir;          // job directory
    std::string private_dir;  // its /tmp and /dev/shm (ExecutorConfig::private_tmp): the job's
    JobCgroup cgroup;
    JobCgroup shell_cgroup;  // where the shell goes: the job's, or its "shell" leaf
    bool image = false;      // runs in OCI containers
    TimeUs deadline = 0;     // 0: no time limit
    TimeUs term_sent = 0;    // when SIGTERM went out for the time limit
    TimeUs warn_at = 0;      // --signal: when warn_signal goes out (0: never, or sent)
    int warn_signal = 0;
    int warn_seconds = 0;
    bool warn_script = true;  // the job's tasks get it (JobLaunch's)
    bool warn_steps = true;   // its steps' tasks get it
    TimeUs launched = 0;      // the time limit counts from here
    // The shell's "tasks started" pipe, until it has spoken (or ended, or
    // kept silent past ready_by); then -1. Meanwhile signals for the tasks
    // wait in held_signals: a namespace's init drops what comes before it
    // has its handlers, and forwards to tasks it has forked.
    int ready_fd = -1;
    std::chrono::steady_clock::time_point ready_by;
    std::vector<int> held_signals;
    bool report_start = false;  // launch()ed: take_started() names it (a restore does not)
    bool kill_sent = false;
    bool cancelled = false;
    // A step its job's end is ending (end_with_job): SIGKILL follows
    // kill_grace after term_sent.
    bool ending_with_job = false;
    bool timed_out = false;
    bool exited = false;
    // Taken back from a previous agent (shell_record.h): not our child, so
    // its end shows on its pidfd and its code comes from results.json.
    bool adopted = false;
    bool checkpointing = false;   // a dump is in flight (dumps_)
    bool device_cgroups = false;  // its tasks have device cgroups (v1: in the devices controller)
    std::vector<int> worker_ids;  // an image job's containers, by worker id
    int shell_code = 0;           // the shell's exit code (128 + signal when killed)
    int shell_signal = 0;
    int oom_kills = -1;             // read from the cgroup once the shell has ended (-1: not yet)
    std::uint64_t memory_peak = 0;  // read with oom_kills
    std::int64_t time_limit_s = 0;
    uid_t uid = 0;             // the job's user (another user's job may not be checkpointable)
    bool pmix_server = false;  // its shell hosts a PMIx server (until dropped)
    ShellChannel channel;      // fd 4: output, input, fences, modex
  };
  // Reads what the job's shell has sent on its channel into output_ and
  // pmi_events_.
  void read_channel(Job& job);
  // A step of a running job: its directory under the job's, its cgroup a
  // child of the job's, its own shell.
  Status launch_step(JobLaunch l);
  // The running steps of job `id`.
  std::vector<Job*> steps_of(JobId id);
  // Reaps what a shell's end left: output, cgroups (kFailedPrecondition
  // while processes remain), the directory.
  Status clean_up(Job& job);
  // The deadline and --signal warning of a limit of `seconds` (0: none).
  static void set_limit(Job& job, std::int64_t seconds);
  // "job 12", or "job 12 step 3": how errors name what they are about.
  static std::string name_of(JobId id, std::uint32_t step);
  // The fields of `job` that its launch decides (job.dir set first): at the
  // launch, and for a shell taken back.
  void take_launch_fields(Job& job, const JobLaunch& launch) const;
  // <job dir>/shell.json for the next agent (shell_record.h).
  void record_shell(const Job& job) const;
  // The shells of the job directories under state_dir/jobs that still run
  // (or ended while no agent was here: reap() reports them), into jobs_ and
  // steps_ (process_executor_adopt.cc). Returns the jobs taken back.
  std::set<JobId> take_back_shells();
  std::optional<Job> take_back(const std::string& dir, JobId id, std::uint32_t step,
                               const Job* parent) const;
  // A taken-back shell's channel: our end as the shell holds it
  // (kHeldChannelFd), queued frames and all; or, for one opened on demand
  // and not yet open, the socket it opens it at, listened on again. A shell
  // that holds no end (restored from a checkpoint, or its channel was opened
  // on demand) has lost its channel: output_fd stays -1.
  void take_back_channel(Job& j) const;
  // An adopted shell's end: its pidfd readable, its code from results.json.
  bool poll_adopted_exit(Job& job);
  // Waits (bounded) for a killed shell to be gone.
  static void wait_gone(Job& job);
  std::vector<RunId> adopted_;  // taken back at create(), until take_adopted()
  // Steps by job and step id; each is a Job of its own for the shell, its
  // cgroup and its output.
  std::map<std::pair<JobId, std::uint32_t>, Job> steps_;
  std::vector<TaskOutput> output_;    // read, not yet taken
  std::vector<PmiEvent> pmi_events_;  // read, not yet taken
  // Launches whose tasks have started (check_ready), not yet taken.
  std::vector<LaunchStarted> started_;
  // The running job, or its running step (step != 0); nullptr if neither.
  Job* find(JobId id, std::uint32_t step);

  // A restore in flight: the job's directory and cgroups are ready, CRIU
  // runs on `thread`; finish_restore pins the tree and adds the job.
  struct Restore {
    JobLaunch launch;
    Job job;
    CriuRestore criu;
    // An image job: a new job shell runs `runc restore` for each worker
    // (its command); the restore is done when runc has written every
    // worker's PID file (`pid_files`), failed when the shell ends first.
    std::vector<std::string> pid_files;
    std::vector<std::string> restore_logs;  // CRIU's, by worker
    Fd channel_theirs;  // the restored shell's new end of its channel (criu.inherit)
    std::thread thread;
    Status status;
    pid_t root = -1;
    std::atomic<bool> done{false};
  };
  Status finish_restore(JobId id);
  // begin_restore's parts: the restored shell's channel, a new socket in
  // place of the dumped one (inode `dumped`); CRIU's thread.
  Status reconnect_channel(std::uint64_t dumped, const std::string& image_dir, Job& j, Restore& r);
  void start_restore(std::unique_ptr<Restore> r);
  ProcessExecutor(ExecutorConfig config, CgroupHierarchy hierarchy, int notify[2]);
  Status validate(const JobLaunch& launch) const;
  Status prepare_job_dir(const JobLaunch& launch, const std::string& dir) const;
  // Removes a job's directory; first its private tmpfs mounts, if any.
  void remove_job_dir(const std::string& dir) const;
  // The job cgroup's limits: its cpuset, memory and pids.max.
  CgroupLimits job_limits(const JobLaunch& launch) const;
  // Fills launch.home and launch.groups from the name service (the shell
  // uses none); left empty for a user it does not know.
  static void resolve_user(JobLaunch& launch);
  // --mpi pmi1,pmix offers PMIx where this node has the PMIx shell (an
  // install built without OpenPMIx has none), and PMI-1 alone elsewhere.
  void offer_pmix_where_present(JobLaunch& launch) const;
  // Before a checkpoint: has the job's shell let go of what CRIU cannot take
  // along: the agent's end of its channel (kHeldChannelFd), and its PMIx
  // server unless its tasks use it (then refused).
  Status prepare_shell_for_dump(Job& job, const std::string& name);
  // begin_checkpoint's parts: whether the job can be dumped now (running,
  // no steps, not a world across nodes, a channel still held, CRIU able);
  // an image job's `runc checkpoint` of each worker; the dump's thread.
  Status check_checkpointable(Job& job, const std::string& name);
  Status plan_container_dumps(const Job& job, const std::string& image_dir, CheckpointThen then,
                              const std::string& name, Dump& dump) const;
  void start_dump(Job& job, std::unique_ptr<Dump> dump);
  static constexpr int kPmixAnswerWaitMs = 3000;
  // Per-worker cgroups or OCI bundles (file comment); fills the workers'
  // cgroup_dirs / command / results in `launch`.
  Status prepare_workers(JobLaunch& launch, Job& job) const;
  // Each task's device cgroup (TaskSpec::device_cgroup), one per distinct
  // set of GPUs, where the executor knows the node's GPU files; sets
  // job.device_cgroups.
  Status prepare_device_cgroups(JobLaunch& launch, Job& job) const;
  // `restore_images`: the worker's `runc checkpoint` images; the bundle then
  // gets a new config.json (the new allocation) and a `runc restore` command.
  // The OCI container of an image job's worker (inner's one worker and its
  // tasks), bundled in `dir` on the image's root file system.
  OciContainer container_config(const JobLaunch& l, const JobLaunch& inner,
                                const std::string& rootfs, const std::string& dir) const;
  Status prepare_container(JobLaunch& launch, std::size_t worker, const Job& job,
                           const std::string& restore_images = "") const;
  std::string container_id(JobId job, int worker) const;
  // The image job's side of begin_restore (after prepare_restore).
  Status prepare_container_restore(JobLaunch& launch, const std::string& image_dir, Job& job,
                                   Restore& restore) const;
  // On the restore's thread: starts the job shell and waits for its runc
  // restores (Restore's comment).
  void run_container_restore(Restore& restore);
  // The restore's job directory (new launch.json, hostfile) and cgroups.
  Status prepare_restore(const JobLaunch& launch, const std::string& image_dir, Job& job);
  // Kills what is left of a job that is not to be reported, waits, removes
  // its cgroups and directory.
  void discard(Job& job);
  void hold_shell(Job& job, bool hold);  // SIGSTOP/SIGCONT (checkpoint of an image job)
  // Clones the shell into its PID namespace and cgroups; sets job.pid,
  // pidfd and ready_fd. Touches nothing but `job` (a container restore runs
  // it on its own thread).
  Status start_shell(Job& job);
  // Reads the job's "tasks started" pipe without blocking; once it has
  // spoken (the byte, or end of file: the shell ended) marks it started.
  void check_ready(Job& job);
  // The tasks are started (or will never be): the pipe closed, the launch
  // named to take_started(), the held signals sent.
  void mark_started(Job& job);
  // A signal for the job's tasks: to the shell now, or once its tasks are
  // started. Returns signal_pidfd's answer (0 when held).
  int signal_tasks(Job& job, int signo);
  bool poll_exit(Job& job);  // true once the shell has been waited for
  // The job's end (its cancel, or its shell's end) ends a step still
  // running: it has kill_grace to end by itself, then SIGKILL
  // (check_timeouts). One whose tasks end meanwhile (an MPI launcher's
  // daemon that mpirun, ending the script, did not wait for) keeps its own
  // outcome and usage; one killed is kCancelled. SIGKILL at once cut such a
  // daemon's last milliseconds (CANCELLED, often with no CPU time), and so
  // did SIGTERM (Open MPI's orted then exits non-zero).
  void end_with_job(Job& step);
  JobExit exit_of(const Job& job) const;

  const ExecutorConfig config_;
  const bool pmix_shell_present_;
  const CgroupHierarchy hierarchy_;
  std::map<JobId, Job> jobs_;
  Fd notify_read_, notify_write_;  // dumps' "done" pipe (non-blocking)
  std::map<JobId, std::unique_ptr<Dump>> dumps_;
  std::map<JobId, std::unique_ptr<Restore>> restores_;
  bool criu_probed_ = false;
  Status criu_status_;                        // the probe's answer
  std::optional<Status> other_users_status_;  // the unprivileged trial's, once made
  CriuInfo criu_;
};

}  // namespace hpcq::agent
