// hpcq-submit-load: submits N jobs through the gRPC API from C concurrent
// clients, as fast as the daemon acknowledges them. Used by bench/ (submit
// rate) and by the crash test (kill -9 while submissions are in flight: with
// --print-acks it prints "ack ID NAME" for each acknowledged job, flushed
// at once, so that the test knows exactly what was acknowledged).
//
// Output (last line, JSON): {"jobs":N,"clients":C,"acked":A,"seconds":S,"per_second":R}
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
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
  app.add_option("--socket", socket, "hpcqd socket");
  app.add_option("-n,--jobs", jobs, "jobs to submit")->check(CLI::PositiveNumber);
  app.add_option("-c,--clients", clients, "concurrent clients")->check(CLI::Range(1, 256));
  app.add_option("--command", command, "command each job runs (one word)");
  app.add_option("--prefix", prefix, "job name prefix (names are PREFIX-I)");
  app.add_option("--output", output, "job output file");
  app.add_flag("--print-acks", print_acks, "print 'ack ID NAME' per acknowledged job");
  CLI11_PARSE(app, argc, argv);

  std::atomic<int> next{0};
  std::atomic<int> acked{0};
  std::atomic<int> failed{0};
  std::mutex print_mutex;
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) return 1;
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
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"jobs\":%d,\"clients\":%d,\"acked\":%d,\"failed\":%d,\"seconds\":%.3f,\"per_second\":%.1f}\n",
              jobs, clients, acked.load(), failed.load(), seconds, acked.load() / seconds);
  return failed.load() == 0 ? 0 : 1;
}
