// ProcessExecutor: what lets a node keep its jobs across an agent restart.
// Each shell's record (shell_record.h) is written at its start; an agent
// that leaves detaches from its jobs; the next one takes back the shells
// that still run (or have ended meanwhile) from their job directories.
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "agent/executor/process_executor.h"
#include "agent/executor/shell_record.h"
#include "lib/core/id_text.h"

namespace hpcq::agent {
namespace {

// A copy of the shell's descriptor `fd` (close-on-exec), or -1.
int fd_of_shell(int pidfd, int fd) {
  return static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0U));
}

bool is_socket(int fd) {
  struct stat st {};
  return fd >= 0 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

}  // namespace

void ProcessExecutor::take_launch_fields(Job& j, const JobLaunch& l) const {
  j.id = l.id;
  j.step = l.step;
  j.uid = l.uid;
  j.channel.open = l.has_channel();
  j.channel.on_demand = l.channel_on_demand();
  j.channel.pmi_nodes = l.pmi.nodes;
  j.channel.pmi_node_ranks = l.pmi.node_ranks;
  j.pmix_server = l.pmix_server();
  if (l.step != 0) return;  // the rest is the job's (a step has its job's)
  j.image = !l.image.empty();
  j.time_limit_s = l.time_limit_s;
  j.warn_signal = l.warn_signal;
  j.warn_seconds = l.warn_seconds;
  j.warn_script = l.warn_script;
  j.warn_steps = l.warn_steps;
  if (config_.private_tmp != "off" && l.image.empty()) j.private_dir = JobFiles(j.dir).private_dir;
}

void ProcessExecutor::record_shell(const Job& job) const {
  ShellRecord record{job.pid, read_shell_start(job.pid), job.launched, job.time_limit_s};
  Status written = replace_file(JobFiles(job.dir).shell_record, encode_shell_record(record));
  if (!written.is_ok()) {
    spdlog::warn("{}: a restarted agent could not take it back: {}", name_of(job.id, job.step),
                 written.message());
  }
}

std::optional<ProcessExecutor::Job> ProcessExecutor::take_back(const std::string& dir, JobId id,
                                                               std::uint32_t step,
                                                               const Job* parent) const {
  const JobFiles files(dir);
  auto record = decode_shell_record(read_whole(files.shell_record));
  auto launch = decode_launch(read_whole(files.launch));
  if (!record.is_ok() || !launch.is_ok() || launch->id != id || launch->step != step) {
    return std::nullopt;  // never started, or not a job directory of ours
  }
  Job j;
  j.dir = dir;
  take_launch_fields(j, *launch);
  j.adopted = true;
  j.pid = record->pid;
  j.launched = record->launched;
  if (step == 0) {
    j.time_limit_s = record->time_limit_s;
    set_limit(j, record->time_limit_s);
    j.cgroup = hierarchy_.existing_job(config_.instance, id);
    if (j.image) {
      for (const WorkerSpec& worker : launch->workers) j.worker_ids.push_back(worker.id);
    }
  } else {
    std::vector<std::string> dirs;
    for (const std::string& d : parent->cgroup.dirs())
      dirs.push_back(d + "/step-" + std::to_string(step));
    j.cgroup = JobCgroup(hierarchy_.version(), std::move(dirs));
    j.private_dir = parent->private_dir;
  }
  j.shell_cgroup = j.cgroup;
  for (const TaskSpec& task : launch->tasks) {
    if (!task.device_cgroup.empty()) j.device_cgroups = true;
  }
  j.pidfd = open_recorded_shell(*record);
  take_back_channel(j);
  if (j.pidfd < 0) {
    // Ended while no agent was here: reap() reports it from its results.
    j.exited = true;
    const auto results = decode_results(read_whole(files.results));
    j.shell_code = results.is_ok() ? results->exit_code : 128 + SIGKILL;
    j.shell_signal = results.is_ok() ? 0 : SIGKILL;
  }
  return j;
}

