#include "cli/run.h"

#include <errno.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "cli/client.h"
#include "lib/api/job_proto.h"
#include "lib/api/output_order.h"
#include "lib/core/hostlist.h"

extern char** environ;

namespace hpcq::cli {
namespace {

// How long hpcq run and attach wait for a restarting hpcqd.
constexpr auto kReconnectFor = std::chrono::minutes(5);

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed pipe: the output has nowhere to go
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

// --label: "RANK: " before every line, with each task's stream's partial
// last line remembered so that a line split over two chunks is labelled once.
class Labeller {
 public:
  std::string label(int rank, bool is_stderr, std::string_view data) {
    bool& at_start = at_line_start_.try_emplace({rank, is_stderr}, true).first->second;
    const std::string prefix = std::to_string(rank) + ": ";
    std::string out;
    out.reserve(data.size() + prefix.size());
    for (char c : data) {
      if (at_start) out += prefix;
      out += c;
      at_start = c == '\n';
    }
    return out;
  }

 private:
  std::map<std::pair<int, bool>, bool> at_line_start_;
};

// The SIGTERM or SIGHUP that made hpcq run cancel its job or step (0: none):
// then its exit status is 128 + it, as a shell's for a command it ended.
std::atomic<int> cancelled_by_signal{0};

// Ctrl-C: SIGINT to a running job's tasks (cancel a pending one); a second
// within a second cancels the job. SIGTERM and SIGHUP (timeout(1), a closed
// terminal) cancel it at once, as srun kills its step: the job must not
// outlive the command that holds its output. Runs until the process exits.
void take_interrupts(const std::string& socket, JobId id, std::uint32_t step) {
  const std::string what =
      "job " + std::to_string(id) + (step ? " step " + std::to_string(step) : "");
  Client client(socket);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  std::optional<std::chrono::steady_clock::time_point> last;
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig == SIGTERM || sig == SIGHUP) {
      cancelled_by_signal = sig;
      v1::CancelRequest request;
      request.set_id(id);
      request.set_step(step);
      v1::CancelResponse response;
      const Status s = client.call("Cancel", request, &response);
      if (s.is_ok() || s.code() == Code::kFailedPrecondition) {  // or it has ended already
        std::fprintf(stderr, "%sSIG%s: cancelling %s\n", note_prefix(), sigabbrev_np(sig),
                     what.c_str());
        continue;  // its end, and the rest of its output, come as usual
      }
      // Nothing more will end it from here: do not hang on.
      std::fprintf(stderr, "%sSIG%s: cancelling %s: %s\n", note_prefix(), sigabbrev_np(sig),
                   what.c_str(), s.message().c_str());
      std::_Exit(128 + sig);
    }
    const auto now = std::chrono::steady_clock::now();
    const bool twice = last && now - *last < std::chrono::seconds(1);
    last = now;
    Status s;
    if (!twice) {
      v1::SignalRequest request;
      request.set_id(id);
      request.set_signal(SIGINT);
      request.set_step(step);
      v1::SignalResponse response;
      s = client.call("Signal", request, &response);
      if (s.is_ok()) {
        std::fprintf(stderr, "%ssent SIGINT to %s (Ctrl-C again within 1 s cancels it)\n",
                     note_prefix(), what.c_str());
        continue;
      }
      if (s.code() != Code::kFailedPrecondition) {  // pending: cancelled below
        std::fprintf(stderr, "%s%s\n", note_prefix(), s.message().c_str());
        continue;
      }
    }
    v1::CancelRequest request;
    request.set_id(id);
    request.set_step(step);
    v1::CancelResponse response;
    s = client.call("Cancel", request, &response);
    std::fprintf(stderr, "%s%s\n", note_prefix(),
                 s.is_ok() ? ("cancelling " + what).c_str() : s.message().c_str());
  }
}

// Sends one InputRequest, asking again while the job or step has not
// started on task 0's node (or hpcqd restarts), less often the longer it
// waits; false once it cannot go (the job ended). The process ends with the
// job, and this thread with it.
bool send_input(const Client& client, const v1::InputRequest& request) {
  auto pause = std::chrono::milliseconds(20);
  for (;;) {
    v1::InputResponse response;
    const Status s = client.call("SendInput", request, &response);
    if (s.is_ok()) return true;
    if (s.code() != Code::kUnavailable) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(250));
  }
}

