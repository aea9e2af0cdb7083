#include "agent/executor/process_executor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <thread>

#include "agent/executor/output_credit.h"
#include "agent/executor/posix.h"

namespace hpcq::agent {

std::string ProcessExecutor::name_of(JobId id, std::uint32_t step) {
  return "job " + std::to_string(id) + (step ? " step " + std::to_string(step) : "");
}

ProcessExecutor::ProcessExecutor(ExecutorConfig config, CgroupHierarchy hierarchy, int notify[2])
    : config_(std::move(config)),
      pmix_shell_present_(access((config_.job_shell_path + kPmixShellSuffix).c_str(), X_OK) == 0),
      hierarchy_(std::move(hierarchy)),
      notify_read_(notify[0]),
      notify_write_(notify[1]) {}

ProcessExecutor::~ProcessExecutor() { shutdown(); }

Result<std::unique_ptr<ProcessExecutor>> ProcessExecutor::create(ExecutorConfig config) {
  if (config.instance.empty() || config.instance.find('/') != std::string::npos) {
    return invalid_argument("executor instance name '" + config.instance +
                            "' must be non-empty and contain no '/'");
  }
  if (config.state_dir.empty()) return invalid_argument("executor: no state directory");
  if (access(config.job_shell_path.c_str(), X_OK) != 0) {
    return failed_precondition("job shell '" + config.job_shell_path +
                               "' is not executable: " + errno_text(errno));
  }
  if (config.private_tmp != "off") {
    const std::string jobs = std::filesystem::weakly_canonical(config.state_dir).string() + "/";
    for (const char* hidden : {"/tmp/", "/dev/shm/"}) {
      if (jobs.rfind(hidden, 0) == 0) {
        return failed_precondition("[agent] private_tmp: the job directories (" + config.state_dir +
                                   ") may not lie under " + hidden +
                                   ", which each job's own hides from its shell");
      }
    }
  }
  auto hierarchy = CgroupHierarchy::detect(config.cgroup_root);
  if (!hierarchy.is_ok()) return hierarchy.status();
  auto base = hierarchy->settle_in_own_cgroup(getpid());
  if (!base.is_ok()) {
    spdlog::warn("executor {}: {}; job cgroups go under the root", config.instance,
                 base.status().message());
  } else if (*base != "/") {
    spdlog::info("executor {}: job cgroups go under the agent's own cgroup {}", config.instance,
                 *base);
  }
  std::error_code ec;
  const std::string jobs = config.state_dir + "/jobs";
  std::filesystem::create_directories(jobs, ec);
  if (ec) return internal_error("create " + jobs + ": " + ec.message());
  // Job users reach their own job's directory below here, but cannot list
  // which jobs the node runs (issue 45).
  std::filesystem::permissions(jobs, std::filesystem::perms(0711), ec);
  if (ec) return internal_error("chmod " + jobs + ": " + ec.message());
  int notify[2];
  if (pipe2(notify, O_CLOEXEC | O_NONBLOCK) != 0)
    return internal_error("pipe: " + errno_text(errno));
  std::unique_ptr<ProcessExecutor> executor(
      new ProcessExecutor(std::move(config), std::move(hierarchy).value(), notify));
  std::set<JobId> kept;
  if (executor->config_.take_back_shells) kept = executor->take_back_shells();
  int left = executor->hierarchy_.remove_stale(executor->config_.instance, kept);
  if (left > 0) {
    spdlog::warn("executor {}: {} cgroup(s) of a previous instance still hold processes",
                 executor->config_.instance, left);
  }
  return executor;
}

bool ProcessExecutor::poll_exit(Job& job) {
  if (job.exited) return true;
  if (job.adopted) return poll_adopted_exit(job);
  siginfo_t info{};
  if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(job.pidfd), &info,
             WEXITED | WNOHANG) != 0) {
    if (errno == EINTR) return false;
    // ECHILD: someone reaped our child (SIGCHLD ignored, waitpid(-1)): the
    // job is over but its code is lost.
    spdlog::warn("job {}: waitid: {}", job.id, errno_text(errno));
    job.shell_code = 255;
  } else if (info.si_pid == 0) {
    return false;
  } else if (info.si_code == CLD_EXITED) {
    job.shell_code = info.si_status;
  } else {
    job.shell_signal = info.si_status;
    job.shell_code = 128 + info.si_status;
  }
  // The pidfd stays open until reap(): the agent re-reads wait_fds() after
  // each reap(), so closing it anywhere else could leave it polling a dead fd.
  job.exited = true;
  return true;
}

