// The job shell's descriptors besides its tasks' processes: its channel to
// the executor (fd kOutputFd), the tasks' PMI sockets (PmiClients, over
// pmi::Server) and their forwarded standard streams (TaskIo, which also
// runs the shell's wait loop while any of them is open). Used by
// hpcq-job-shell and hpcq-container-shell only (shell/main.cc), which
// are single-threaded.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/executor/output_credit.h"
#include "agent/executor/posix.h"
#include "lib/core/clock.h"
#include "lib/core/units.h"
#include "shell/contract.h"
#include "shell/pmi.h"

namespace hpcq::agent {

// A forwarding task's ends of its stdout and stderr pipes and (task 0) its
// stdin; with a terminal, all three are its slave. -1: files and /dev/null.
struct TaskStdio {
  int in = -1, out = -1, err = -1;
  bool pty = false;
  int pmi = -1;  // the task's end of its PMI socket (PMI_FD)
  // What the task's MPI world adds to its environment (PMI_FD, PMIX_*).
  std::map<std::string, std::string> mpi_env;
};

// Sends one frame to the executor on kOutputFd. Blocks while the agent is
// behind. Once the channel has failed (the agent restarted) nothing is sent
// and `broken` stays set.
inline void send_on_channel(const std::string& frame, bool& broken) {
  while (!broken && send(kOutputFd, frame.data(), frame.size(), MSG_NOSIGNAL) < 0) {
    if (errno == EINTR) continue;
    fprintf(stderr, "hpcq-job-shell: channel to the agent: %s\n", strerror(errno));
    broken = true;
  }
}

// The job's standard error, for a line of the shell's own: a forwarding
// job's (hpcq run) is an output frame on the channel, as task `rank`'s;
// else the line is appended to the job's file, opened as the job's user in
// a child (the shell is root, and the path is the user's to name).
class JobStderr {
 public:
  explicit JobStderr(const JobLaunch& l)
      : forward_(l.forward_output),
        path_(l.stderr_path),
        uid_(l.uid),
        gid_(l.gid),
        groups_(l.groups.begin(), l.groups.end()) {
    if (groups_.empty()) groups_.push_back(gid_);
  }
  void write_line(int rank, const std::string& line, bool& channel_broken) const {
    if (forward_) {
      send_on_channel(encode_output_frame(rank, true, line), channel_broken);
      return;
    }
    if (path_.empty()) return;  // /dev/null
    const pid_t pid = fork();
    if (pid == 0) {
      if (geteuid() == 0 && (setgroups(groups_.size(), groups_.data()) != 0 || setgid(gid_) != 0 ||
                             setuid(uid_) != 0)) {
        _exit(1);
      }
      const int fd = open(path_.c_str(), O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
      _exit(fd >= 0 && write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size())
                ? 0
                : 1);
    }
    while (pid > 0 && waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }

 private:
  bool forward_;
  std::string path_;  // empty: /dev/null
  uid_t uid_;
  gid_t gid_;
  std::vector<gid_t> groups_;
};

// How long a world whose spawn was refused may go on: enough for the root
// to take its error (say it, or MPI_Abort). The MPI library tells the root
// alone: the other ranks (Open MPI 4.1's, and an MPICH's that asks PMI)
// wait for it inside MPI_Comm_spawn forever, and it for them in
// MPI_Finalize.
constexpr int kSpawnGraceS = 5;

// What the shell's loop needs of the server of a job's MPI world: PMI-1
// and PMI-2 (PmiClients, below) or PMIx (PmixClients, pmix_world.h). Both share the
// channel: a world across nodes sends each fence's contribution on it to the
// executor and gets the fence's outcome back from it (TaskIo reads the
// channel), and a failure that ends the world leaves on it first.
//
// The channel's state is shared by the servers of one world: with --mpi
// pmi1,pmix both serve the tasks (BothWorlds), and the one the program uses
// opens the channel once. So is a refused spawn, whichever refused it.
struct WorldChannel {
  WorldChannel(const JobLaunch& l, const JobFiles& files)
      : open(l.has_channel()),
        socket_path(l.channel_on_demand() ? files.pmi_socket : ""),
        job_stderr(l) {}
  bool open;                // fd kOutputFd is the channel to the executor
  std::string socket_path;  // where to open it on demand; empty: not (any more)
  bool broken = false;
  JobStderr job_stderr;
  // The first spawn refused: by which rank, and when its grace ends.
  struct SpawnRefusal {
    int rank = 0;
    std::chrono::steady_clock::time_point grace_ends;
    bool ended_world = false;  // the grace passed with the world still running
  };
  std::optional<SpawnRefusal> spawn;
};

class MpiWorld {
 public:
  explicit MpiWorld(std::shared_ptr<WorldChannel> channel) : channel_(std::move(channel)) {}
  virtual ~MpiWorld() = default;
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  // Prepares task `local`'s way to the server: a descriptor it keeps
  // (`stdio.pmi`) and its environment (`stdio.mpi_env`).
  virtual bool add(std::size_t local, TaskStdio& stdio, std::string& error) = 0;
  // The descriptors the loop polls for the server; the `i`th is readable.
  virtual void poll_fds(std::vector<pollfd>& fds) const = 0;
  virtual void on_readable(std::size_t i) = 0;
  // Task `local` has ended: true when its world cannot go on without it (it
  // began and did not finish, or another began after it left).
  virtual bool task_ended(std::size_t local) = 0;
  // Whether any task has begun (PMI init, PMIx connect).
  virtual bool in_use() const = 0;
  // The task whose absence broke the world, once one has.
  virtual std::optional<std::size_t> broken_by() const = 0;
  // The first abort a task called: its rank and code.
  virtual std::optional<pmi::Server::Abort> abort() const = 0;