bool terminal_size(v1::InputRequest& request) {
  winsize size{};
  if (ioctl(0, TIOCGWINSZ, &size) != 0 || size.ws_row == 0 || size.ws_col == 0) return false;
  request.set_rows(size.ws_row);
  request.set_cols(size.ws_col);
  return true;
}

// Our standard input to task 0, then its end.
void forward_input(const std::string& socket, JobId id, std::uint32_t step, bool pty) {
  Client client(socket);
  v1::InputRequest request;
  request.set_id(id);
  request.set_step(step);
  // A terminal whose foreground we are not (hpcq run &) is not ours to read.
  const bool ours = !isatty(0) || tcgetpgrp(0) == getpgrp();
  if (pty && ours && terminal_size(request) && !send_input(client, request)) return;
  request.clear_rows();
  request.clear_cols();
  char buf[16384];
  for (;;) {
    const ssize_t n = ours ? read(0, buf, sizeof buf) : 0;
    if (n < 0 && errno == EINTR) continue;
    request.set_data(n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string());
    request.set_eof(n <= 0);
    if (!send_input(client, request) || n <= 0) return;
  }
}

// --pty: our terminal's new size (SIGWINCH) to task 0's.
void follow_window(const std::string& socket, JobId id, std::uint32_t step) {
  Client client(socket);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGWINCH);
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    v1::InputRequest request;
    request.set_id(id);
    request.set_step(step);
    if (terminal_size(request)) (void)send_input(client, request);
  }
}