JobExit ProcessExecutor::exit_of(const Job& job) const {
  JobExit e;
  e.id = job.id;
  e.step = job.step;
  e.exit_code = job.shell_code;
  const JobFiles files(job.dir);
  // The usage measured here: the shell's, and the cgroup's peak.
  const auto results = decode_results(read_whole(files.results));
  if (results.is_ok()) e.cpu_time_us = results->cpu_time_us;
  e.max_memory_bytes = job.memory_peak;
  if (job.cancelled || (job.ending_with_job && job.shell_code != 0)) {
    e.kind = ExitKind::kCancelled;
    e.reason = job.cancelled ? "cancelled" : "cancelled: its job ended";
    return e;
  }
  if (job.timed_out) {
    e.kind = ExitKind::kTimeout;
    e.reason = "time limit of " + std::to_string(job.time_limit_s) + " s reached" +
               (job.kill_sent ? " (killed after the grace period)" : "");
    return e;
  }
  if (job.shell_code == 0) {
    e.kind = ExitKind::kCompleted;
    return e;
  }
  e.kind = ExitKind::kFailed;
  // Named, not just "killed by signal 9" (Slurm: OUT_OF_MEMORY).
  const std::string oom = job.oom_kills > 0 ? "out of memory: the kernel killed " +
                                                  std::to_string(job.oom_kills) +
                                                  " process(es) at the job's memory limit; "
                                            : "";
  if (results.is_ok()) {
    e.reason = describe_results(*results);
    if (!e.reason.empty()) {
      e.reason = oom + e.reason;
      return e;
    }
  }
  if (job.shell_signal != 0) {
    e.reason = "job shell killed by signal " + std::to_string(job.shell_signal);
    return e;
  }
  std::string line = last_line(files.shell_log);
  e.reason = line.empty() ? "job shell exited with code " + std::to_string(job.shell_code) : line;
  return e;
}

Status ProcessExecutor::cancel(JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return not_found("job " + std::to_string(id) + " is not running here");
  Job& job = it->second;
  if (job.checkpointing) {
    return failed_precondition("job " + std::to_string(id) +
                               " is being checkpointed: cancel it once that is done");
  }
  for (Job* step : steps_of(id)) end_with_job(*step);
  if (poll_exit(job)) return failed_precondition("job " + std::to_string(id) + " already ended");
  if (signal_pidfd(job.pidfd, SIGKILL) != 0) {
    return internal_error("job " + std::to_string(id) + ": kill: " + errno_text(errno));
  }
  job.cancelled = true;
  return Status::ok();
}

void ProcessExecutor::set_limit(Job& job, std::int64_t seconds) {
  job.deadline = seconds > 0 ? job.launched + seconds * kUsPerSecond : 0;
  job.warn_at = job.deadline != 0 && job.warn_signal != 0
                    ? std::max(job.launched, job.deadline - job.warn_seconds * kUsPerSecond)
                    : 0;
}

Status ProcessExecutor::set_time_limit(JobId id, std::int64_t seconds) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return not_found("job " + std::to_string(id) + " is not running here");
  Job& job = it->second;
  job.time_limit_s = seconds;
  // A job already past its old limit is ending: the new one does not save it.
  if (!job.timed_out) set_limit(job, seconds);
  record_shell(job);
  return Status::ok();
}

Status ProcessExecutor::cancel_step(JobId id, std::uint32_t step) {
  const std::string name = name_of(id, step);
  auto it = steps_.find({id, step});
  if (it == steps_.end()) return not_found(name + " is not running here");
  if (poll_exit(it->second)) return failed_precondition(name + " already ended");
  if (signal_pidfd(it->second.pidfd, SIGKILL) != 0) {
    return internal_error(name + ": kill: " + errno_text(errno));
  }
  it->second.cancelled = true;
  return Status::ok();
}