  // The task whose request ended the world, once one has: an abort (with
  // its code), or a spawn refused whose grace passed (code 1); `why` is its
  // result's error.
  struct Ender {
    int rank = 0;
    int code = 1;
    std::string why;
  };
  std::optional<Ender> ended_by() const {
    if (const auto a = abort()) {
      // The caller's message (PMI-2, PMIx) quoted: one printable line, cut.
      return Ender{a->rank, a->code,
                   "called MPI_Abort (PMI abort) with code " + std::to_string(a->code) +
                       (a->message.empty() ? "" : ": " + quote(a->message)) +
                       (channel_->spawn ? " after " + spawn_refusal() : "")};
    }
    if (channel_->spawn && channel_->spawn->ended_world) {
      return Ender{channel_->spawn->rank, 1,
                   std::string(pmi::kSpawnRefused) + "; its world was ended " +
                       std::to_string(kSpawnGraceS) + " s after the refusal"};
    }
    return std::nullopt;
  }
  // Why the MPI library may have given up, for the end of a task that
  // failed: a put or fence its key space refused, or a refused spawn.
  std::string cause_of_failure() const {
    const std::string key_space = key_space_refusal();
    return key_space.empty() && channel_->spawn ? spawn_refusal() : key_space;
  }
  // Milliseconds until a refused spawn's grace ends (0 once it has), for
  // the loop's poll; -1 while there is none to wait for.
  int ms_to_spawn_grace_end() const {
    if (!channel_->spawn || channel_->spawn->ended_world || ended_) return -1;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        channel_->spawn->grace_ends - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<std::chrono::milliseconds::rep>(0, left.count()));
  }
  // Once a refused spawn's grace has passed with the world still running:
  // its other ranks wait for the spawn forever, so the world ends (the
  // shell names the spawning task once the tasks are reaped).
  void end_world_after_spawn_grace() {
    if (ms_to_spawn_grace_end() != 0) return;
    channel_->spawn->ended_world = ended_ = true;
    const auto ender = ended_by();
    report_failure(ender->code, "task " + std::to_string(ender->rank) + ": " + ender->why);
    kill(-1, SIGKILL);
  }

