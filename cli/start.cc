#include "cli/start.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sodium.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "cli/client.h"
#include "lib/core/config.h"
#include "lib/core/hostlist.h"
#include "lib/core/units.h"
#include "lib/job/job.h"
#include "lib/overlay/curve_keys.h"
#include "lib/sched/scheduler.h"

namespace hpcq::cli {
namespace fs = std::filesystem;
namespace {

// Finds a program: beside this one in the build tree (build/cli/hpcq ->
// build/daemon/hpcqd), in ../sbin once installed, else on PATH.
std::string find_program(const std::string& name, const std::string& build_subdir) {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    buf[n] = '\0';
    fs::path dir = fs::path(buf).parent_path();
    for (const fs::path& p :
         {dir.parent_path() / build_subdir / name, dir / name, dir.parent_path() / "sbin" / name}) {
      if (access(p.c_str(), X_OK) == 0) return p;
    }
  }
  return name;  // execvp searches PATH
}

// A port the kernel says is free; the probe socket stays open (in `held`)
// until every rank has its port, so that no two ranks are given the same one.
int free_tcp_port(std::vector<int>& held) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = -1;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) held.push_back(fd);
  return port;
}

pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path,
            const std::vector<std::pair<std::string, std::string>>& env) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  if (!log_path.empty()) {
    // The daemons' logs name every job and user: for root only (issue 45).
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) dup2(null, STDIN_FILENO);
  }
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  std::fprintf(stderr, "hpcq start: cannot run %s: %s\n", args[0], std::strerror(errno));
  _exit(127);
}

// Waits for `pid` up to `timeout`; true when it exited.
bool wait_for(pid_t pid, std::chrono::milliseconds timeout, int* status) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Runs argv to its end, its output to `log_path`; true when it exited 0.
bool run_to_end(const std::vector<std::string>& argv, const std::string& log_path) {
  const pid_t pid = spawn(argv, log_path, {});
  int status = 0;
  while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The PEM files of the etcd that hpcq start runs: a CA of this cluster's
// own, one certificate for every member (its client and peer URLs on
// 127.0.0.1), and hpcqd's client certificate. etcd runs with
// --client-cert-auth on both URLs, so that only hpcqd (and root, who can
// read the files) reaches the store (issue 45). Made with the openssl
// command; the keys are readable by root only.
struct EtcdTls {
  fs::path ca, member_cert, member_key, client_cert, client_key;
};
Result<EtcdTls> make_etcd_tls(const fs::path& dir, const fs::path& log) {
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all);
  const std::string openssl = "openssl";
  const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                       "-nodes"};
  auto request = [&](const std::vector<std::string>& head, const std::vector<std::string>& tail) {
    std::vector<std::string> argv = head;
    argv.insert(argv.end(), ec.begin(), ec.end());
    argv.insert(argv.end(), tail.begin(), tail.end());
    return run_to_end(argv, log);
  };
  EtcdTls tls{dir / "ca.pem", dir / "member.pem", dir / "member.key", dir / "client.pem",
              dir / "client.key"};
  if (!request({openssl, "req", "-x509"}, {"-days", "3650", "-subj", "/CN=hpcq start etcd CA",
                                           "-keyout", dir / "ca.key", "-out", tls.ca})) {
    return internal_error("cannot make etcd's CA with openssl (logs/openssl.log)");
  }
  const std::pair<std::string, std::string> certs[] = {
      {"member",
       "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
       "extendedKeyUsage=serverAuth,clientAuth\n"},
      {"client", "extendedKeyUsage=clientAuth\n"}};
  for (const auto& [name, extensions] : certs) {
    const fs::path ext = dir / (name + ".ext");
    std::ofstream(ext) << extensions;
    if (!request({openssl, "req"}, {"-subj", "/CN=hpcq-" + name, "-keyout", dir / (name + ".key"),
                                    "-out", dir / (name + ".csr")}) ||
        !run_to_end({openssl, "x509", "-req", "-in", dir / (name + ".csr"), "-CA", tls.ca, "-CAkey",
                     dir / "ca.key", "-CAcreateserial", "-days", "3650", "-extfile", ext, "-out",
                     dir / (name + ".pem")},
                    log)) {
      return internal_error("cannot make etcd's " + name +
                            " certificate with openssl (logs/openssl.log)");
    }
  }
  for (const auto& entry : fs::directory_iterator(dir)) {
    fs::permissions(entry.path(), fs::perms::owner_read | fs::perms::owner_write);
  }
  return tls;
}