Status ProcessExecutor::signal(JobId id, int signo) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return not_found("job " + std::to_string(id) + " is not running here");
  Job& job = it->second;
  for (Job* step : steps_of(id)) {
    if (!poll_exit(*step)) signal_tasks(*step, signo);
  }
  if (poll_exit(job)) return failed_precondition("job " + std::to_string(id) + " already ended");
  if (signal_tasks(job, signo) != 0) {
    return internal_error("job " + std::to_string(id) + ": signal " + std::to_string(signo) + ": " +
                          errno_text(errno));
  }
  return Status::ok();
}

Status ProcessExecutor::signal_step(JobId id, std::uint32_t step, int signo) {
  const std::string name = name_of(id, step);
  auto it = steps_.find({id, step});
  if (it == steps_.end()) return not_found(name + " is not running here");
  if (poll_exit(it->second)) return failed_precondition(name + " already ended");
  if (signal_tasks(it->second, signo) != 0) {
    return internal_error(name + ": signal " + std::to_string(signo) + ": " + errno_text(errno));
  }
  return Status::ok();
}

Status ProcessExecutor::launch_step(JobLaunch l) {
  ensure_workers(l);
  l.leader_lease = config_.leader_lease;
  const std::string name = name_of(l.id, l.step);
  auto parent = jobs_.find(l.id);
  if (parent == jobs_.end() || parent->second.exited) {
    return not_found(name + ": the job is not running here");
  }
  if (parent->second.checkpointing) {
    return failed_precondition(name + ": the job is being checkpointed");
  }
  if (steps_.count({l.id, l.step})) {
    return Status(Code::kAlreadyExists, name + " is already running here");
  }
  HPCQ_RETURN_IF_ERROR(validate(l));
  resolve_user(l);
  offer_pmix_where_present(l);
  l.pmi.max_kvs_bytes = config_.pmi_max_kvs_bytes;
  Job s;
  const std::string steps_dir = parent->second.dir + "/steps";
  s.dir = steps_dir + "/" + std::to_string(l.step);
  take_launch_fields(s, l);
  s.report_start = true;
  if (mkdir(steps_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return internal_error(name + ": mkdir " + steps_dir + ": " + errno_text(errno));
  }
  std::error_code ec;
  Status st = prepare_job_dir(l, s.dir);
  if (st.is_ok()) {
    // Its cpuset within the job's; the job's memory limit covers it.
    auto cgroup = parent->second.cgroup.create_child("step-" + std::to_string(l.step),
                                                     {l.host_cpus, l.host_mems, 0, 0});
    if (cgroup.is_ok()) {
      s.cgroup = std::move(cgroup).value();
      s.shell_cgroup = s.cgroup;
    }
    st = cgroup.status();
  }
  if (st.is_ok()) st = prepare_device_cgroups(l, s);
  // The job's TMPDIR, /tmp and /dev/shm.
  s.private_dir = parent->second.private_dir;
  if (!parent->second.image)
    l.tmpdir = s.private_dir.empty() ? JobFiles(parent->second.dir).tmpdir : "/tmp";
  if (st.is_ok()) st = write_new_file(JobFiles(s.dir).launch, encode_launch(l), 0600, 0, 0);
  if (st.is_ok()) st = start_shell(s);
  if (!st.is_ok()) {
    if (!s.cgroup.dirs().empty() && !s.cgroup.remove().is_ok()) {
      spdlog::warn("{}: cgroups not removed after a failed start", name);
    }
    std::filesystem::remove_all(s.dir, ec);
    return Status(st.code(), name + ": " + st.message());
  }
  record_shell(s);
  steps_.emplace(std::make_pair(l.id, l.step), std::move(s));
  return Status::ok();
}

void ProcessExecutor::end_with_job(Job& step) {
  if (step.ending_with_job || step.cancelled || poll_exit(step)) return;
  // The grace counts from the next check_timeouts, on its clock.
  step.ending_with_job = true;
}

void ProcessExecutor::check_timeouts(TimeUs now) {
  for (auto& [id, job] : jobs_) {
    job.channel.send_queued();
    check_ready(job);  // a shell silent past its bound
  }
  for (auto& [key, step] : steps_) {
    step.channel.send_queued();
    check_ready(step);
    if (!step.ending_with_job || step.kill_sent || step.exited) continue;
    if (step.term_sent == 0) {
      step.term_sent = now;
    } else if (now >= step.term_sent + config_.kill_grace) {
      signal_pidfd(step.pidfd, SIGKILL);
      step.kill_sent = true;
    }
  }
  for (auto& [id, job] : jobs_) {
    if (job.exited || job.pidfd < 0 || job.deadline == 0 || job.cancelled || job.checkpointing) {
      continue;
    }
    if (job.warn_at != 0 && now >= job.warn_at && !job.timed_out) {
      // --signal: to the tasks (the shell forwards it to every process of
      // the job) and the job's steps; with B: (the script alone) to the
      // script's own process, the shell's child, as sbatch's B: does.
      if (job.warn_script && !job.warn_steps && !job.image) {
        signal_children(job.pid, job.warn_signal);
      } else if (job.warn_script) {
        signal_tasks(job, job.warn_signal);
      }
      if (job.warn_steps) {
        for (Job* step : steps_of(id)) signal_tasks(*step, job.warn_signal);
      }
      job.warn_at = 0;
    }
    if (!job.timed_out && now >= job.deadline) {
      // The shell forwards SIGTERM to every process of the job.
      signal_tasks(job, SIGTERM);
      job.timed_out = true;
      job.term_sent = now;
    } else if (job.timed_out && !job.kill_sent && now >= job.term_sent + config_.kill_grace) {
      signal_pidfd(job.pidfd, SIGKILL);
      job.kill_sent = true;
    }
  }
}

Status ProcessExecutor::clean_up(Job& job) {
  // The shell is gone: its pipe said so (end of file) or never will.
  check_ready(job);
  mark_started(job);
  if (job.pidfd >= 0) {
    close(job.pidfd);  // readable for good now; cleanup retries ride on later calls
    job.pidfd = -1;
  }
  read_channel(job);                // all of it: the shell wrote it before it exited
  close_fd(job.channel.listen_fd);  // no shell will connect any more
  if (job.oom_kills < 0) {          // before the cgroup goes
    // Only a failed job's end names them (exit_of), and counting lists
    // every cgroup of the job's (v1).
    job.oom_kills = job.shell_code == 0 ? 0 : job.cgroup.oom_kills();
    job.memory_peak = job.cgroup.memory_peak_bytes();
  }
  Status s = job.cgroup.remove();
  if (!s.is_ok()) {
    if (s.code() != Code::kFailedPrecondition) spdlog::warn("job {}: {}", job.id, s.message());
    return s;  // again on the next call
  }
  if (job.image || (job.step == 0 && job.device_cgroups)) {
    hierarchy_.remove_other_controllers(config_.instance, job.id);
  }
  return Status::ok();
}

std::vector<JobExit> ProcessExecutor::reap() {
  std::vector<JobExit> exits;
  for (auto& [key, step] : steps_) check_ready(step);
  for (auto& [id, job] : jobs_) check_ready(job);
  // Steps first: a job whose shell has ended waits for its steps to go.
  for (auto it = steps_.begin(); it != steps_.end();) {
    Job& step = it->second;
    if (!poll_exit(step) || !clean_up(step).is_ok()) {
      ++it;
      continue;
    }
    exits.push_back(exit_of(step));
    std::error_code ec;
    std::filesystem::remove_all(step.dir, ec);
    it = steps_.erase(it);
  }
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Job& job = it->second;
    if (job.checkpointing || !poll_exit(job)) {  // a dump's kill is not an end
      ++it;
      continue;
    }
    // The job's end ends its steps (a batch script that left one running).
    std::vector<Job*> steps = steps_of(job.id);
    for (Job* step : steps) end_with_job(*step);
    if (!steps.empty() || !clean_up(job).is_ok()) {
      if (job.pidfd >= 0) {  // its steps' pidfds wake the next call
        close(job.pidfd);
        job.pidfd = -1;
      }
      ++it;
      continue;
    }
    exits.push_back(exit_of(job));
    remove_job_dir(job.dir);
    it = jobs_.erase(it);
  }
  return exits;
}