  // A chunk of a fence's outcome from the executor, or word that it failed.
  void on_fence_frame(const FenceFrame& frame) {
    if (frame.failed) {  // its keys from all nodes passed the job's limit
      fence_data_.clear();
      if (fence_refusal_.empty()) fence_refusal_ = frame.data;
      fence_failed(frame.data);
      return;
    }
    fence_data_ += frame.data;
    if (!frame.last) return;
    fence_done(frame.seq, std::exchange(fence_data_, {}));
  }
  // A task has ended the world (`why`: "task 3: exited with code 5"): the
  // other nodes learn it, through the leader, before they see its ranks go.
  // The time goes with it: the leader keeps the failure seen first, the
  // cause, should another node's collateral reach it first.
  void report_failure(int code, const std::string& why) {
    if (open_channel()) {
      send_on_channel(encode_failure_frame(code, wall_clock_now(), why), channel_->broken);
    }
  }
  // Before a checkpoint: ends the world's PMIx server if no task has
  // connected to it; false if one has (it stays). True where there is none.
  virtual bool drop_unused_pmix() { return true; }
  // A direct modex frame from the executor: another node's request for one
  // of this node's ranks, or the answer to one of ours (PMIx only).
  virtual void on_modex_frame(ModexFrame frame) { (void)frame; }
  // Whether fd kOutputFd is the channel now (TaskIo reads it then).
  bool channel_open() const { return channel_->open; }
  // The channel is gone: no fence can complete.
  void channel_lost() { fence_failed("the job shell lost its channel to the agent"); }
  // Why the job's PMI key space refused a put or a fence (its limit,
  // [agent] pmi_max_kvs_bytes), the first time; empty while it has not.
  // The task that fails after it is said to have failed for it.
  virtual std::string key_space_refusal() const { return fence_refusal_; }

 protected:
  friend class BothWorlds;  // hands its servers their frames
  // Sends this node's contribution to fence `seq`; false when it cannot go.
  bool send_fence(std::uint32_t seq, const std::string& data) {
    if (!open_channel()) return false;
    for (const FenceFrame& f : split_fence(seq, data)) {
      send_on_channel(encode_output_frame(f), channel_->broken);
    }
    return !channel_->broken;
  }
  // Sends a direct modex request or answer; false when it cannot go.
  bool send_modex(const ModexFrame& frame) {
    if (!open_channel()) return false;
    send_on_channel(encode_output_frame(frame), channel_->broken);
    return !channel_->broken;
  }
  // The outcome of fence `seq`: every node's contributions, concatenated.
  virtual void fence_done(std::uint32_t seq, std::string data) = 0;
  // The fence in flight cannot complete (the channel is gone, its keys
  // passed the limit): its waiters are told `why`.
  virtual void fence_failed(const std::string& why) = 0;
  // Task `rank` asked to spawn processes (MPI_Comm_spawn), and was
  // answered with an error: the job's stderr says why (once), and the world
  // has kSpawnGraceS to end by itself.
  void spawn_refused(int rank) {
    if (channel_->spawn) return;
    channel_->spawn = WorldChannel::SpawnRefusal{
        rank, std::chrono::steady_clock::now() + std::chrono::seconds(kSpawnGraceS)};
    const std::string line = "hpcq: task " + std::to_string(rank) + ": " +
                             std::string(pmi::kSpawnRefused) + "; the job ends in " +
                             std::to_string(kSpawnGraceS) + " s unless it has by then\n";
    fprintf(stderr, "hpcq-job-shell: %s", line.c_str() + 6);
    channel_->job_stderr.write_line(rank, line, channel_->broken);
  }
  // Opens the channel on demand: a socketpair whose one end goes to the
  // executor through its socket, the other at kOutputFd (where a
  // placeholder kept the number free); the executor's end is held at
  // kHeldChannelFd too, so that the channel outlives the agent.
  bool open_channel() {
    if (channel_->open || channel_->socket_path.empty()) return channel_->open;
    const std::string path = std::exchange(channel_->socket_path, {});  // one try
    int pair[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
      fprintf(stderr, "hpcq-job-shell: socketpair: %s\n", errno_text(errno).c_str());
      return false;
    }
    Result<int> fd = connect_unix(path);
    Status handed = fd.is_ok() ? send_fd(*fd, pair[1]) : fd.status();
    if (fd.is_ok()) close(*fd);
    if (handed.is_ok() &&
        (dup3(pair[0], kOutputFd, O_CLOEXEC) < 0 || dup3(pair[1], kHeldChannelFd, O_CLOEXEC) < 0)) {
      handed = internal_error("dup3: " + errno_text(errno));
    }
    close(pair[0]);
    close(pair[1]);
    if (!handed.is_ok()) {
      fprintf(stderr, "hpcq-job-shell: %s\n", handed.message().c_str());
      return false;
    }
    channel_->open = true;
    return true;
  }
  // Once a task has aborted or broken the world: says so (an abort, once)
  // and ends every other process of the namespace.
  void end_world_if_broken() {
    if (ended_) return;
    if (const auto a = abort()) {
      ended_ = true;
      report_failure(a->code, "task " + std::to_string(a->rank) + ": " + ended_by()->why);
      kill(-1, SIGKILL);
    } else if (broken_by()) {
      // The shell names the task once the tasks are reaped.
      ended_ = true;
      kill(-1, SIGKILL);
    }
  }

