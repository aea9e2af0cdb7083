// hpcq-elastic-app: the sample elastic application (hpcq issue 7).
//
// A Jacobi iteration on a 1-D heat equation whose grid is cut into one block
// per node of the job's current node list; on every resize notice it
// re-reads the list and re-cuts the grid (the rebalancing an elastic MPI or
// Charm++ code does). Each iteration takes serial_ms + step_ms / nodes of
// wall time (the Amdahl-style model bench/ uses), so the job's run time
// depends on how many nodes it held when; --step-ms small is the
// time-compressed mode.
//
// hpcq has no MPI of its own, so the task on the job's first node (the one
// that gets HPCQ_RESIZE_SOCKET) computes every block itself and only models
// the others' time; the tasks on the other nodes stay alive as the nodes'
// workers until a shrink takes their node or the first node's task is done
// (with --out it then creates OUT.JOBID.done, which the workers watch for,
// so that the job ends when its computation does, as an MPI job's ranks
// all return; without --out they wait to be cancelled). Everything below
// uses lib/elastic/hpcq_elastic.h only.
//
// Output (--out, one line each, flushed): "nodes N: a,b,c" for each node
// list it sees (at start and after each resize), "resize KIND N
// acknowledged|declined", "progress I/N", "done iterations N residual R".
//
// Usage: hpcq-elastic-app [--out FILE] [--iterations N] [--step-ms MS]
//        [--serial-ms MS] [--grid N] [--decline-shrinks] [--decline-expands]
//        [--ignore-resizes] [--fast]
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "lib/elastic/hpcq_elastic.h"

namespace {

volatile sig_atomic_t g_resize_signalled = 0;
void on_resize_signal(int) { g_resize_signalled = 1; }

struct Options {
  std::string out;
  long iterations = 600;
  double step_ms = 100;
  double serial_ms = 0;
  long grid = 4096;
  bool decline_shrinks = false;
  bool decline_expands = false;
  bool ignore_resizes = false;  // never answers: the site's resize timeout decides
  int report_every = 50;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "hpcq-elastic-app: %s\nusage: hpcq-elastic-app [--out FILE] [--iterations N] "
               "[--step-ms MS] [--serial-ms MS] [--grid N] [--decline-shrinks] "
               "[--decline-expands] [--ignore-resizes] [--fast]\n",
               why.c_str());
  std::exit(2);
}

double number(const char* option, const char* text, double lo) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v >= lo) || v > 1e9) {
    usage(std::string(option) + ": bad value '" + text + "'");
  }
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage(a + ": missing value");
      return argv[++i];
    };
    if (a == "--out") {
      o.out = value();
    } else if (a == "--iterations") {
      o.iterations = static_cast<long>(number("--iterations", value(), 1));
    } else if (a == "--step-ms") {
      o.step_ms = number("--step-ms", value(), 0);
    } else if (a == "--serial-ms") {
      o.serial_ms = number("--serial-ms", value(), 0);
    } else if (a == "--grid") {
      o.grid = static_cast<long>(number("--grid", value(), 8));
    } else if (a == "--decline-shrinks") {
      o.decline_shrinks = true;
    } else if (a == "--decline-expands") {
      o.decline_expands = true;
    } else if (a == "--ignore-resizes") {
      o.ignore_resizes = true;
    } else if (a == "--fast") {
      o.step_ms = 10;
      o.report_every = 100;
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  return o;
}

class Log {
 public:
  explicit Log(const std::string& path) {
    file_ = path.empty() ? stdout : std::fopen(path.c_str(), "a");
    if (file_ == nullptr) usage("--out: cannot open '" + path + "': " + std::strerror(errno));
  }
  void line(const std::string& text) {
    std::fprintf(file_, "%s\n", text.c_str());
    std::fflush(file_);
  }

 private:
  std::FILE* file_;
};

// Where the first node's task says it is done (see the file comment).
std::string done_marker(const Options& o) {
  const char* job = std::getenv("HPCQ_JOB_ID");
  if (o.out.empty() || job == nullptr) return "";
  return o.out + "." + job + ".done";
}

std::string joined(const std::vector<std::string>& nodes) {
  std::string s;
  for (const auto& n : nodes) s += (s.empty() ? "" : ",") + n;
  return s;
}

