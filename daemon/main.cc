// hpcqd: the leader daemon. Reads hpcq.toml, opens the store, binds the
// overlay and the local API socket, and runs the leader's loop until SIGTERM
// or SIGINT; shutdown mirrors start-up.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <thread>

#include "daemon/api_service.h"
#include "daemon/leader.h"
#include "daemon/peer_credentials.h"
#include "lib/core/config.h"

namespace {

int run(const std::string& config_path, const std::string& socket_override) {
  auto config = hpcq::load_config(config_path);
  if (!config.is_ok()) {
    std::fprintf(stderr, "hpcqd: %s\n", config.status().message().c_str());
    return 2;
  }
  if (!socket_override.empty()) config->socket = socket_override;

  // Signals are taken by a dedicated thread through signalfd, so that no
  // other thread (gRPC, ZeroMQ) sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto leader = hpcq::daemon::Leader::create(*config);
  if (!leader.is_ok()) {
    std::fprintf(stderr, "hpcqd: %s\n", leader.status().message().c_str());
    return 1;
  }
  hpcq::daemon::PeerCredentials credentials;
  hpcq::daemon::ApiService service(**leader, credentials);
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(16 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::fprintf(stderr, "hpcqd: cannot start the gRPC server\n");
    return 1;
  }
  hpcq::daemon::UnixAcceptor acceptor;
  hpcq::Status listening = acceptor.start(config->socket, server.get(), &credentials);
  if (!listening.is_ok()) {
    std::fprintf(stderr, "hpcqd: %s\n", listening.message().c_str());
    return 1;
  }
  int sfd = signalfd(-1, &signals, SFD_CLOEXEC);
  std::thread signal_thread([&] {
    signalfd_siginfo info{};
    if (read(sfd, &info, sizeof info) == sizeof info) {
      spdlog::info("hpcqd: signal {}: shutting down", info.ssi_signo);
    }
    (*leader)->stop();
  });
  spdlog::info("hpcqd: serving on {} ({} ranks in {})", config->socket, config->ranks.size(),
               config->source);
  sd_notify(0, "READY=1");  // for Type=notify units; a no-op elsewhere
  (*leader)->run();
  sd_notify(0, "STOPPING=1");

  // Stop taking calls first, then the loop's users, in reverse of start-up.
  acceptor.stop();
  (*leader)->events().close();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (signal_thread.joinable()) {
    union sigval v{};
    sigqueue(getpid(), SIGTERM, v);  // wake the signal thread if the loop stopped on its own
    signal_thread.join();
  }
  close(sfd);
  leader->reset();
  spdlog::info("hpcqd: stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hpcqd: the hpcq leader daemon"};
  std::string config_path = "/etc/hpcq/hpcq.toml";
  std::string socket;
  std::string log_level = "info";
  app.add_option("-c,--config", config_path, "cluster configuration (hpcq.toml)");
  app.add_option("--socket", socket, "local API socket (overrides leader.socket)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "hpcqd: %s\n", e.what());
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  return run(config_path, socket);
}