 private:
  // "task R's spawn was refused: ...", once one was.
  std::string spawn_refusal() const {
    return "task " + std::to_string(channel_->spawn->rank) +
           "'s spawn was refused: " + std::string(pmi::kSpawnRefused);
  }

  std::shared_ptr<WorldChannel> channel_;
  std::string fence_data_;     // chunks of the fence outcome coming in
  std::string fence_refusal_;  // why a fence failed for the key space's limit
  bool ended_ = false;
};

// PMI-1 and PMI-2 (pmi.h): each task's socket; what it sends goes to the
// server, which frames it (lines or length-prefixed messages, as the task's
// first words chose), and its answers come back.
class PmiClients final : public MpiWorld {
 public:
  PmiClients(const JobLaunch& l, std::shared_ptr<WorldChannel> channel)
      : MpiWorld(std::move(channel)),
        ranks_(ranks_of(l)),
        server_(world_of(l), ranks_),
        size_(l.pmi.size) {
    fds_.assign(l.tasks.size(), -1);
  }

  // PMI_FD, PMI_RANK and PMI_SIZE are all that MPICH's PMI-1 client and
  // Slurm's libpmi2 read (libpmi2 sends PMI_RANK in its fullinit; the size
  // comes in the answer).
  bool add(std::size_t local, TaskStdio& stdio, std::string& error) override {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      error = "PMI socketpair: " + errno_text(errno);
      return false;
    }
    fds_[local] = pair[0];
    stdio.pmi = pair[1];
    stdio.mpi_env["PMI_FD"] = std::to_string(pair[1]);
    stdio.mpi_env["PMI_RANK"] = std::to_string(ranks_[local]);
    stdio.mpi_env["PMI_SIZE"] = std::to_string(size_);
    return true;
  }

  void poll_fds(std::vector<pollfd>& fds) const override {
    for (int fd : fds_) fds.push_back({fd, POLLIN, 0});
  }

  // Client `local`'s socket is readable: what it sent is served.
  void on_readable(std::size_t local) override {
    char buf[4096];
    for (;;) {
      const ssize_t n = recv(fds_[local], buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n <= 0) {  // closed: the task is gone or closed PMI
        task_ended(local);
        break;
      }
      const bool was_refused = !server_.refused(local).empty();
      send(server_.on_bytes(local, std::string_view(buf, static_cast<std::size_t>(n))));
      if (const auto spawner = server_.spawn_refused()) spawn_refused(*spawner);
      if (!was_refused && !server_.refused(local).empty()) {
        fprintf(stderr, "hpcq-job-shell: task %zu: PMI: %s\n", local,
                server_.refused(local).c_str());
      }
      // PMI_Abort ends the whole world now, whether or not the caller
      // exits; so does a task that ended before PMI began, now that
      // another has begun.
      end_world_if_broken();
    }
    if (server_.fence_pending()) {
      const std::uint32_t seq = server_.fence_seq();
      if (!send_fence(seq, server_.take_fence())) send(server_.fence_failed());
    }
  }