// One Jacobi sweep over the grid, block by block (one block per node).
double sweep(std::vector<double>& u, std::vector<double>& next, std::size_t blocks) {
  const std::size_t n = u.size();
  const std::size_t per = (n - 2 + blocks - 1) / blocks;
  double residual = 0;
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t lo = 1 + b * per;
    const std::size_t hi = std::min(n - 1, lo + per);
    for (std::size_t i = lo; i < hi; ++i) {
      next[i] = 0.5 * (u[i - 1] + u[i + 1]);
      residual = std::max(residual, std::fabs(next[i] - u[i]));
    }
  }
  std::swap(u, next);
  return residual;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  struct sigaction sa {};
  sa.sa_handler = on_resize_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGUSR1, SIGUSR2, SIGHUP}) sigaction(sig, &sa, nullptr);

  // The computing task: the one on the job's first node, which has the
  // resize socket when the job is elastic; task 0 of a rigid or moldable
  // job (no socket) computes too, without resizes.
  hpcq::elastic::Channel channel;
  std::string error;
  const char* rank = std::getenv("HPCQ_TASK_RANK");
  const bool first_task = rank != nullptr && std::string(rank) == "0";
  if (!channel.open(&error) && !first_task) {
    // Not the first node: a worker that holds its node until the first
    // node's task is done or a shrink takes it away.
    const std::string marker = done_marker(o);
    for (;;) {
      if (!marker.empty() && access(marker.c_str(), F_OK) == 0) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  error.clear();
  Log log(o.out);
  std::vector<std::string> nodes = hpcq::elastic::read_nodelist(hpcq::elastic::nodelist_path());
  if (nodes.empty() && !channel.is_open()) {
    // Not elastic: the job's nodes, fixed for the run, from its hostfile
    // ("NODE slots=N" lines in allocation order; HPCQ_NODELIST is in
    // hostlist form, which this sample does not parse).
    const char* hostfile = std::getenv("HPCQ_HOSTFILE");
    std::ifstream in(hostfile != nullptr ? hostfile : "");
    for (std::string line; std::getline(in, line);) {
      const std::string node = line.substr(0, line.find(' '));
      if (!node.empty() && std::find(nodes.begin(), nodes.end(), node) == nodes.end()) {
        nodes.push_back(node);
      }
    }
  }
  if (nodes.empty()) {
    std::fprintf(stderr, "hpcq-elastic-app: no node list in HPCQ_NODELIST_FILE\n");
    return 1;
  }
  log.line("nodes " + std::to_string(nodes.size()) + ": " + joined(nodes));

  std::vector<double> u(static_cast<std::size_t>(o.grid), 0.0), next = u;
  u.front() = next.front() = 1.0;  // a hot wall at one end
  double residual = 0;
  for (long it = 1; it <= o.iterations; ++it) {
    hpcq::elastic::Notice notice;
    if (channel.is_open() && channel.wait(0, &notice, &error)) {
      const bool shrink = notice.kind == hpcq::elastic::Notice::Kind::kShrink;
      const std::string kind = shrink ? "shrink" : "expand";
      if (o.ignore_resizes) {
        log.line("resize " + kind + " " + std::to_string(notice.nodes) + " ignored");
      } else if ((shrink && o.decline_shrinks) || (!shrink && o.decline_expands)) {
        if (!channel.decline(&error)) log.line("answer lost: " + error);
        log.line("resize " + kind + " " + std::to_string(notice.nodes) + " declined");
      } else {
        // Rebalanced before answering: after an acknowledged shrink the
        // nodes that go are killed, so their blocks must have moved.
        std::vector<std::string> now = hpcq::elastic::read_nodelist(notice.nodelist);
        if (!now.empty()) nodes = std::move(now);
        if (!channel.ack(&error)) log.line("answer lost: " + error);
        log.line("resize " + kind + " " + std::to_string(notice.nodes) + " acknowledged");
        log.line("nodes " + std::to_string(nodes.size()) + ": " + joined(nodes));
      }
      g_resize_signalled = 0;
    } else if (!error.empty()) {
      log.line("resize channel closed: " + error);
      error.clear();
    }
    residual = sweep(u, next, nodes.size());
    const double ms = o.serial_ms + o.step_ms / static_cast<double>(nodes.size());
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long>(ms * 1000)));
    if (it % o.report_every == 0) {
      log.line("progress " + std::to_string(it) + "/" + std::to_string(o.iterations));
    }
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", residual);
  log.line("done iterations " + std::to_string(o.iterations) + " residual " + buf);
  const std::string marker = done_marker(o);
  if (!marker.empty()) {
    if (std::FILE* f = std::fopen(marker.c_str(), "w")) std::fclose(f);
  }
  return 0;
}