// Our terminal in raw mode while task 0's is the one that interprets keys;
// restored when it goes out of scope.
class RawTerminal {
 public:
  explicit RawTerminal(bool wanted) {
    if (!wanted || !isatty(0) || tcgetattr(0, &saved_) != 0) return;
    termios raw = saved_;
    cfmakeraw(&raw);
    raw_ = tcsetattr(0, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (raw_) tcsetattr(0, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  termios saved_{};
  bool raw_ = false;
};

}  // namespace

void block_interrupts() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGWINCH);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

static int follow_to_end(const Client& client, JobId id, const FollowOptions& options) {
  const std::string& socket = client.socket();
  if (options.interrupts) std::thread(take_interrupts, socket, id, options.step).detach();
  if (options.input) std::thread(forward_input, socket, id, options.step, options.pty).detach();
  if (options.pty) std::thread(follow_window, socket, id, options.step).detach();
  std::optional<RawTerminal> raw;
  raw.emplace(options.pty);
  v1::WatchOutputRequest request;
  request.set_id(id);
  request.set_step(options.step);
  request.set_from_start(options.from_start);
  Labeller labeller;
  // Each task stream once and in order: the agents send again what the
  // overlay may have lost, and a reconnect reads from the start.
  api::OutputOrder order(std::chrono::seconds(1));
  // Output lost on the way (a node or hpcqd lost with what it held): said
  // where, and the exit status is not 0 even if the job completed.
  bool output_lost = false;
  auto print = [&](const std::vector<api::OutputOrder::Piece>& pieces) {
    for (const api::OutputOrder::Piece& piece : pieces) {
      if (piece.lost_before > 0) {
        output_lost = true;
        std::fprintf(stderr, "%sbytes %llu-%llu of task %d's %s were lost\n", note_prefix(),
                     static_cast<unsigned long long>(piece.offset - piece.lost_before),
                     static_cast<unsigned long long>(piece.offset - 1), piece.rank,
                     piece.is_stderr ? "stderr" : "stdout");
      }
      const int fd = piece.is_stderr ? 2 : 1;
      if (options.label) {
        write_all(fd, labeller.label(piece.rank, piece.is_stderr, piece.data));
      } else {
        write_all(fd, piece.data);
      }
    }
  };
  // hpcqd restarting (an upgrade, a crash) does not end the tasks: wait for
  // it, then go on with what the new one holds (the agents send it what
  // they kept, the last 64 KiB of each task stream).
  bool lost = false;
  std::chrono::steady_clock::time_point lost_at{};
  for (;;) {
    Stream reader(client, "WatchOutput", request);
    v1::OutputChunk chunk;
    while (reader.read(&chunk)) {
      lost = false;
      if (chunk.dropped_bytes() > 0) {
        output_lost = true;
        std::fprintf(stderr, "%s%llu bytes of job %llu's output are no longer held by hpcqd\n",
                     note_prefix(), static_cast<unsigned long long>(chunk.dropped_bytes()),
                     static_cast<unsigned long long>(id));
      }
      const auto now = std::chrono::steady_clock::now();
      print(order.add(chunk.attempt(), static_cast<int>(chunk.rank()),
                      chunk.stream() == v1::OutputChunk::STDERR, chunk.stream_offset(),
                      std::move(*chunk.mutable_data()), now));
      print(order.give_up(now));
    }
    Status s = reader.finish();
    if (s.is_ok()) {
      print(order.give_up(std::chrono::steady_clock::now(), /*all=*/true));
      raw.reset();  // before anything more is printed
      break;
    }
    const auto now = std::chrono::steady_clock::now();
    if (s.code() == Code::kUnavailable && (!lost || now - lost_at < kReconnectFor)) {
      if (!lost) {
        std::fprintf(stderr, "%s%s; waiting for it\n", note_prefix(), s.message().c_str());
        lost = true;
        lost_at = now;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      request.set_from_start(true);
      continue;
    }
    std::fprintf(stderr, "%s%s\n", note_prefix(), s.message().c_str());
    return exit_code_of(s);
  }
  v1::GetJobRequest get;
  get.set_id(id);
  v1::Job job;
  Status s = client.call("GetJob", get, &job);
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s%s\n", note_prefix(), s.message().c_str());
    return exit_code_of(s);
  }
  std::string what = "job " + std::to_string(id);
  v1::JobState state = job.state();
  int exit_code = job.exit_code();
  std::string reason = job.reason();
  if (options.step != 0) {
    if (static_cast<int>(options.step) > job.steps_size()) {
      std::fprintf(stderr, "%sjob %llu has no step %u\n", note_prefix(),
                   static_cast<unsigned long long>(id), options.step);
      return 1;
    }
    const v1::Step& step = job.steps(static_cast<int>(options.step) - 1);
    what += " step " + std::to_string(options.step);
    state = step.state();
    exit_code = step.exit_code();
    reason = step.reason();
  }
  if (state == v1::COMPLETED && !output_lost) return 0;
  if (state == v1::COMPLETED) {
    std::fprintf(stderr, "%s%s COMPLETED, but not all of its output came (said above)\n",
                 note_prefix(), what.c_str());
    return 1;
  }
  std::fprintf(stderr, "%s%s %s%s%s\n", note_prefix(), what.c_str(),
               v1::JobState_Name(state).c_str(), reason.empty() ? "" : ": ", reason.c_str());
  return exit_code > 0 ? exit_code : 1;
}

int follow_job(const Client& client, JobId id, const FollowOptions& options) {
  const int code = follow_to_end(client, id, options);
  const int sig = cancelled_by_signal.load();
  return sig != 0 ? 128 + sig : code;
}

int run_step(const Client& client, JobId job, const job::SubmitOptions& options, bool quiet) {
  if (!options.spec.constraint.empty()) {
    std::fprintf(stderr,
                 "hpcq: -C/--constraint: a step runs on its job's nodes (-w and -x choose among "
                 "them)\n");
    return 2;
  }
  if (!options.spec.request.gres.empty()) {
    std::fprintf(stderr, "%s--gres: a step uses its job's generic resources\n", note_prefix());
    return 2;
  }
  v1::LaunchStepRequest request;
  request.set_id(job);
  v1::StepSpec& spec = *request.mutable_spec();
  spec.set_pty(options.pty);
  spec.set_mpi(options.spec.mpi);
  for (const std::string& a : options.spec.argv) spec.add_argv(a);
  for (const auto& [k, v] : options.spec.env.vars()) (*spec.mutable_env())[k] = v;
  spec.set_cwd(options.spec.cwd);
  spec.set_nodes(options.step.nodes);
  spec.set_ntasks(options.step.ntasks);
  spec.set_cpus_per_task(options.step.cpus_per_task);
  spec.set_overlap(options.step.overlap);
  for (const std::string& node : options.spec.nodelist) spec.add_nodelist(node);
  for (const std::string& node : options.spec.exclude) spec.add_exclude(node);
  spec.set_whole(options.step.whole);
  spec.set_immediate(options.immediate);
  v1::Step step;
  Status s = client.call("LaunchStep", request, &step);
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s%s\n", note_prefix(), s.message().c_str());
    return exit_code_of(s);
  }
  if (step.state() == v1::PENDING && !quiet) {
    std::fprintf(stderr, "%sstep %llu.%u waits for cores held by the job's other steps\n",
                 note_prefix(), static_cast<unsigned long long>(job), step.id());
  }
  FollowOptions follow;
  follow.step = step.id();
  follow.label = options.label;
  follow.interrupts = true;
  follow.input = true;
  follow.pty = options.pty;
  return follow_job(client, job, follow);
}