  bool task_ended(std::size_t local) override {
    if (fds_[local] >= 0) close(fds_[local]);
    fds_[local] = -1;
    std::vector<pmi::Reply> replies;
    server_.on_client_gone(local, replies);
    send(replies);
    return server_.broken_by().has_value();
  }
  bool in_use() const override { return server_.in_use(); }
  std::optional<std::size_t> broken_by() const override { return server_.broken_by(); }
  std::optional<pmi::Server::Abort> abort() const override { return server_.abort(); }
  std::string key_space_refusal() const override {
    return server_.key_space_refusal().empty() ? MpiWorld::key_space_refusal()
                                               : server_.key_space_refusal();
  }

 protected:
  void fence_done(std::uint32_t seq, std::string data) override {
    auto kvs = pmi::decode_kvs(data);
    if (!kvs.is_ok()) {
      fprintf(stderr, "hpcq-job-shell: %s\n", kvs.status().message().c_str());
      send(server_.fence_failed());
      return;
    }
    send(server_.fence_done(seq, *kvs));
  }
  void fence_failed(const std::string& why) override { send(server_.fence_failed(why)); }

 private:
  static pmi::World world_of(const JobLaunch& l) {
    pmi::World world;
    world.kvsname = l.pmi.kvsname;
    world.size = l.pmi.size;
    world.nodes = l.pmi.nodes;
    world.max_kvs_bytes = static_cast<std::size_t>(l.pmi.max_kvs_bytes);
    if (!l.pmi.process_mapping.empty()) {
      world.preset["PMI_process_mapping"] = l.pmi.process_mapping;
    }
    return world;
  }
  static std::vector<int> ranks_of(const JobLaunch& l) {
    std::vector<int> ranks;
    for (const TaskSpec& t : l.tasks) ranks.push_back(t.rank);
    return ranks;
  }
  // Answers; a client that cannot take its answer is gone, and its end
  // will show as such at the next read.
  void send(const std::vector<pmi::Reply>& replies) {
    for (const pmi::Reply& r : replies) {
      if (fds_[r.client] < 0) continue;
      std::string_view rest = r.text;
      while (!rest.empty()) {
        const ssize_t n = ::send(fds_[r.client], rest.data(), rest.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        rest.remove_prefix(static_cast<std::size_t>(n));
      }
    }
  }

  std::vector<int> ranks_;  // the world rank of each local task
  pmi::Server server_;
  int size_;
  std::vector<int> fds_;  // the shell's end of each task's socket; -1 once closed
};

// --mpi pmi1,pmix: each task is offered both PMI-1 (PMI_FD) and PMIx, and
// its MPI uses the one it speaks (MPICH and its kin PMI-1 or PMI-2, Open MPI
// PMIx). Each server judges its own clients, so a task that used either
// and did not finish breaks the world; the fences come from the server in
// use and their outcomes go back to it.
class BothWorlds final : public MpiWorld {
 public:
  BothWorlds(std::shared_ptr<WorldChannel> channel, std::unique_ptr<MpiWorld> pmi1,
             std::unique_ptr<MpiWorld> pmix)
      : MpiWorld(std::move(channel)), pmi1_(std::move(pmi1)), pmix_(std::move(pmix)) {}