// SIGTERM or SIGHUP to hpcq start itself: the cluster is stopped as at the
// command's end, not left running without it.
volatile std::sig_atomic_t stop_signal = 0;
void on_stop_signal(int signal) { stop_signal = signal; }

void stop_process(pid_t pid, std::chrono::milliseconds grace) {
  if (pid <= 0) return;
  int status = 0;
  kill(pid, SIGTERM);
  if (!wait_for(pid, grace, &status)) {
    kill(pid, SIGKILL);
    wait_for(pid, std::chrono::seconds(5), &status);
  }
}

void print_log_tail(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  size_t from = lines.size() > 15 ? lines.size() - 15 : 0;
  std::fprintf(stderr, "--- %s ---\n", path.c_str());
  for (size_t i = from; i < lines.size(); ++i) std::fprintf(stderr, "%s\n", lines[i].c_str());
}

// `message`, an error about the generated file `generated` whose lines
// first..first+count-1 are the user's --config file `user`, as an error
// about that file: "hpcq.toml:18: x" becomes "site.toml:1: x". `inserted`
// lines of hpcq start's own follow the user's line `inserted_after` (its
// [agent] header), if any.
std::string as_users_error(const std::string& message, const std::string& generated, int first,
                           int count, const std::string& user, int inserted_after, int inserted) {
  if (message.rfind(generated + ":", 0) != 0) return message;
  const std::size_t at = generated.size() + 1;
  std::size_t end = at;
  while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
  if (end == at) return message;
  const int line = std::atoi(message.c_str() + at);
  if (line < first || line >= first + count + inserted) return message;
  int users_line = line - first + 1;
  if (inserted_after > 0 && users_line > inserted_after) {
    if (users_line <= inserted_after + inserted) return message;  // one of hpcq start's lines
    users_line -= inserted;
  }
  return user + ":" + std::to_string(users_line) + message.substr(end);
}

// What --config may not hold, as one line about that file: the tables and
// [agent] keys hpcq start writes itself (a TOML table or key given twice
// would be an error about the generated file, or a silent override).
// `agent_keys_set` gets the [agent] keys of ours the file sets (allowed:
// they replace ours). A line scan: enough for the tables and keys meant.
Status check_site_file(const std::string& text, const std::string& path,
                       std::set<std::string>& agent_keys_set) {
  static const std::set<std::string> kOwnTables = {"leader", "overlay", "rank"};
  static const std::set<std::string> kOwnAgentKeys = {"state_dir", "run_dir", "socket",
                                                      "secret_key"};
  std::string table;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    if (line[first] == '[') {
      const std::size_t name = line.find_first_not_of("[ \t", first);
      const std::size_t end = line.find_first_of("]. \t", name);
      table = name == std::string::npos ? "" : line.substr(name, end - name);
      if (kOwnTables.count(table)) {
        return invalid_argument(
            path + ":" + std::to_string(n) + ": [" + table +
            "] is hpcq start's own (it writes the leader's, the overlay's "
            "and the nodes' tables); --config adds [scheduler], [[queue]], "
            "[[qos]], [[account]], [[user]], [licenses], [metrics] and [agent]");
      }
      continue;
    }
    const std::size_t eq = line.find('=', first);
    if (table != "agent" || eq == std::string::npos) continue;
    std::string key = line.substr(first, eq - first);
    key.erase(key.find_last_not_of(" \t") + 1);
    if (kOwnAgentKeys.count(key)) {
      return invalid_argument(path + ":" + std::to_string(n) + ": agent." + key +
                              " is hpcq start's own (each agent's under the cluster's directory)");
    }
    agent_keys_set.insert(key);
  }
  return Status::ok();
}