namespace {

// Blocks until job `id` leaves PENDING; its state then (a terminal one if it
// never started).
Result<v1::JobState> wait_until_started(const Client& client, JobId id) {
  v1::WatchJobsRequest watch;
  watch.set_id(id);
  Stream reader(client, "WatchJobs", watch);
  v1::JobEvent event;
  v1::JobState state = v1::PENDING;
  while (state == v1::PENDING && reader.read(&event)) state = event.state();
  Status finished = reader.finish();
  if (state == v1::PENDING) {
    return finished.is_ok() ? unavailable("job " + std::to_string(id) + " is gone") : finished;
  }
  return state;
}

// The job's environment for the command hpcq alloc runs where the caller is.
std::vector<std::string> alloc_environment(const v1::Job& job) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  const std::string nodes =
      compress_hostlist(std::vector<std::string>(job.nodes().begin(), job.nodes().end()));
  env["HPCQ_JOB_ID"] = std::to_string(job.id());
  env["HPCQ_JOB_NAME"] = job.name();
  env["HPCQ_NODELIST"] = nodes;
  env["HPCQ_NNODES"] = std::to_string(job.nodes_size());
  env["HPCQ_NTASKS"] = std::to_string(job.spec().ntasks());
  env["HPCQ_CPUS_PER_TASK"] = std::to_string(job.spec().cpus_per_task());
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

// hpcq alloc gives its allocation back once: for the command's end
// (EndAllocation, with its status) or for a signal (Cancel), whichever
// comes first; the other then leaves it alone.
std::atomic<bool> allocation_given_back{false};

// Held while the command is forked, so that a signal that comes between the
// fork and its pid being known is taken as one for the command.
std::mutex command_forking;

// The signals hpcq alloc answers; blocked in every thread, taken by
// give_up_on_signals.
sigset_t alloc_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGQUIT, SIGHUP, SIGTERM}) sigaddset(&set, sig);
  return set;
}

// As salloc: while the job waits, SIGINT (Ctrl-C), SIGQUIT, SIGHUP and
// SIGTERM give it up; once its command runs, SIGINT and SIGQUIT are the
// command's (its terminal's), and SIGHUP or SIGTERM go on to the command
// and give the allocation up. Either way the job is cancelled, even when
// the signal comes before its start is seen, and hpcq alloc exits 128 + the
// signal. Runs until the process exits.
void give_up_on_signals(const std::string& socket, JobId id, const std::atomic<pid_t>* command) {
  Client client(socket);
  const sigset_t set = alloc_signals();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    pid_t child = 0;
    {
      std::lock_guard<std::mutex> forked(command_forking);
      child = command->load();
    }
    if (child > 0 && (sig == SIGINT || sig == SIGQUIT)) continue;
    if (allocation_given_back.exchange(true)) continue;  // the command's end gives it back
    if (child > 0) kill(child, sig);
    v1::CancelRequest request;
    request.set_id(id);
    v1::CancelResponse response;
    const Status s = client.call("Cancel", request, &response);
    if (s.is_ok()) {
      std::fprintf(stderr, "%sSIG%s: job %llu cancelled\n", note_prefix(), sigabbrev_np(sig),
                   static_cast<unsigned long long>(id));
    } else {
      std::fprintf(stderr, "%sSIG%s: %s\n", note_prefix(), sigabbrev_np(sig), s.message().c_str());
    }
    std::_Exit(128 + sig);
  }
}