  bool add(std::size_t local, TaskStdio& stdio, std::string& error) override {
    return pmi1_->add(local, stdio, error) && pmix_->add(local, stdio, error);
  }
  void poll_fds(std::vector<pollfd>& fds) const override {
    const std::size_t first = fds.size();
    pmi1_->poll_fds(fds);
    pmi1_fds_ = fds.size() - first;
    pmix_->poll_fds(fds);
  }
  void on_readable(std::size_t i) override {
    if (i < pmi1_fds_) {
      pmi1_->on_readable(i);
    } else {
      pmix_->on_readable(i - pmi1_fds_);
    }
  }
  bool task_ended(std::size_t local) override {
    const bool pmi1_broken = pmi1_->task_ended(local);
    return pmix_->task_ended(local) || pmi1_broken;
  }
  bool in_use() const override { return pmi1_->in_use() || pmix_->in_use(); }
  std::optional<std::size_t> broken_by() const override {
    const auto by = pmi1_->broken_by();
    return by ? by : pmix_->broken_by();
  }
  std::optional<pmi::Server::Abort> abort() const override {
    const auto a = pmi1_->abort();
    return a ? a : pmix_->abort();
  }
  void on_modex_frame(ModexFrame frame) override { pmix_->on_modex_frame(std::move(frame)); }
  bool drop_unused_pmix() override { return pmix_->drop_unused_pmix(); }
  std::string key_space_refusal() const override {
    for (const std::string& why :
         {MpiWorld::key_space_refusal(), pmi1_->key_space_refusal(), pmix_->key_space_refusal()}) {
      if (!why.empty()) return why;
    }
    return "";
  }

 protected:
  void fence_done(std::uint32_t seq, std::string data) override {
    (pmix_->in_use() ? pmix_ : pmi1_)->fence_done(seq, std::move(data));
  }
  void fence_failed(const std::string& why) override {
    pmi1_->fence_failed(why);
    pmix_->fence_failed(why);
  }

 private:
  std::unique_ptr<MpiWorld> pmi1_, pmix_;
  mutable std::size_t pmi1_fds_ = 0;  // how many of poll_fds' descriptors are PMI-1's
};

// The forwarding tasks' standard streams (hpcq run): the read ends of their
// stdout and stderr pipes, sent to the executor in frames on kOutputFd; and
// task 0's standard input, a pipe or (--pty) a terminal, fed from the input
// frames that come back on the same socket.
//
// Each pipe is read only as far as its stream's credit goes (output_credit.h:
// kInitialOutputCredit, then what the credit frames on the channel add), so
// that a task whose output nobody takes waits on its write, while the other
// tasks' streams, input and PMI go on. A container's shell shares the
// channel with its node's other containers' (start_worker) and cannot tell
// whose a credit frame is: it reads on without credit, as does a shell whose
// channel has gone (the output has nowhere to go then).
class TaskIo {
 public:
  // Makes task `rank`'s pipes (task 0 with `pty`: a terminal for all three
  // streams); fills `stdio` with the task's ends.
  bool add(int rank, bool pty, TaskStdio& stdio, std::string& error) {
    if (pty && rank == 0) {
      int master = -1, slave = -1;
      if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) {
        error = "openpty: " + errno_text(errno);
        return false;
      }
      fcntl(master, F_SETFD, FD_CLOEXEC);
      fcntl(slave, F_SETFD, FD_CLOEXEC);
      fcntl(master, F_SETFL, O_NONBLOCK);
      pipes_.push_back({master, rank, false, initial_credit()});
      input_ = dup(master);  // closed apart from the reading end: EIO there ends output
      fcntl(input_, F_SETFD, FD_CLOEXEC);
      pty_ = true;
      stdio.in = stdio.out = stdio.err = slave;
      stdio.pty = true;
      return true;
    }
    for (bool is_stderr : {false, true}) {
      int p[2];
      if (pipe2(p, O_CLOEXEC) != 0) {
        error = "pipe: " + errno_text(errno);
        return false;
      }
      fcntl(p[0], F_SETFL, O_NONBLOCK);
      pipes_.push_back({p[0], rank, is_stderr, initial_credit()});
      (is_stderr ? stdio.err : stdio.out) = p[1];
    }
    if (rank == 0) {
      int p[2];
      if (pipe2(p, O_CLOEXEC) != 0) {
        error = "pipe: " + errno_text(errno);
        return false;
      }
      fcntl(p[1], F_SETFL, O_NONBLOCK);
      input_ = p[1];
      stdio.in = p[0];
    }
    return true;
  }
  bool empty() const { return pipes_.empty(); }
  // The PMI sockets to serve in the same loop, and whose fences' outcomes
  // come on the channel.
  void serve_pmi(MpiWorld* pmi) { pmi_ = pmi; }

