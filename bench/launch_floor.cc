// The cheapest honest launch of a job's command on this machine (issue 27,
// goal 4), the floor hpcq's cost per job is measured against: for each job,
// a cgroup made in every controller hpcq limits a job with (cgroup v1:
// cpuset, memory, pids, freezer) and its CPUs written, a child cloned into a
// new PID namespace and put into the cgroups, /bin/true exec'd as its init
// and waited for, the cgroups removed. One job after another; no daemon, no
// message, no file.
//
// Usage: hpcq-launch-floor [--jobs N]   (root; cgroup v1 only so far)
// Prints one JSON line: jobs, wall seconds, CPU seconds (this process and its
// children, user + system) and both per job in ms.
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "hpcq-launch-floor: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  if (!out) die("writing " + path);
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

double cpu_seconds() {
  double total = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage u{};
    getrusage(who, &u);
    total += static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
             static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  }
  return total;
}

// The parent directories a job's cgroups go under, one per hierarchy.
struct Hierarchy {
  std::string parent;
  bool cpuset = false;  // its cpuset files must be filled before a task joins
};

std::vector<Hierarchy> make_parents() {
  const bool v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
  std::vector<Hierarchy> out;
  if (v2) {
    // Not written yet: the v2 floor (one directory, CLONE_INTO_CGROUP) is
    // hpcq's own next step there (issue 27).
    errno = ENOTSUP;
    die("cgroup v2 is not measured yet (cgroup v1 only)");
  }
  for (const char* controller : {"cpuset", "memory", "pids", "freezer"}) {
    const std::string root = std::string("/sys/fs/cgroup/") + controller;
    const std::string parent = root + "/hpcq-floor";
    if (mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) die("mkdir " + parent);
    const bool cpuset = std::strcmp(controller, "cpuset") == 0;
    if (cpuset) {
      write_file(parent + "/cpuset.cpus", read_line(root + "/cpuset.cpus"));
      write_file(parent + "/cpuset.mems", read_line(root + "/cpuset.mems"));
    }
    out.push_back({parent, cpuset});
  }
  return out;
}

void launch_one(const std::vector<Hierarchy>& hierarchies, int n) {
  std::vector<std::string> dirs;
  for (const Hierarchy& h : hierarchies) {
    const std::string dir = h.parent + "/job-" + std::to_string(n);
    if (mkdir(dir.c_str(), 0755) != 0) die("mkdir " + dir);
    if (h.cpuset) {
      write_file(dir + "/cpuset.cpus", read_line(h.parent + "/cpuset.cpus"));
      write_file(dir + "/cpuset.mems", read_line(h.parent + "/cpuset.mems"));
    }
    dirs.push_back(dir);
  }
  // As the executor does: the child waits until it is in the cgroups.
  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0) die("pipe");
  int pidfd = -1;
  clone_args args{};
  args.flags = CLONE_NEWPID | CLONE_PIDFD;
  args.pidfd = reinterpret_cast<std::uintptr_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  const long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0) die("clone3");
  if (pid == 0) {
    char byte;
    if (read(go[0], &byte, 1) != 1) _exit(126);
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    char* envp[] = {nullptr};
    execve(argv[0], argv, envp);
    _exit(127);
  }
  close(go[0]);
  for (const std::string& dir : dirs) write_file(dir + "/cgroup.procs", std::to_string(pid));
  if (write(go[1], "g", 1) != 1) die("releasing the child");
  close(go[1]);
  siginfo_t info{};
  if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED) != 0) {
    die("waitid");
  }
  close(pidfd);
  if (info.si_code != CLD_EXITED || info.si_status != 0) {
    errno = 0;
    die("the child failed");
  }
  for (const std::string& dir : dirs) {
    while (rmdir(dir.c_str()) != 0) {
      if (errno != EBUSY) die("rmdir " + dir);  // the exited init may linger a moment
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 500;
  if (argc == 3 && std::strcmp(argv[1], "--jobs") == 0) {
    jobs = std::atoi(argv[2]);
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: hpcq-launch-floor [--jobs N]\n");
    return 2;
  }
  if (jobs <= 0) {
    std::fprintf(stderr, "hpcq-launch-floor: --jobs must be positive\n");
    return 2;
  }
  const std::vector<Hierarchy> hierarchies = make_parents();
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = cpu_seconds();
  for (int n = 0; n < jobs; ++n) launch_one(hierarchies, n);
  const double cpu = cpu_seconds() - cpu_start;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const Hierarchy& h : hierarchies) rmdir(h.parent.c_str());  // shared: may stay
  std::printf(
      "{\"jobs\": %d, \"wall_s\": %.3f, \"cpu_s\": %.3f, \"wall_ms_per_job\": %.3f, "
      "\"cpu_ms_per_job\": %.3f}\n",
      jobs, wall, cpu, wall * 1000 / jobs, cpu * 1000 / jobs);
  return 0;
}
