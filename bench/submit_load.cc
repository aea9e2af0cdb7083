// hpcq-submit-load: submits N jobs through the gRPC API from C concurrent
// clients, as fast as the daemon acknowledges them. Used by bench/ (submit
// rate) and by the crash test (kill -9 while submissions are in flight: with
// --print-acks it prints "ack ID NAME" for each acknowledged job, flushed
// at once, so that the test knows exactly what was acknowledged).
//
// Output (last line, JSON): jobs, clients, acked, failed, submit_seconds,
// submit_per_second and, with --wait, completed plus seconds/per_second from
// the first submission to the last end.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "proto/hpcq.grpc.pb.h"

int main(int argc, char** argv) {
  CLI::App app{"submit N jobs from C concurrent gRPC clients"};
  std::string socket = getenv("HPCQ_SOCKET") ? getenv("HPCQ_SOCKET") : "/run/hpcq/hpcqd.sock";
  int jobs = 1000;
  int clients = 1;
  std::string command = "true";
  std::string prefix = "load";
  std::string output = "/dev/null";
  bool print_acks = false;
  bool wait = false;
  app.add_option("--socket", socket, "hpcqd socket");
  app.add_option("-n,--jobs", jobs, "jobs to submit")->check(CLI::PositiveNumber);
  app.add_option("-c,--clients", clients, "concurrent clients")->check(CLI::Range(1, 256));
  app.add_option("--command", command, "command each job runs (one word)");
  app.add_option("--prefix", prefix, "job name prefix (names are PREFIX-I)");
  app.add_option("--output", output, "job output file");
  app.add_flag("--print-acks", print_acks, "print 'ack ID NAME' per acknowledged job");
  app.add_flag("--wait", wait,
               "after submitting, wait until every job has ended (end-to-end rate)");
  CLI11_PARSE(app, argc, argv);

  std::mutex ids_mutex;
  std::set<std::uint64_t> ids;  // guarded by ids_mutex
  std::atomic<int> next{0};
  std::atomic<int> acked{0};
  std::atomic<int> failed{0};
  std::mutex print_mutex;
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) return 1;
  // With --wait the ends are followed from before the first submission, so
  // that no event is missed however long the run (the daemon's feed keeps the
  // last 100k events only).
  std::mutex ended_mutex;
  std::map<std::uint64_t, hpcq::v1::JobState> ended;             // guarded by ended_mutex
  std::vector<std::chrono::steady_clock::time_point> end_times;  // guarded by ended_mutex
  bool watch_error = false;
  std::string watch_message;
  grpc::ClientContext watch_ctx;
  std::thread watcher;
  if (wait) {
    watcher = std::thread([&] {
      auto stub = hpcq::v1::Hpcq::NewStub(
          grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
      hpcq::v1::WatchJobsRequest request;
      auto reader = stub->WatchJobs(&watch_ctx, request);
      hpcq::v1::JobEvent event;
      while (reader->Read(&event)) {
        if (event.state() < hpcq::v1::COMPLETED) continue;
        std::lock_guard lock(ended_mutex);
        if (ended.emplace(event.id(), event.state()).second) {
          end_times.push_back(std::chrono::steady_clock::now());
        }
      }
      grpc::Status s = reader->Finish();
      if (!s.ok() && s.error_code() != grpc::StatusCode::CANCELLED) {
        watch_error = true;
        watch_message = s.error_message();
      }
    });
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      auto stub = hpcq::v1::Hpcq::NewStub(
          grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
      while (true) {
        int i = next++;
        if (i >= jobs) return;
        hpcq::v1::SubmitRequest request;
        auto* spec = request.mutable_spec();
        spec->set_name(prefix + "-" + std::to_string(i));
        spec->add_argv(command);
        spec->set_ntasks(1);
        spec->set_cpus_per_task(1);
        spec->set_output(output);
        spec->set_cwd(cwd);
        hpcq::v1::SubmitResponse response;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        grpc::Status s = stub->Submit(&ctx, request, &response);
        if (!s.ok()) {
          ++failed;
          continue;
        }
        ++acked;
        if (wait) {
          std::lock_guard lock(ids_mutex);
          ids.insert(response.id());
        }
        if (print_acks) {
          std::lock_guard lock(print_mutex);
          std::printf("ack %llu %s\n", static_cast<unsigned long long>(response.id()),
                      spec->name().c_str());
          std::fflush(stdout);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  double submit_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int completed = 0;
  double end_p10_s = 0, end_p90_s = 0;
  if (wait) {
    // A first line, so that a driver can act between submission and ends
    // (bench/scale.py resumes drained nodes here).
    std::printf("{\"phase\":\"submitted\",\"acked\":%d,\"submit_seconds\":%.3f}\n", acked.load(),
                submit_seconds);
    std::fflush(stdout);
    // Every acknowledged job ended: stop the watch (the watcher sees CANCELLED).
    while (!watch_error) {
      {
        std::lock_guard lock(ended_mutex);
        std::size_t done = 0;
        for (std::uint64_t id : ids) done += ended.count(id);
        if (done == ids.size()) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    watch_ctx.TryCancel();
    watcher.join();
    if (watch_error) {
      std::fprintf(stderr, "watch failed: %s\n", watch_message.c_str());
      return 1;
    }
    for (std::uint64_t id : ids)
      completed += ended.count(id) && ended.at(id) == hpcq::v1::COMPLETED;
    // When the 10th and 90th percentile of the ends were seen, from the end
    // of submission: the rate between them is the steady one, without the
    // fixed latency of the first start and the last report.
    std::lock_guard lock(ended_mutex);
    std::sort(end_times.begin(), end_times.end());
    if (!end_times.empty()) {
      auto at = [&](double q) {
        const auto i = static_cast<std::size_t>(q * static_cast<double>(end_times.size() - 1));
        return std::chrono::duration<double>(end_times[i] - start).count() - submit_seconds;
      };
      end_p10_s = at(0.1);
      end_p90_s = at(0.9);
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "{\"jobs\":%d,\"clients\":%d,\"acked\":%d,\"failed\":%d,\"submit_seconds\":%.3f,"
      "\"submit_per_second\":%.1f,\"completed\":%d,\"seconds\":%.3f,\"per_second\":%.1f,"
      "\"end_p10_s\":%.3f,\"end_p90_s\":%.3f}\n",
      jobs, clients, acked.load(), failed.load(), submit_seconds, acked.load() / submit_seconds,
      completed, seconds, acked.load() / seconds, end_p10_s, end_p90_s);
  return failed.load() == 0 ? 0 : 1;
}
