// hpcqd: the leader daemon. Reads hpcq.toml, opens the store, binds the
// overlay and the local API socket, and runs the leader's loop until SIGTERM
// or SIGINT; shutdown mirrors start-up.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "daemon/api_service.h"
#include "daemon/authenticator.h"
#include "daemon/forwarded_calls.h"
#include "daemon/leader.h"
#include "daemon/leadership.h"
#include "daemon/local_api.h"
#include "daemon/peer_credentials.h"
#include "daemon/unix_acceptor.h"
#include "lib/core/build_info.h"
#include "lib/core/config.h"
#include "lib/core/host_name.h"

namespace {

// A PEM file's text; a private key must not be readable by group or others.
hpcq::Result<std::string> read_pem(const std::string& path, bool secret) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return hpcq::not_found(path + ": cannot read");
  if (secret && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return hpcq::invalid_argument(path +
                                  ": a private key must not be readable by others (chmod 600)");
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return hpcq::not_found(path + ": cannot read");
  return text.str();
}

// [api] listen: the service over TCP with TLS (mutual when tls_client_ca is set).
hpcq::Status add_tcp_listener(const hpcq::ClusterConfig& config, grpc::ServerBuilder& builder,
                              int* port) {
  auto cert = read_pem(config.api_tls_cert, false);
  if (!cert.is_ok()) return cert.status();
  auto key = read_pem(config.api_tls_key, true);
  if (!key.is_ok()) return key.status();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!config.api_tls_client_ca.empty()) {
    auto ca = read_pem(config.api_tls_client_ca, false);
    if (!ca.is_ok()) return ca.status();
    options.pem_root_certs = *ca;
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  builder.AddListeningPort(config.api_listen, grpc::SslServerCredentials(options), port);
  return hpcq::Status::ok();
}

// The gRPC server of `service` (the local socket's, and the TLS listener
// for portals when [api] listen is set); null after saying why, with the
// exit code in `exit_code`.
std::unique_ptr<grpc::Server> build_server(const hpcq::ClusterConfig& config,
                                           hpcq::daemon::ApiService& service, int* exit_code) {
  // The standard health service and server reflection, so that grpcurl-like
  // tools and portal frameworks work without our .proto.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(config.api_max_message_bytes);
  builder.SetMaxSendMessageSize(64 << 20);
  int tcp_port = 0;
  if (!config.api_listen.empty()) {
    hpcq::Status added = add_tcp_listener(config, builder, &tcp_port);
    if (!added.is_ok()) {
      std::fprintf(stderr, "hpcqd: [api]: %s\n", added.message().c_str());
      *exit_code = 2;
      return nullptr;
    }
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::fprintf(stderr, "hpcqd: cannot start the gRPC server\n");
    *exit_code = 1;
    return nullptr;
  }
  if (!config.api_listen.empty()) {
    if (tcp_port == 0) {
      std::fprintf(stderr, "hpcqd: [api] listen %s: cannot bind\n", config.api_listen.c_str());
      *exit_code = 1;
      return nullptr;
    }
    spdlog::info("api: TLS on {} (port {}), {} portal(s){}", config.api_listen, tcp_port,
                 config.portals.size(), config.api_tls_client_ca.empty() ? "" : ", mutual TLS");
  }
  return server;
}

// Which of rank 0's endpoints this candidate binds: `chosen`, else the only
// one, else the only one naming this host.
hpcq::Status choose_endpoint(hpcq::ClusterConfig& config, const std::string& chosen) {
  hpcq::RankConfig& leader = config.ranks.front();
  const std::vector<std::string>& all = leader.endpoints;
  if (!chosen.empty()) {
    if (std::find(all.begin(), all.end(), chosen) == all.end()) {
      return hpcq::invalid_argument("--endpoint " + chosen +
                                    " is not one of rank 0's endpoints in " + config.source);
    }
    leader.endpoint = chosen;
    return hpcq::Status::ok();
  }
  if (all.size() <= 1) return hpcq::Status::ok();
  const std::string host = hpcq::this_host_name();
  std::vector<std::string> mine;
  for (const std::string& endpoint : all) {
    const std::size_t start = endpoint.find("://");
    const std::size_t colon = endpoint.rfind(':');
    if (start == std::string::npos || colon <= start + 3) continue;
    const std::string endpoint_host = endpoint.substr(start + 3, colon - start - 3);
    if (endpoint_host == host || endpoint_host.starts_with(host + ".")) mine.push_back(endpoint);
  }
  if (mine.size() != 1) {
    return hpcq::invalid_argument("rank 0 lists " + std::to_string(all.size()) + " endpoints, " +
                                  std::to_string(mine.size()) + " of them on this host (" + host +
                                  "): choose one with --endpoint");
  }
  leader.endpoint = mine.front();
  return hpcq::Status::ok();
}

int run(const std::string& config_path, const std::string& socket_override,
        const std::string& state_dir_override, std::string name, const std::string& endpoint) {
  auto config = hpcq::load_config(config_path);
  if (!config.is_ok()) {
    std::fprintf(stderr, "hpcqd: %s\n", config.status().message().c_str());
    return 2;
  }
  if (!socket_override.empty()) config->socket = socket_override;
  if (!state_dir_override.empty()) config->state_dir = state_dir_override;
  if (hpcq::Status chosen = choose_endpoint(*config, endpoint); !chosen.is_ok()) {
    std::fprintf(stderr, "hpcqd: %s\n", chosen.message().c_str());
    return 2;
  }

  // Signals are taken by a dedicated thread through signalfd, so that no
  // other thread (gRPC, ZeroMQ) sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // With the etcd store, one candidate of several leads and the others
  // stand by here until it is gone (leadership.h).
  std::unique_ptr<hpcq::daemon::Leadership> leadership;
  hpcq::daemon::StoreGuard guard;
  if (config->store == "etcd") {
    if (name.empty()) name = hpcq::this_host_name() + ":" + std::to_string(getpid());
    auto stopping = [&signals] {
      const timespec now{};
      return sigtimedwait(&signals, nullptr, &now) > 0;
    };
    auto won = hpcq::daemon::Leadership::campaign(*config, name, stopping);
    if (!won.is_ok()) {
      std::fprintf(stderr, "hpcqd: %s\n", won.status().message().c_str());
      return 1;
    }
    if (*won == nullptr) return 0;  // stopped while standing by
    leadership = std::move(won).value();
    guard = {leadership->key(), leadership->revision()};
  }
  auto leader = hpcq::daemon::Leader::create(*config, guard);
  if (!leader.is_ok()) {
    std::fprintf(stderr, "hpcqd: %s\n", leader.status().message().c_str());
    return 1;
  }
  hpcq::daemon::PeerCredentials credentials;
  hpcq::daemon::Authenticator authenticator(*config, credentials, [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  });
  hpcq::daemon::Api api(**leader);
  api.set_candidates([&](hpcq::v1::ListLeadersResponse* response) {
    response->set_store(config->store);
    // On SQLite this hpcqd is the one leader.
    auto candidates = leadership ? leadership->candidates()
                                 : hpcq::Result<std::vector<hpcq::daemon::Leadership::Candidate>>(
                                       {hpcq::daemon::Leadership::self(
                                           *config, name.empty() ? "hpcqd" : name, "active")});
    if (!candidates.is_ok()) return candidates.status();
    for (const auto& c : *candidates) {
      hpcq::v1::LeaderCandidate* out = response->add_candidates();
      out->set_name(c.name);
      out->set_state(c.state);
      out->set_host(c.host);
      out->set_pid(c.pid);
      out->set_endpoint(c.endpoint);
    }
    return hpcq::Status::ok();
  });
  hpcq::daemon::ApiService service(api, authenticator);
  hpcq::daemon::LocalApi local(api, authenticator, config->api_max_message_bytes);
  // The hpcq command on the nodes, through their agents.
  hpcq::daemon::ForwardedCalls forwarded(local, credentials, [&](hpcq::overlay::Envelope e) {
    (*leader)->send_to_node(std::move(e));
  });
  (*leader)->on_forwarded([&](hpcq::Rank rank, hpcq::overlay::Envelope&& e) {
    if (e.has_forwarded_call()) {
      forwarded.on_call(rank, e.forwarded_call());
    } else {
      forwarded.on_cancel(rank, e.forwarded_cancel());
    }
  });
  int failed = 0;
  std::unique_ptr<grpc::Server> server = build_server(*config, service, &failed);
  if (!server) return failed;
  hpcq::daemon::UnixAcceptor acceptor;
  hpcq::Status listening = acceptor.start(config->socket, server.get(), &local, &credentials);
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
  local.stop();
  (*leader)->events().close();
  (*leader)->output().shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (signal_thread.joinable()) {
    union sigval v {};
    sigqueue(getpid(), SIGTERM, v);  // wake the signal thread if the loop stopped on its own
    signal_thread.join();
  }
  close(sfd);
  leader->reset();
  leadership.reset();  // after the last write: a standby takes over now
  spdlog::info("hpcqd: stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hpcqd: the hpcq leader daemon"};
  std::string config_path = "/etc/hpcq/hpcq.toml";
  std::string socket;
  std::string state_dir;
  std::string name;
  std::string endpoint;
  std::string log_level = "info";
  app.add_option("-c,--config", config_path, "cluster configuration (hpcq.toml)");
  app.add_option("--socket", socket, "local API socket (overrides leader.socket)");
  app.add_option("--state-dir", state_dir, "state directory (overrides leader.state_dir)");
  app.add_option("--name", name,
                 "this candidate's name in the etcd store's election (default HOST:PID)");
  app.add_option("--endpoint", endpoint,
                 "which of rank 0's endpoints this candidate binds (default: the one on this "
                 "host)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  app.set_version_flag("--version", hpcq::version_line("hpcqd"));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "hpcqd: %s\n", e.what());
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  return run(config_path, socket, state_dir, name, endpoint);
}