std::vector<LaunchStarted> ProcessExecutor::take_started() {
  for (auto& [key, step] : steps_) check_ready(step);
  for (auto& [id, job] : jobs_) check_ready(job);
  return std::exchange(started_, {});
}

std::vector<ProcessExecutor::Job*> ProcessExecutor::steps_of(JobId id) {
  std::vector<Job*> steps;
  for (auto it = steps_.lower_bound({id, 0}); it != steps_.end() && it->first.first == id; ++it) {
    steps.push_back(&it->second);
  }
  return steps;
}

std::vector<int> ProcessExecutor::wait_fds() const {
  std::vector<int> fds;
  if (!dumps_.empty() || !restores_.empty()) fds.push_back(notify_read_.get());
  for (const auto& [id, job] : jobs_) {
    if (job.pidfd >= 0) fds.push_back(job.pidfd);
    if (job.channel.fd >= 0) fds.push_back(job.channel.fd);
    if (job.channel.listen_fd >= 0) fds.push_back(job.channel.listen_fd);
    if (job.ready_fd >= 0) fds.push_back(job.ready_fd);
  }
  for (const auto& [key, step] : steps_) {
    if (step.pidfd >= 0) fds.push_back(step.pidfd);
    if (step.channel.fd >= 0) fds.push_back(step.channel.fd);
    if (step.channel.listen_fd >= 0) fds.push_back(step.channel.listen_fd);
    if (step.ready_fd >= 0) fds.push_back(step.ready_fd);
  }
  return fds;
}