// The command's end (`status` as waitpid gives it) ends the job: COMPLETED
// when it exited 0, else FAILED with its code (128+N for signal N).
void end_allocation(const Client& client, JobId id, int code) {
  v1::EndAllocationRequest request;
  request.set_id(id);
  request.set_exit_code(code);
  v1::EndAllocationResponse response;
  const Status s = client.call("EndAllocation", request, &response);
  if (s.is_ok()) {
    std::fprintf(stderr, "%sjob %llu: allocation released\n", note_prefix(),
                 static_cast<unsigned long long>(id));
  } else if (s.code() != Code::kFailedPrecondition) {  // else it ended first (said when it did)
    std::fprintf(stderr, "%s%s\n", note_prefix(), s.message().c_str());
  }
}

}  // namespace

int alloc_job(const Client& client, const job::SubmitOptions& options) {
  // Before any thread exists, so that every one inherits the mask and only
  // give_up_on_signals takes them.
  const sigset_t signals = alloc_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  v1::SubmitRequest request;
  *request.mutable_spec() = api::to_proto(options.spec);
  v1::SubmitResponse response;
  Status s = client.submit(request, &response);
  if (!s.is_ok()) return fail(s);
  const JobId id = response.id();
  std::fprintf(stderr, "%sjob %llu waits for its allocation\n", note_prefix(),
               static_cast<unsigned long long>(id));
  // Not freed: the thread that reads it lives until the process exits.
  auto* command = new std::atomic<pid_t>(0);
  std::thread(give_up_on_signals, client.socket(), id, command).detach();
  auto started = wait_until_started(client, id);
  if (!started.is_ok()) return fail(started.status());
  v1::GetJobRequest get;
  get.set_id(id);
  v1::Job job;
  s = client.call("GetJob", get, &job);
  if (!s.is_ok()) return fail(s);
  if (*started != v1::RUNNING) {
    // A signal gave the job up (give_up_on_signals): its thread says so and
    // exits 128 + it once its cancel is answered, which may be what ended
    // the wait here.
    while (allocation_given_back.load()) std::this_thread::sleep_for(std::chrono::seconds(1));
    std::fprintf(stderr, "%sjob %llu %s%s%s\n", note_prefix(), static_cast<unsigned long long>(id),
                 v1::JobState_Name(job.state()).c_str(), job.reason().empty() ? "" : ": ",
                 job.reason().c_str());
    return 1;
  }
  std::string nodes;
  for (const std::string& n : job.nodes()) nodes += (nodes.empty() ? "" : ",") + n;
  std::fprintf(stderr, "%sjob %llu has its allocation: %s\n", note_prefix(),
               static_cast<unsigned long long>(id), nodes.c_str());
  std::vector<std::string> env = alloc_environment(job);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.spec.argv;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::unique_lock<std::mutex> fork_lock(command_forking);
  const pid_t child = fork();
  if (child == 0) {
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, nullptr);
    environ = envp.data();
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "%sexec %s: %s\n", note_prefix(), argv[0], std::strerror(errno));
    _exit(127);
  }
  if (child < 0) return fail(internal_error(std::string("fork: ") + std::strerror(errno)));
  command->store(child);
  fork_lock.unlock();
  // The job's end (time limit, cancel) hangs the command up.
  std::thread([client, id, child] {
    v1::WatchJobsRequest watch;
    watch.set_id(id);
    Stream reader(client, "WatchJobs", watch);
    v1::JobEvent event;
    while (reader.read(&event)) {
      if (event.state() < v1::COMPLETED) continue;
      if (kill(child, 0) == 0 && !allocation_given_back.load()) {
        std::fprintf(stderr, "\nhpcq: job %llu ended (%s%s%s)\n",
                     static_cast<unsigned long long>(id), v1::JobState_Name(event.state()).c_str(),
                     event.reason().empty() ? "" : ": ", event.reason().c_str());
        kill(child, SIGHUP);
      }
      break;
    }
  }).detach();
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (allocation_given_back.exchange(true)) {
    for (;;) pause();  // a signal is giving it back, and then ends this process
  }
  end_allocation(client, id, code);
  return code;
}

}  // namespace hpcq::cli