// Daemons of this cluster that hpcq start did not start (an agent restarted
// by hand, as t0048 does): ended with the cluster, not left running on a
// removed directory. Found by their --config argument; an agent's jobs end
// with it. And job shells under `dir` that no agent holds any more (one was
// killed and not restarted): killed, with their tasks.
void stop_strays(const std::string& config_path, const std::string& dir) {
  std::vector<pid_t> strays;
  for (const auto& entry :
       fs::directory_iterator("/proc", fs::directory_options::skip_permission_denied)) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const pid_t pid = std::atoi(name.c_str());
    const std::string program = fs::path(cmdline.substr(0, cmdline.find('\0'))).filename();
    if (program.rfind("hpcq-job-shell", 0) == 0 &&
        cmdline.find('\0' + dir + "/") != std::string::npos) {
      kill(pid, SIGKILL);  // its PID namespace's init: all of the job goes
      continue;
    }
    if (cmdline.find(std::string("--config") + '\0' + config_path + '\0') == std::string::npos)
      continue;
    const int signal = program == "hpcq-agent" ? kAgentDrainSignal : SIGTERM;
    if (pid != getpid() && kill(pid, signal) == 0) strays.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (pid_t pid : strays) {
    while (kill(pid, 0) == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(pid, SIGKILL);  // (gone: ESRCH)
  }
}

// `items` as a TOML array of strings: ["a", "b"].
std::string toml_strings(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", \"" : "\"") + items[i] + "\"";
  return out + "]";
}

int count_lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// One "NODELIST=VALUE" of --features or --gres: the nodes it names (each
// one of node[1-agents]) and where VALUE starts in `given`.
Result<std::pair<std::vector<std::string>, std::size_t>> per_node(const std::string& option,
                                                                  const std::string& value,
                                                                  const std::string& given,
                                                                  int agents) {
  const std::size_t eq = given.find('=');
  auto names = expand_hostlist(given.substr(0, eq == std::string::npos ? 0 : eq));
  if (eq == std::string::npos || !names.is_ok()) {
    return invalid_argument(option + " " + quote(given) + ": want NODELIST=" + value +
                            (names.is_ok() ? "" : ": " + names.status().message()));
  }
  for (const std::string& name : *names) {
    const std::string prefix = "node";
    const std::string digits = name.substr(std::min(name.size(), prefix.size()));
    const bool ours = name.starts_with(prefix) && !digits.empty() && digits[0] != '0' &&
                      digits.find_first_not_of("0123456789") == std::string::npos &&
                      digits.size() <= 4 && std::stoi(digits) <= agents;
    if (!ours) {
      return invalid_argument(option + ": no node " + quote(name) + " (the nodes are node[1-" +
                              std::to_string(agents) + "])");
    }
  }
  return std::pair{std::move(names).value(), eq + 1};
}

int refuse(const Status& status) {
  std::fprintf(stderr, "hpcq start: %s\n", status.message().c_str());
  return 2;
}

}  // namespace