void ProcessExecutor::read_channel(Job& job) {
  job.channel.read({job.id, job.step, static_cast<std::size_t>(config_.pmi_max_kvs_bytes), output_,
                    pmi_events_});
}

Result<LiveUsage> ProcessExecutor::usage(JobId id, std::uint32_t step) const {
  const Job* job = nullptr;
  if (step == 0) {
    auto it = jobs_.find(id);
    if (it != jobs_.end()) job = &it->second;
  } else {
    auto it = steps_.find({id, step});
    if (it != steps_.end()) job = &it->second;
  }
  if (!job || job->exited) return not_found(name_of(id, step) + " is not running here");
  LiveUsage u;
  const JobCgroup& cgroup = job->cgroup;
  const long ticks = sysconf(_SC_CLK_TCK);
  for (pid_t pid : cgroup.pids()) {  // its steps' too: their cgroups are children
    const std::string stat = read_whole("/proc/" + std::to_string(pid) + "/stat");
    const std::size_t close = stat.rfind(')');  // the name may hold anything
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    std::int64_t ticks_used = 0;
    // After the name: state is field 3; utime, stime, cutime, cstime are 14-17.
    for (int n = 3; n <= 17 && fields >> field; ++n) {
      if (n >= 14) ticks_used += std::strtoll(field.c_str(), nullptr, 10);
    }
    u.cpu_time_us += ticks > 0 ? ticks_used * 1'000'000 / ticks : 0;
  }
  u.memory_bytes = cgroup.memory_bytes();
  u.max_memory_bytes = cgroup.memory_peak_bytes();
  return u;
}

ProcessExecutor::Job* ProcessExecutor::find(JobId id, std::uint32_t step) {
  if (step == 0) {
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : &it->second;
  }
  auto it = steps_.find({id, step});
  return it == steps_.end() ? nullptr : &it->second;
}

Status ProcessExecutor::fence_done(JobId id, std::uint32_t step, std::uint32_t seq,
                                   const std::string& data) {
  Job* job = find(id, step);
  const std::string name = name_of(id, step);
  if (!job || job->exited) return not_found(name + " is not running here");
  if (!job->channel.takes_frames()) {
    return failed_precondition(name + " has no MPI world across nodes");
  }
  for (const FenceFrame& frame : split_fence(seq, data)) {
    job->channel.send(encode_input_frame(frame));
  }
  return Status::ok();
}