  // Waits for a signal in `wait_set` (blocked; taken through `signal_fd`),
  // forwarding output and input and serving PMI meanwhile. Returns the signal.
  int next_signal(int signal_fd) {
    for (;;) {
      std::vector<pollfd> fds{{signal_fd, POLLIN, 0}};
      const bool take_input = input_ >= 0 && !input_eof_;
      const bool read_channel =
          (take_input || (pmi_ && pmi_->channel_open()) || flow_controlled()) && !channel_closed_ &&
          !channel_broken_;
      fds.push_back({read_channel ? kOutputFd : -1, POLLIN, 0});
      fds.push_back({input_ >= 0 && !pending_.empty() ? input_ : -1, POLLOUT, 0});
      const std::size_t first_pipe = fds.size();
      for (const Pipe& p : pipes_) fds.push_back({has_credit(p) ? p.fd : -1, POLLIN, 0});
      const std::size_t first_pmi = fds.size();
      if (pmi_) pmi_->poll_fds(fds);
      if (poll(fds.data(), fds.size(), pmi_ ? pmi_->ms_to_spawn_grace_end() : -1) < 0) {
        continue;  // EINTR
      }
      if (pmi_) pmi_->end_world_after_spawn_grace();
      for (std::size_t i = first_pmi; i < fds.size(); ++i) {
        if (fds[i].revents != 0) pmi_->on_readable(i - first_pmi);
      }
      for (std::size_t i = first_pmi; i-- > first_pipe;) {
        if (fds[i].revents != 0) forward(i - first_pipe);
      }
      if (fds[1].revents != 0) take_frame();
      if (fds[2].revents != 0 || !pending_.empty() || input_eof_) feed_input();
      if (fds[0].revents & POLLIN) {
        signalfd_siginfo info{};
        if (read(signal_fd, &info, sizeof info) == sizeof info) {
          return static_cast<int>(info.ssi_signo);
        }
      }
    }
  }

  // Once every task has ended: what is left in the pipes (a process the
  // tasks left behind may still hold one open: not waited for), as credit
  // comes for it.
  void drain() {
    for (;;) {
      for (size_t i = pipes_.size(); i-- > 0;) forward(i);
      if (!waits_for_credit()) break;
      pollfd channel{kOutputFd, POLLIN, 0};
      if (poll(&channel, 1, -1) > 0) take_frame();
    }
    for (const Pipe& p : pipes_) close(p.fd);
    pipes_.clear();
    if (input_ >= 0) close(input_);
    input_ = -1;
  }

