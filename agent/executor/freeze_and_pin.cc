#include "agent/executor/freeze_and_pin.h"

#include <errno.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

#include "agent/executor/posix.h"

namespace hpcq::agent {
namespace {

namespace fs = std::filesystem;

// HPCQ_LOCAL_TASK from the environment `pid` was exec'd with; -1 if none.
int local_task_of(pid_t pid) {
  const std::string env = read_whole("/proc/" + std::to_string(pid) + "/environ");
  static const std::string kKey = "HPCQ_LOCAL_TASK=";
  size_t at = 0;
  while (at < env.size()) {
    size_t end = env.find('\0', at);
    if (end == std::string::npos) end = env.size();
    if (env.compare(at, kKey.size(), kKey) == 0) {
      return std::atoi(env.c_str() + at + kKey.size());
    }
    at = end + 1;
  }
  return -1;
}

// The task that host process `pid` belongs to: that of its ancestor just
// below the shell (orphans are the shell's children themselves); null for the
// shell and for anything that names no task.
const TaskSpec* task_of(pid_t pid, pid_t shell, const JobLaunch& l) {
  pid_t p = pid;
  for (int depth = 0; p > 1 && p != shell && depth < 4096; ++depth) {
    pid_t parent = parent_of(p);
    if (parent == shell) {
      int local = local_task_of(p);
      if (local >= 0 && static_cast<size_t>(local) < l.tasks.size()) {
        return &l.tasks[static_cast<size_t>(local)];
      }
      break;
    }
    p = parent;
  }
  return nullptr;
}

// Pins every thread of `pid` to `cpus` (none: left as it is).
Status pin_threads(pid_t pid, const std::vector<int>& cpus) {
  if (cpus.empty()) return Status::ok();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(static_cast<size_t>(c), &set);
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    pid_t tid = static_cast<pid_t>(std::atoi(task.path().filename().c_str()));
    if (sched_setaffinity(tid, sizeof set, &set) != 0 && errno != ESRCH) {
      return internal_error("sched_setaffinity of thread " + std::to_string(tid) + ": " +
                            errno_text(errno));
    }
  }
  return Status::ok();
}

}  // namespace

std::string freezer_dir(const JobCgroup& cgroup) {
  for (const std::string& dir : cgroup.dirs()) {
    if (access((dir + "/freezer.state").c_str(), F_OK) == 0 ||
        access((dir + "/cgroup.freeze").c_str(), F_OK) == 0) {
      return dir;
    }
  }
  return "";
}

Status set_frozen(const std::string& dir, bool frozen) {
  const bool v1 = access((dir + "/freezer.state").c_str(), F_OK) == 0;
  const std::string file = dir + (v1 ? "/freezer.state" : "/cgroup.freeze");
  if (!write_text(file, v1 ? (frozen ? "FROZEN" : "THAWED") : (frozen ? "1" : "0"))) {
    return internal_error("write " + file + ": " + errno_text(errno));
  }
  if (!frozen) return Status::ok();
  // A loaded machine (or a tree CRIU has just restored) can take seconds to
  // freeze; v1 may also stay FREEZING until FROZEN is written again, as runc
  // does.
  for (int attempt = 1; attempt <= 5000; ++attempt) {
    std::string state = read_whole(v1 ? file : dir + "/cgroup.events");
    if (v1 ? state.rfind("FROZEN", 0) == 0 : state.find("frozen 1") != std::string::npos) {
      return Status::ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (v1 && attempt % 50 == 0) (void)write_text(file, "FROZEN");
  }
  return internal_error(dir + " did not freeze within 10 seconds");
}

Status pin_tasks(const JobCgroup& cgroup, pid_t shell, const JobLaunch& l) {
  for (pid_t pid : cgroup.pids()) {
    const TaskSpec* task = task_of(pid, shell, l);
    if (task != nullptr) {
      const WorkerSpec& worker = l.workers[static_cast<size_t>(task->worker)];
      HPCQ_RETURN_IF_ERROR(JobCgroup(cgroup.version(), worker.cgroup_dirs).add_process(pid));
      if (!task->device_cgroup.empty()) {
        HPCQ_RETURN_IF_ERROR(JobCgroup(cgroup.version(), {task->device_cgroup}).add_process(pid));
      }
    }
    HPCQ_RETURN_IF_ERROR(pin_threads(
        pid, task != nullptr && !task->host_cpus.empty() ? task->host_cpus : l.host_cpus));
  }
  return Status::ok();
}

// The same for a restored container: the processes of each worker's cgroup
// (runc made it, below the job's) go to their task's CPUs; a process's task
// is found below the container's init as below the shell above (the shell
// inside numbers the worker's tasks from 0, in the launch's order).
Status pin_container_tasks(const JobCgroup& job_cgroup, const JobLaunch& l) {
  for (std::size_t w = 0; w < l.workers.size(); ++w) {
    std::vector<std::string> dirs;
    for (const std::string& dir : job_cgroup.dirs()) {
      dirs.push_back(dir + "/worker-" + std::to_string(l.workers[w].id));
    }
    const std::vector<pid_t> pids = JobCgroup(job_cgroup.version(), dirs).pids();
    const std::set<pid_t> in_container(pids.begin(), pids.end());
    pid_t init = -1;
    for (pid_t pid : pids) {
      if (!in_container.count(parent_of(pid))) init = pid;
    }
    JobLaunch inner;
    for (const TaskSpec& t : l.tasks) {
      if (t.worker == static_cast<int>(w)) inner.tasks.push_back(t);
    }
    for (pid_t pid : pids) {
      const TaskSpec* task = init > 0 ? task_of(pid, init, inner) : nullptr;
      HPCQ_RETURN_IF_ERROR(pin_threads(pid, task != nullptr && !task->host_cpus.empty()
                                                ? task->host_cpus
                                                : l.workers[w].host_cpus));
    }
  }
  return Status::ok();
}

}  // namespace hpcq::agent