Status ProcessExecutor::fence_failed(JobId id, std::uint32_t step, std::uint32_t seq,
                                     const std::string& why) {
  Job* job = find(id, step);
  const std::string name = name_of(id, step);
  if (!job || job->exited) return not_found(name + " is not running here");
  if (!job->channel.takes_frames()) {
    return failed_precondition(name + " has no MPI world across nodes");
  }
  job->channel.send(encode_input_frame(FenceFrame{seq, true, why, /*failed=*/true}));
  return Status::ok();
}

Status ProcessExecutor::deliver_modex(JobId id, std::uint32_t step, const ModexFrame& frame) {
  Job* job = find(id, step);
  const std::string name = name_of(id, step);
  if (!job || job->exited) return not_found(name + " is not running here");
  if (!job->channel.takes_frames() && job->channel.listen_fd < 0) {
    return failed_precondition(name + " has no MPI world across nodes");
  }
  job->channel.send(encode_input_frame(frame));
  return Status::ok();
}

std::vector<PmiEvent> ProcessExecutor::take_pmi_events() { return std::exchange(pmi_events_, {}); }

Status ProcessExecutor::write_input(JobId id, std::uint32_t step, const TaskInput& input) {
  Job* job = find(id, step);
  const std::string name = name_of(id, step);
  if (!job || job->exited) return not_found(name + " is not running here");
  if (!job->channel.takes_frames()) return failed_precondition(name + " does not take input");
  job->channel.send(encode_input_frame(input));
  return Status::ok();
}

Status ProcessExecutor::grant_output(JobId id, std::uint32_t step, int rank, bool is_stderr,
                                     std::uint64_t bytes) {
  Job* job = find(id, step);
  const std::string name = name_of(id, step);
  if (!job || job->exited) return not_found(name + " is not running here");
  // A container's shell takes no credit (shell_io.h, TaskIo).
  if (!job->channel.takes_frames() || job->image) {
    return failed_precondition(name + " takes no credit");
  }
  job->channel.send(encode_credit_frame({rank, is_stderr, bytes}));
  return Status::ok();
}

std::vector<TaskOutput> ProcessExecutor::take_output() {
  for (auto& [id, job] : jobs_) read_channel(job);
  for (auto& [key, step] : steps_) read_channel(step);
  return std::exchange(output_, {});
}

std::vector<JobId> ProcessExecutor::running() const {
  std::vector<JobId> ids;
  for (const auto& [id, job] : jobs_) ids.push_back(id);
  return ids;
}

std::vector<std::string> ProcessExecutor::cgroup_dirs(JobId id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? std::vector<std::string>{} : it->second.cgroup.dirs();
}

void ProcessExecutor::discard(Job& job) {
  close_fd(job.ready_fd);  // not reported: nor is its start
  job.channel.close();
  if (!job.exited && job.pidfd >= 0) {
    signal_pidfd(job.pidfd, SIGKILL);
    wait_gone(job);
    job.exited = true;
  }
  close_fd(job.pidfd);
  // Emptied cgroups may refuse rmdir for a moment (v2): retry for up to 2 s.
  for (int attempt = 0; attempt < 200 && !job.cgroup.remove().is_ok(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!job.cgroup.dirs().empty()) {
    spdlog::warn("job {}: cgroup {} not removed", job.id, job.cgroup.dirs().front());
  }
  if (job.image || (job.step == 0 && job.device_cgroups)) {
    hierarchy_.remove_other_controllers(config_.instance, job.id);
  }
  remove_job_dir(job.dir);  // a step's has no private mounts: only the removal applies
}

void ProcessExecutor::shutdown() {
  // A dump in flight is waited for (CRIU is bounded by criu_timeout_s).
  while (!dumps_.empty()) (void)finish_dump(dumps_.begin()->first);
  while (!restores_.empty()) (void)finish_restore(restores_.begin()->first);
  for (auto& [key, step] : steps_) discard(step);
  steps_.clear();
  for (auto& [id, job] : jobs_) discard(job);
  jobs_.clear();
  hierarchy_.remove_instance_dirs(config_.instance);
}

}  // namespace hpcq::agent