void ProcessExecutor::take_back_channel(Job& j) const {
  if (j.pidfd < 0 || (!j.channel.open && !j.channel.on_demand)) return;
  const int theirs = fd_of_shell(j.pidfd, kOutputFd);
  const bool opened = is_socket(theirs);
  if (j.channel.on_demand && !opened) {
    // Not opened yet: where the shell opens it, ready again.
    Result<int> listening = listen_unix(JobFiles(j.dir).pmi_socket);
    if (listening.is_ok()) j.channel.listen_fd = *listening;
  } else if (opened) {
    j.channel.open = true;
    struct stat st {};
    if (fstat(theirs, &st) == 0) j.channel.inode = st.st_ino;
    // Our end as the shell holds it (non-blocking: the flag is the socket's);
    // /dev/null where it let go of it (a dump), or an older shell's file.
    j.channel.fd = fd_of_shell(j.pidfd, kHeldChannelFd);
    if (!is_socket(j.channel.fd)) close_fd(j.channel.fd);
  }
  if (theirs >= 0) close(theirs);
}

std::set<JobId> ProcessExecutor::take_back_shells() {
  std::set<JobId> kept;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(config_.state_dir + "/jobs", ec)) {
    // Job and step directories are named by their ids (id_text.h's digits).
    const Result<JobId> id = parse_job_id(entry.path().filename().string());
    if (!id.is_ok()) continue;
    std::optional<Job> job = take_back(entry.path(), *id, 0, nullptr);
    if (!job) continue;
    kept.insert(*id);
    adopted_.push_back({*id, 0});
    Job& taken = jobs_.emplace(*id, std::move(*job)).first->second;
    for (const auto& s : std::filesystem::directory_iterator(entry.path() / "steps", ec)) {
      const Result<JobId> step = parse_job_id(s.path().filename().string());
      if (!step.is_ok() || *step > UINT32_MAX) continue;
      const auto n = static_cast<std::uint32_t>(*step);
      if (std::optional<Job> taken_step = take_back(s.path(), *id, n, &taken)) {
        adopted_.push_back({*id, n});
        steps_.emplace(std::make_pair(*id, n), std::move(*taken_step));
      }
    }
    spdlog::info("job {}: taken back from the previous agent ({}{})", *id,
                 taken.exited ? "it ended meanwhile" : "running",
                 !taken.exited && taken.channel.open && taken.channel.fd < 0
                     ? "; its channel to the agent is lost"
                     : "");
  }
  return kept;
}

bool ProcessExecutor::poll_adopted_exit(Job& job) {
  pollfd ended{job.pidfd, POLLIN, 0};
  if (job.pidfd >= 0 && poll(&ended, 1, 0) == 0) return false;
  // Not our child: its code is the one the shell wrote; none, it was killed.
  const auto results = decode_results(read_whole(JobFiles(job.dir).results));
  job.shell_code = results.is_ok() ? results->exit_code : 128 + SIGKILL;
  job.shell_signal = results.is_ok() ? 0 : SIGKILL;
  job.exited = true;
  return true;
}

void ProcessExecutor::wait_gone(Job& job) {
  siginfo_t info{};
  if (!job.adopted) {
    // SIGKILL of the namespace's init: the wait ends once all of it is gone.
    while (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(job.pidfd), &info, WEXITED) !=
               0 &&
           errno == EINTR) {
    }
    return;
  }
  pollfd ended{job.pidfd, POLLIN, 0};
  while (poll(&ended, 1, 5000) < 0 && errno == EINTR) {
  }
}

void ProcessExecutor::detach() {
  // A dump or restore in flight is finished first: CRIU is this process's.
  while (!dumps_.empty()) (void)finish_dump(dumps_.begin()->first);
  while (!restores_.empty()) (void)finish_restore(restores_.begin()->first);
  auto let_go = [](Job& job) {
    close_fd(job.ready_fd);
    close_fd(job.channel.fd);
    close_fd(job.channel.listen_fd);
    close_fd(job.pidfd);
  };
  for (auto& [key, step] : steps_) let_go(step);
  for (auto& [id, job] : jobs_) let_go(job);
  if (!jobs_.empty()) spdlog::info("executor: {} job(s) left running", jobs_.size());
  steps_.clear();
  jobs_.clear();
}

std::vector<RunId> ProcessExecutor::take_adopted() { return std::exchange(adopted_, {}); }

}  // namespace hpcq::agent