int run_start(const StartOptions& options) {
  if (options.agents < 1 || options.agents > 4096) {
    std::fprintf(stderr, "hpcq start: --agents must be between 1 and 4096\n");
    return 2;
  }
  if (options.fanout < 1) {
    std::fprintf(stderr, "hpcq start: --fanout must be >= 1\n");
    return 2;
  }
  if (options.node_down_after_s != 0 &&
      (options.node_down_after_s < 2 || options.node_down_after_s > 3600)) {
    std::fprintf(stderr, "hpcq start: --node-down-after must be between 2 and 3600 seconds\n");
    return 2;
  }
  // A takeover takes a lease (lease_s, 3 s) and the state's load.
  const int node_down_after_s = options.node_down_after_s != 0 ? options.node_down_after_s
                                : options.leaders > 1          ? 15
                                                               : 5;
  // --features "node[2-3]=a100,ib" and --gres "node2=nvme:2": node name ->
  // its features, its gres.
  std::map<std::string, std::vector<std::string>> features;
  for (const std::string& given : options.features) {
    auto nodes = per_node("--features", "FEATURE[,FEATURE...]", given, options.agents);
    if (!nodes.is_ok()) return refuse(nodes.status());
    std::vector<std::string> list;
    for (std::size_t at = nodes->second; at <= given.size();) {
      const std::size_t comma = std::min(given.find(',', at), given.size());
      list.push_back(given.substr(at, comma - at));
      if (!is_plain_name(list.back())) {
        std::fprintf(stderr, "hpcq start: --features %s: bad feature name %s\n",
                     quote(given).c_str(), quote(list.back()).c_str());
        return 2;
      }
      at = comma + 1;
    }
    for (const std::string& name : nodes->first) {
      auto& mine = features[name];
      mine.insert(mine.end(), list.begin(), list.end());
    }
  }
  std::map<std::string, std::map<std::string, int>> gres;
  for (const std::string& given : options.gres) {
    auto nodes = per_node("--gres", "NAME[:COUNT][,NAME[:COUNT]...]", given, options.agents);
    if (!nodes.is_ok()) return refuse(nodes.status());
    auto counts = job::parse_gres(std::string_view(given).substr(nodes->second));
    if (!counts.is_ok()) return refuse(counts.status());
    for (const std::string& name : nodes->first) {
      for (const auto& [what, count] : *counts) gres[name][what] = count;
    }
  }
  for (const std::string& endpoint : options.etcd_endpoints) {
    const std::size_t colon = endpoint.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == endpoint.size() ||
        endpoint.find_first_of("\"\\ \t\n") != std::string::npos) {
      std::fprintf(stderr, "hpcq start: --etcd: '%s' is not HOST:PORT\n", endpoint.c_str());
      return 2;
    }
  }
  // Refused before anything is made: a cluster that comes up and then fails
  // every job helps no one.
  if (options.executor == "process" && geteuid() != 0) {
    std::fprintf(stderr,
                 "hpcq start: must run as root: its agents run jobs as their users, in "
                 "cgroups (or use --executor test, which runs nothing)\n");
    return 2;
  }
  std::string extra_text;
  if (!options.config_extra.empty()) {
    std::ifstream extra(options.config_extra);
    std::stringstream read;
    read << extra.rdbuf();
    if (!extra) {
      std::fprintf(stderr, "hpcq start: --config %s: cannot read\n", options.config_extra.c_str());
      return 2;
    }
    extra_text = read.str();
  }
  std::set<std::string> users_agent_keys;
  if (Status own = check_site_file(extra_text, options.config_extra, users_agent_keys);
      !own.is_ok()) {
    std::fprintf(stderr, "hpcq start: %s\n", own.message().c_str());
    return 2;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/hpcq-start-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) {
    std::fprintf(stderr, "hpcq start: cannot create a directory in %s: %s\n", tmp ? tmp : "/tmp",
                 std::strerror(errno));
    return 1;
  }
  const fs::path dir = buf.data();
  // Job output goes to the submitter's cwd; the directory itself must be
  // traversable by every user whose jobs run here (the socket is inside).
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::create_directories(dir / "keys");
  fs::create_directories(dir / "logs");
  fs::permissions(dir / "logs", fs::perms::owner_all);

  // The job directories: on a tmpfs of their own (a disk file system's inode
  // work for the files made and removed with each job was a third of an
  // agent's CPU per job here), else beside the rest. Not /dev/shm: an image
  // job's container mounts a /dev/shm of its own over the job directory.
  fs::path run_dir = dir / "run";
  fs::create_directories(run_dir);
  const bool run_tmpfs =
      mount("tmpfs", run_dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") == 0;
  if (!run_tmpfs) run_dir = dir / "agents";
  auto remove_dir = [&] {
    std::error_code ec;
    if (run_tmpfs) umount2((dir / "run").c_str(), MNT_DETACH);
    fs::remove_all(dir, ec);
  };

  // No SA_RESTART: a wait for the command returns to look at stop_signal.
  struct sigaction stop {};
  stop.sa_handler = on_stop_signal;
  sigemptyset(&stop.sa_mask);
  sigaction(SIGTERM, &stop, nullptr);
  sigaction(SIGHUP, &stop, nullptr);

  // Whatever fails from here on leaves nothing behind.
  auto give_up = [&](int code) {
    remove_dir();
    return code;
  };
  const int size = options.agents + 1;
  std::vector<int> probes;  // closed once every rank has a port
  // --leaders without --etcd: an etcd member beside each candidate, as a
  // site would run them; their client and peer ports.
  std::vector<std::string> etcd_endpoints = options.etcd_endpoints;
  std::vector<std::pair<int, int>> etcd_ports;
  if (options.leaders > 1 && etcd_endpoints.empty()) {
    for (int i = 0; i < options.leaders; ++i) {
      const int client_port = free_tcp_port(probes), peer_port = free_tcp_port(probes);
      if (client_port < 0 || peer_port < 0) {
        for (int fd : probes) close(fd);
        std::fprintf(stderr, "hpcq start: no free TCP port on 127.0.0.1\n");
        return give_up(1);
      }
      etcd_ports.emplace_back(client_port, peer_port);
      etcd_endpoints.push_back("127.0.0.1:" + std::to_string(client_port));
    }
  }
  std::ostringstream config;
  config << "# written by hpcq start\n"
         << "[overlay]\nfanout = " << options.fanout
         << "\nheartbeat_interval_ms = 500\nnode_unresponsive_after_ms = "
         << node_down_after_s * 300 << "\nnode_down_after_ms = " << node_down_after_s * 1000
         << "\n\n"
         << "[leader]\nstate_dir = \"" << (dir / "leader").string() << "\"\n"
         << "socket = \"" << (dir / "hpcqd.sock").string() << "\"\n"
         << "secret_key = \"" << (dir / "keys" / "rank-0.key").string() << "\"\n";
  std::optional<EtcdTls> etcd_tls;
  if (!etcd_ports.empty()) {
    auto made = make_etcd_tls(dir / "etcd-tls", dir / "logs" / "openssl.log");
    if (!made.is_ok()) {
      for (int fd : probes) close(fd);
      std::fprintf(stderr, "hpcq start: %s\n", made.status().message().c_str());
      return give_up(1);
    }
    etcd_tls = *made;
  } else if (!options.etcd_ca.empty() || !options.etcd_cert.empty()) {
    etcd_tls = EtcdTls{options.etcd_ca, "", "", options.etcd_cert, options.etcd_key};
  }
  if (!etcd_endpoints.empty()) {
    // Under the cluster's own directory name: clusters sharing an etcd see
    // only their own keys.
    config << "store = \"etcd\"\netcd_prefix = \"/hpcq/" << dir.filename().string() << "/\"\n"
           << "etcd_endpoints = " << toml_strings(etcd_endpoints) << "\n";
    if (etcd_tls) {
      config << "etcd_ca = \"" << etcd_tls->ca.string() << "\"\netcd_cert = \""
             << etcd_tls->client_cert.string() << "\"\netcd_key = \""
             << etcd_tls->client_key.string() << "\"\n";
    }
    // What hpcqd writes to the store is sealed with a secret of its own.
    const fs::path store_key = dir / "keys" / "store.key";
    {
      std::ofstream out(store_key);
      // lib/store/seal.h's file: 32 random bytes in hex.
      unsigned char secret[32];
      if (sodium_init() < 0) {
        for (int fd : probes) close(fd);
        std::fprintf(stderr, "hpcq start: cannot make a store key: libsodium failed\n");
        return give_up(1);
      }
      randombytes_buf(secret, sizeof secret);
      char text[2 * sizeof secret + 1];
      out << sodium_bin2hex(text, sizeof text, secret, sizeof secret) << "\n";
    }
    fs::permissions(store_key, fs::perms::owner_read | fs::perms::owner_write);
    config << "store_key = \"" << store_key.string() << "\"\n";
    // Where every candidate finds the images of checkpoints taken before
    // it led (a shared file system on a real cluster).
    if (options.leaders > 1)
      config << "checkpoint_dir = \"" << (dir / "checkpoints").string() << "\"\n";
  }
  config << "\n";
  std::string agent_keys =
      "state_dir = \"" + (dir / "agents").string() + "\"\nrun_dir = \"" + run_dir.string() + "\"\n";
  if (!users_agent_keys.count("kill_grace_s")) agent_keys += "kill_grace_s = 2\n";
  // Every node is on this host (lib/job/job_env.h: what MPI needs then).
  if (!users_agent_keys.count("shared_host")) agent_keys += "shared_host = true\n";
  // The site's own sections ([scheduler], [[queue]], [agent] prolog, ...),
  // checked with the rest below. TOML defines a table once: where the file
  // has an [agent] table, hpcq start's agent keys go right after its header.
  int agent_header = 0;  // the user's line of it; 0: none
  for (std::size_t at = 0, n = 1; at < extra_text.size(); ++n) {
    std::size_t end = extra_text.find('\n', at);
    if (end == std::string::npos) end = extra_text.size();
    const std::string_view line(extra_text.data() + at, end - at);
    const std::size_t first = line.find_first_not_of(" \t");
    if (first != std::string_view::npos && line.substr(first).starts_with("[agent]")) {
      agent_header = static_cast<int>(n);
      if (end == extra_text.size()) extra_text += '\n';
      extra_text.insert(end + 1, agent_keys);
      break;
    }
    at = end + 1;
  }
  if (agent_header == 0) config << "[agent]\n" << agent_keys << "\n";
  if (!extra_text.empty()) config << "# from " << options.config_extra << "\n";
  const int extra_first = count_lines(config.str()) + 1;
  config << extra_text << "\n\n";
  std::vector<std::string> leader_endpoints;
  for (int r = 0; r < size; ++r) {
    auto keys = overlay::generate_key_pair();
    if (!keys.is_ok()) {
      std::fprintf(stderr, "hpcq start: %s\n", keys.status().message().c_str());
      return give_up(1);
    }
    std::string key_path = dir / "keys" / ("rank-" + std::to_string(r) + ".key");
    Status written = overlay::write_key_file(key_path, *keys);
    if (!written.is_ok()) {
      std::fprintf(stderr, "hpcq start: %s\n", written.message().c_str());
      return give_up(1);
    }
    // Each leader candidate has an address of its own, as on separate hosts.
    std::vector<std::string> endpoints;
    for (int i = 0; i < (r == 0 ? options.leaders : 1); ++i) {
      const int port = free_tcp_port(probes);
      if (port < 0) {
        std::fprintf(stderr, "hpcq start: no free TCP port on 127.0.0.1\n");
        return give_up(1);
      }
      endpoints.push_back("tcp://127.0.0.1:" + std::to_string(port));
    }
    if (r == 0) leader_endpoints = endpoints;
    config << "[[rank]]\nname = \"" << (r == 0 ? std::string("leader") : "node" + std::to_string(r))
           << "\"\n";
    if (endpoints.size() == 1) {
      config << "endpoint = \"" << endpoints.front() << "\"\n";
    } else {
      config << "endpoints = " << toml_strings(endpoints) << "\n";
    }
    config << "public_key = \"" << keys->public_key << "\"\n";
    if (r > 0) config << "topology = \"" << options.topology << "\"\n";
    if (auto f = features.find("node" + std::to_string(r)); r > 0 && f != features.end()) {
      config << "features = " << toml_strings(f->second) << "\n";
    }
    if (auto g = gres.find("node" + std::to_string(r)); r > 0 && g != gres.end()) {
      config << "gres = {";
      for (const auto& [what, count] : g->second) {
        config << (what == g->second.begin()->first ? " " : ", ") << what << " = " << count;
      }
      config << " }\n";
    }
    config << "\n";
  }
  const std::string config_path = dir / "hpcq.toml";
  // Checked here, so that a mistake in --config is one line about that file
  // (not hpcqd's log about the generated one).
  const int inserted = agent_header > 0 ? count_lines(agent_keys) : 0;
  auto checked = parse_config(config.str(), config_path);
  if (checked.is_ok()) {
    // hpcqd's scheduler would refuse these at its start, in its log.
    auto scheduler =
        sched::Scheduler::create({checked->actions, checked->plugins, checked->scheduler_options});
    if (!scheduler.is_ok()) {
      for (int fd : probes) close(fd);
      std::fprintf(stderr, "hpcq start: %s: [scheduler]: %s\n", options.config_extra.c_str(),
                   scheduler.status().message().c_str());
      return give_up(2);
    }
  }
  if (!checked.is_ok()) {
    for (int fd : probes) close(fd);
    std::fprintf(stderr, "hpcq start: %s\n",
                 as_users_error(checked.status().message(), config_path, extra_first,
                                count_lines(extra_text) + 1 - inserted, options.config_extra,
                                agent_header, inserted)
                     .c_str());
    return give_up(2);
  }
  {
    std::ofstream out(config_path);
    out << config.str();
    if (!out.flush()) {
      for (int fd : probes) close(fd);
      std::fprintf(stderr, "hpcq start: cannot write %s\n", config_path.c_str());
      return give_up(1);
    }
  }
  for (int fd : probes) close(fd);

  const std::string socket = dir / "hpcqd.sock";
  std::vector<pid_t> agents;
  std::vector<pid_t> etcds, leaders;
  std::string initial_cluster;
  for (std::size_t i = 0; i < etcd_ports.size(); ++i) {
    initial_cluster += (i ? "," : "") + std::string("etcd-") + std::to_string(i + 1) +
                       "=https://127.0.0.1:" + std::to_string(etcd_ports[i].second);
  }
  for (std::size_t i = 0; i < etcd_ports.size(); ++i) {
    const std::string member = "etcd-" + std::to_string(i + 1);
    const std::string client_url = "https://127.0.0.1:" + std::to_string(etcd_ports[i].first);
    const std::string peer_url = "https://127.0.0.1:" + std::to_string(etcd_ports[i].second);
    // Limits raised for hpcqd's group commits (lib/store/etcd_store.h).
    // Clients and peers alike need a certificate of this cluster's CA.
    etcds.push_back(spawn({find_program("etcd", "etcd"),
                           "--name",
                           member,
                           "--data-dir",
                           dir / member,
                           "--listen-client-urls",
                           client_url,
                           "--advertise-client-urls",
                           client_url,
                           "--listen-peer-urls",
                           peer_url,
                           "--initial-advertise-peer-urls",
                           peer_url,
                           "--initial-cluster",
                           initial_cluster,
                           "--max-txn-ops",
                           "16384",
                           "--max-request-bytes",
                           "67108864",
                           "--cert-file",
                           etcd_tls->member_cert,
                           "--key-file",
                           etcd_tls->member_key,
                           "--client-cert-auth",
                           "--trusted-ca-file",
                           etcd_tls->ca,
                           "--peer-cert-file",
                           etcd_tls->member_cert,
                           "--peer-key-file",
                           etcd_tls->member_key,
                           "--peer-client-cert-auth",
                           "--peer-trusted-ca-file",
                           etcd_tls->ca},
                          dir / "logs" / (member + ".log"), {}));
  }
  std::vector<std::pair<std::vector<std::string>, fs::path>> leader_commands;  // argv, log
  for (int i = 1; i <= options.leaders; ++i) {
    std::vector<std::string> argv = {find_program("hpcqd", "daemon"), "--config", config_path,
                                     "--log-level", options.log_level};
    std::string log = "hpcqd.log";
    if (options.leaders > 1) {
      const std::string name = "leader-" + std::to_string(i);
      argv.insert(argv.end(), {"--name", name, "--state-dir", dir / name, "--endpoint",
                               leader_endpoints[i - 1]});
      log = "hpcqd-" + std::to_string(i) + ".log";
    }
    leader_commands.emplace_back(argv, dir / "logs" / log);
    leaders.push_back(spawn(argv, dir / "logs" / log, {}));
  }
  for (int r = 1; r < size; ++r) {
    agents.push_back(spawn(
        {find_program("hpcq-agent", "agent"), "--config", config_path, "--rank", std::to_string(r),
         "--secret-key", dir / "keys" / ("rank-" + std::to_string(r) + ".key"), "--socket",
         dir / "agents" / ("rank-" + std::to_string(r) + ".sock"), "--log-level", options.log_level,
         "--executor", options.executor},
        dir / "logs" / ("agent-" + std::to_string(r) + ".log"), {}));
  }

  auto teardown = [&](int code) {
    for (pid_t pid : agents) {
      // Their jobs end with the cluster (SIGTERM would leave them running).
      // -1: one that exited (kill(-1) would reach every process).
      if (pid > 0) kill(pid, kAgentDrainSignal);
    }
    for (pid_t pid : agents) stop_process(pid, std::chrono::seconds(15));
    for (pid_t pid : leaders) {
      if (pid > 0) kill(pid, SIGTERM);
    }
    for (pid_t pid : leaders) stop_process(pid, std::chrono::seconds(10));
    for (pid_t pid : etcds) stop_process(pid, std::chrono::seconds(10));
    stop_strays(config_path, dir.string());
    if (code != 0 && !options.keep) {
      for (int i = 1; i <= options.leaders; ++i) {
        print_log_tail(dir / "logs" /
                       (options.leaders > 1 ? "hpcqd-" + std::to_string(i) + ".log" : "hpcqd.log"));
      }
      for (int r = 1; r < size && r <= 4; ++r) {
        print_log_tail(dir / "logs" / ("agent-" + std::to_string(r) + ".log"));
      }
    }
    if (options.keep) {
      std::fprintf(stderr, "hpcq start: kept %s%s\n", dir.c_str(),
                   run_tmpfs ? " (its run/ is a tmpfs: umount it when done)" : "");
    } else {
      remove_dir();
    }
    return code;
  };

  // Wait until the daemon answers and every node is up.
  Client client(socket);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.wait_s);
  int up = 0;
  while (true) {
    int status = 0;
    if (stop_signal != 0) {
      std::fprintf(stderr, "hpcq start: signal %d: stopping the cluster\n", int{stop_signal});
      return teardown(128 + stop_signal);
    }
    for (pid_t& pid : leaders) {
      if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid) {
        std::fprintf(stderr, "hpcq start: hpcqd exited during start-up\n");
        pid = -1;
        return teardown(1);
      }
    }
    for (pid_t& pid : etcds) {
      if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid) {
        std::fprintf(stderr, "hpcq start: etcd exited during start-up (logs/etcd-*.log)\n");
        pid = -1;
        return teardown(1);
      }
    }
    for (std::size_t a = 0; a < agents.size(); ++a) {
      if (agents[a] > 0 && waitpid(agents[a], &status, WNOHANG) == agents[a]) {
        std::fprintf(stderr, "hpcq start: the agent of rank %zu exited during start-up\n", a + 1);
        agents[a] = -1;
        return teardown(1);
      }
    }
    v1::ListNodesResponse nodes;
    if (client.call("ListNodes", v1::ListNodesRequest(), &nodes, /*timeout_ms=*/2000).is_ok()) {
      up = 0;
      for (const auto& n : nodes.nodes()) up += n.state() == "up";
      if (up == options.agents) break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "hpcq start: only %d of %d agents came up within %d s\n", up,
                   options.agents, options.wait_s);
      return teardown(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  std::vector<std::string> command = options.command;
  if (command.empty()) {
    const char* shell = std::getenv("SHELL");
    command = {shell && *shell ? shell : "/bin/sh"};
  }
  std::vector<std::pair<std::string, std::string>> env = {{"HPCQ_SOCKET", socket}};
  if (!etcd_endpoints.empty()) {
    std::string joined;
    for (const std::string& e : etcd_endpoints) joined += (joined.empty() ? "" : ",") + e;
    env.emplace_back("HPCQ_ETCD_ENDPOINTS", joined);
  }
  pid_t child = spawn(command, "", env);
  int status = 0;
  // Ignore the terminal's SIGINT while the command runs, as a shell does.
  signal(SIGINT, SIG_IGN);
  // With several candidates, each is kept running as a site's supervisor
  // (systemd's Restart=) would: one that ended (stepped down, lost its
  // lease, killed) starts again and stands by. A single hpcqd is left as
  // it is: its end is the cluster's failure to see.
  for (;;) {
    int ended_status = 0;
    const pid_t ended = waitpid(-1, &ended_status, 0);
    if (ended == child) {
      status = ended_status;
      break;
    }
    if (ended < 0 && errno == EINTR && stop_signal != 0) {
      // The command first (it may be using the cluster), then the cluster.
      stop_process(child, std::chrono::seconds(10));
      status = (128 + stop_signal) << 8;
      break;
    }
    if (ended < 0 && errno == ECHILD) break;
    for (std::size_t i = 0; i < leaders.size(); ++i) {
      if (ended <= 0 || leaders[i] != ended) continue;
      leaders[i] = -1;
      if (options.leaders > 1) {
        // After its lease (lease_s, 3 s) has run out, as a supervisor's
        // restart delay would: a standby takes over first, and the one
        // that ended stands by (it would otherwise race them for the key).
        std::vector<std::string> later = {"/bin/sh", "-c", "sleep 5; exec \"$0\" \"$@\""};
        later.insert(later.end(), leader_commands[i].first.begin(), leader_commands[i].first.end());
        leaders[i] = spawn(later, leader_commands[i].second, {});
      }
    }
    for (pid_t& pid : etcds) pid = pid == ended ? -1 : pid;
    for (pid_t& pid : agents) pid = pid == ended ? -1 : pid;
  }
  signal(SIGINT, SIG_DFL);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return teardown(code);
}

}  // namespace hpcq::cli