 private:
  struct Pipe {
    int fd;
    int rank;
    bool is_stderr;
    std::uint64_t credit;  // bytes it may still send
  };
  static std::uint64_t initial_credit() {
#ifdef HPCQ_CONTAINER_SHELL
    return UINT64_MAX;
#else
    return kInitialOutputCredit;
#endif
  }
  // Whether credit holds the pipes back: not once the channel has gone.
  bool flow_controlled() const {
    return initial_credit() != UINT64_MAX && !channel_broken_ && !channel_closed_ &&
           !pipes_.empty();
  }
  bool has_credit(const Pipe& p) const { return p.credit > 0 || !flow_controlled(); }
  // Whether a pipe without credit has output waiting.
  bool waits_for_credit() const {
    if (!flow_controlled()) return false;
    for (const Pipe& p : pipes_) {
      pollfd readable{p.fd, POLLIN, 0};
      if (p.credit == 0 && poll(&readable, 1, 0) > 0 && (readable.revents & POLLIN)) return true;
    }
    return false;
  }
  // A credit frame: more for the stream of a task of this shell.
  void add_credit(const CreditFrame& credit) {
    for (Pipe& p : pipes_) {
      if (p.rank != credit.rank || p.is_stderr != credit.is_stderr) continue;
      p.credit = p.credit > UINT64_MAX - credit.bytes ? UINT64_MAX : p.credit + credit.bytes;
    }
  }
  // Reads pipe `i` until it would block or its credit is spent, sending
  // each chunk; closes it at EOF (a terminal: EIO once its last user has
  // gone).
  void forward(size_t i) {
    static char buf[kOutputFrameData];
    for (;;) {
      Pipe& pipe = pipes_[i];
      if (!has_credit(pipe)) return;
      const std::size_t want =
          flow_controlled() ? std::min<std::uint64_t>(sizeof buf, pipe.credit) : sizeof buf;
      const ssize_t n = read(pipe.fd, buf, want);
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) {
        if (flow_controlled()) pipe.credit -= static_cast<std::uint64_t>(n);
        send_frame(pipe, std::string_view(buf, static_cast<size_t>(n)));
        continue;
      }
      if (n == 0 || errno != EAGAIN) {
        close(pipes_[i].fd);
        pipes_.erase(pipes_.begin() + static_cast<std::ptrdiff_t>(i));
      }
      return;
    }
  }
  void send_frame(const Pipe& p, std::string_view data) {
    // Blocks while the agent is behind: the tasks then wait on their pipes.
    // Once the agent has gone (restarted), the output has nowhere to go: it
    // is read on, so that the tasks do not block.
    send_on_channel(encode_output_frame(p.rank, p.is_stderr, data), channel_broken_);
  }
  // An input frame from the executor: task 0's stdin, its end, its
  // terminal's size.
  void take_frame() {
    static char buf[kOutputFrameData + 64];
    const ssize_t n = recv(kOutputFd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {  // the agent is gone: task 0's input has ended, no fence completes
      channel_closed_ = input_eof_ = true;
      if (pmi_) pmi_->channel_lost();
      return;
    }
    if (auto credit = decode_credit_frame(std::string_view(buf, static_cast<size_t>(n)))) {
      add_credit(*credit);
      return;
    }
    auto frame = decode_input_frame(std::string_view(buf, static_cast<size_t>(n)));
    if (!frame.is_ok()) {
      fprintf(stderr, "hpcq-job-shell: %s\n", frame.status().message().c_str());
      return;
    }
    if (frame->fence) {
      if (pmi_) pmi_->on_fence_frame(*frame->fence);
      return;
    }
    if (frame->modex) {
      if (pmi_) pmi_->on_modex_frame(std::move(*frame->modex));
      return;
    }
    if (frame->rows > 0 && frame->cols > 0 && pty_) {
      winsize size{};
      size.ws_row = static_cast<unsigned short>(frame->rows);
      size.ws_col = static_cast<unsigned short>(frame->cols);
      ioctl(input_, TIOCSWINSZ, &size);
    }
    pending_ += frame->data;
    if (frame->eof) {
      input_eof_ = true;
      if (pty_) pending_ += '\x04';  // a terminal's end of input: ^D
    }
  }
  // Writes what task 0 has not read yet, as far as it takes it; closes its
  // stdin once the end has come and all is written.
  void feed_input() {
    while (input_ >= 0 && !pending_.empty()) {
      const ssize_t n = write(input_, pending_.data(), pending_.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      if (n < 0) {  // task 0 closed its stdin: nobody reads what comes
        pending_.clear();
        break;
      }
      pending_.erase(0, static_cast<size_t>(n));
    }
    if (input_eof_ && pending_.empty() && input_ >= 0 && !pty_) {
      close(input_);
      input_ = -1;
    }
  }
  std::vector<Pipe> pipes_;
  bool channel_broken_ = false;  // a send failed
  bool channel_closed_ = false;  // the executor closed its end
  MpiWorld* pmi_ = nullptr;
  int input_ = -1;  // task 0's stdin: a pipe's write end, or the terminal
  bool pty_ = false;
  bool input_eof_ = false;
  std::string pending_;  // input task 0 has not taken yet
};

}  // namespace hpcq::agent
