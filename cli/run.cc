#include "cli/run.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "cli/client.h"

namespace hpcq::cli {
namespace {

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

// Ctrl-C: SIGINT to a running job's tasks (cancel a pending one); a second
// within a second cancels the job. Runs until the process exits.
void take_interrupts(const std::string& socket, JobId id) {
  auto stub = connect(socket);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  std::optional<std::chrono::steady_clock::time_point> last;
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    const auto now = std::chrono::steady_clock::now();
    const bool twice = last && now - *last < std::chrono::seconds(1);
    last = now;
    Status s;
    if (!twice) {
      v1::SignalRequest request;
      request.set_id(id);
      request.set_signal(SIGINT);
      v1::SignalResponse response;
      grpc::ClientContext ctx;
      s = from_grpc(stub->Signal(&ctx, request, &response), socket);
      if (s.is_ok()) {
        std::fprintf(stderr, "hpcq: sent SIGINT to job %llu (Ctrl-C again within 1 s cancels it)\n",
                     static_cast<unsigned long long>(id));
        continue;
      }
      if (s.code() != Code::kFailedPrecondition) {  // pending: cancelled below
        std::fprintf(stderr, "hpcq: %s\n", s.message().c_str());
        continue;
      }
    }
    v1::CancelRequest request;
    request.set_id(id);
    v1::CancelResponse response;
    grpc::ClientContext ctx;
    s = from_grpc(stub->Cancel(&ctx, request, &response), socket);
    std::fprintf(
        stderr, "hpcq: %s\n",
        s.is_ok() ? ("cancelling job " + std::to_string(id)).c_str() : s.message().c_str());
  }
}

}  // namespace

void block_interrupts() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int follow_job(v1::Hpcq::Stub& stub, const std::string& socket, JobId id,
               const FollowOptions& options) {
  if (options.interrupts) std::thread(take_interrupts, socket, id).detach();
  v1::WatchOutputRequest request;
  request.set_id(id);
  request.set_from_start(options.from_start);
  grpc::ClientContext ctx;
  auto reader = stub.WatchOutput(&ctx, request);
  v1::OutputChunk chunk;
  Labeller labeller;
  while (reader->Read(&chunk)) {
    if (chunk.dropped_bytes() > 0) {
      std::fprintf(stderr, "hpcq: %llu bytes of job %llu's output are no longer held by hpcqd\n",
                   static_cast<unsigned long long>(chunk.dropped_bytes()),
                   static_cast<unsigned long long>(id));
    }
    const bool is_stderr = chunk.stream() == v1::OutputChunk::STDERR;
    const int fd = is_stderr ? 2 : 1;
    if (options.label) {
      write_all(fd, labeller.label(static_cast<int>(chunk.rank()), is_stderr, chunk.data()));
    } else {
      write_all(fd, chunk.data());
    }
  }
  Status s = from_grpc(reader->Finish(), socket);
  if (!s.is_ok()) {
    std::fprintf(stderr, "hpcq: %s\n", s.message().c_str());
    return exit_code_of(s);
  }
  v1::GetJobRequest get;
  get.set_id(id);
  v1::Job job;
  grpc::ClientContext get_ctx;
  s = from_grpc(stub.GetJob(&get_ctx, get, &job), socket);
  if (!s.is_ok()) {
    std::fprintf(stderr, "hpcq: %s\n", s.message().c_str());
    return exit_code_of(s);
  }
  if (job.state() == v1::COMPLETED) return 0;
  std::fprintf(stderr, "hpcq: job %llu %s%s%s\n", static_cast<unsigned long long>(id),
               v1::JobState_Name(job.state()).c_str(), job.reason().empty() ? "" : ": ",
               job.reason().c_str());
  return job.exit_code() > 0 ? job.exit_code() : 1;
}

}  // namespace hpcq::cli
