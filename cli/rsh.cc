#include "cli/rsh.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string_view>

#include "cli/client.h"
#include "cli/run.h"
#include "lib/core/id_text.h"

namespace hpcq::cli {
namespace {

constexpr std::string_view kSshOptionsWithValue = "BbcDEeFIiJLlmOoPpQRSWw";

int usage(const std::string& why) {
  std::fprintf(stderr, "hpcq-rsh: %s\nusage: hpcq-rsh [ssh options] NODE COMMAND [ARGS...]\n",
               why.c_str());
  return 2;
}

std::optional<in_addr> ipv4_of(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  const in_addr address = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
  freeaddrinfo(found);
  return address;
}

// The address this host's route to `to` leaves from: a UDP connect() picks
// the route and sends nothing.
std::optional<in_addr> source_toward(in_addr to) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(9);  // discard; nothing is sent
  peer.sin_addr = to;
  sockaddr_in own{};
  socklen_t length = sizeof own;
  const bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&peer), sizeof peer) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&own), &length) == 0 &&
                  own.sin_addr.s_addr != htonl(INADDR_ANY);
  close(fd);
  return ok ? std::optional<in_addr>(own.sin_addr) : std::nullopt;
}

std::optional<in_addr> first_interface_address() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  std::optional<in_addr> found;
  for (const ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    found = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr;
  }
  freeifaddrs(list);
  return found;
}

// An address of this host that `node` can reach: the source of the route
// to it where its name resolves, else of the default route (to an address
// of TEST-NET-3, RFC 5737, which no site uses), else of the first interface
// up; else loopback: a host with no network runs all of its nodes itself
// (hpcq start's emulated nodes, whose names do not resolve).
std::string address_for(const std::string& node) {
  std::optional<in_addr> found;
  if (auto to = ipv4_of(node)) found = source_toward(*to);
  in_addr elsewhere{};
  inet_pton(AF_INET, "203.0.113.1", &elsewhere);
  if (!found) found = source_toward(elsewhere);
  if (!found) found = first_interface_address();
  if (!found) return "127.0.0.1";
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &*found, text, sizeof text);
  return text;
}

}  // namespace

void reach_launcher_through_an_address(std::vector<std::string>& words, const std::string& node) {
  for (std::size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] != "--control-port") continue;
    std::string& value = words[i + 1];
    const std::size_t colon = value.rfind(':');
    if (colon == std::string::npos || colon == 0) continue;
    if (ipv4_of(value.substr(0, colon))) continue;  // as the proxy will (gethostbyname)
    value = address_for(node) + value.substr(colon);
  }
}

int run_rsh(const std::vector<std::string>& args) {
  // Not an ssh option: only a person asks this (ssh has no -h either).
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::printf(
        "usage: hpcq rsh [ssh options] NODE COMMAND [ARGS...]\n"
        "       hpcq-rsh [ssh options] NODE COMMAND [ARGS...]\n\n"
        "Inside a job (HPCQ_JOB_ID set): run COMMAND, read by /bin/sh as ssh would, as a\n"
        "step of that job with one task on NODE, beside its other steps; its output and\n"
        "exit status come back as hpcq run's do. What an MPI launcher runs instead of\n"
        "ssh: mpirun --mca plm_rsh_agent hpcq-rsh. ssh's options before NODE are\n"
        "accepted and ignored. An unresolvable HOST in --control-port HOST:PORT (MPICH's\n"
        "proxies) becomes an address of this node. See hpcq(1).\n");
    return 0;
  }
  std::size_t i = 0;
  // ssh's options: "-x", "-oOpt=v", "-o Opt=v", "-p 22", clusters like "-xq".
  while (i < args.size() && args[i].size() > 1 && args[i][0] == '-') {
    const std::string& word = args[i++];
    if (word == "--") break;
    for (std::size_t c = 1; c < word.size(); ++c) {
      if (kSshOptionsWithValue.find(word[c]) == std::string_view::npos) continue;
      if (c + 1 == word.size()) ++i;  // its value is the next word
      break;
    }
  }
  if (i >= args.size()) return usage("no node given");
  const std::string node = args[i++];
  if (i >= args.size()) return usage("no command given (hpcq-rsh opens no login shell)");
  std::vector<std::string> words(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  reach_launcher_through_an_address(words, node);
  std::string command;
  for (const std::string& word : words) command += (command.empty() ? "" : " ") + word;

  const char* inside = std::getenv("HPCQ_JOB_ID");
  if (!inside || !*inside) {
    return usage(
        "not inside a job (HPCQ_JOB_ID is not set): it starts processes on the nodes "
        "of the caller's own job");
  }
  auto job = parse_job_id(inside);
  if (!job.is_ok()) return usage("HPCQ_JOB_ID: " + job.status().message());

  job::SubmitOptions options;
  options.spec.argv = {"/bin/sh", "-c", command};
  options.spec.env = job::SharedEnvironment(caller_environment());
  std::error_code ec;
  options.spec.cwd = std::filesystem::current_path(ec).string();
  options.spec.nodelist = {node};
  options.spec.mpi = "none";  // the launcher's daemon serves its ranks itself
  options.step.nodes = 1;
  options.step.ntasks = 1;
  options.step.overlap = true;  // beside the step (or script) that launches it
  options.step.whole = true;    // its ranks share all of the job's cores there
  block_interrupts();
  return run_step(Client(socket_path()), *job, options, /*quiet=*/true);
}

}  // namespace hpcq::cli
