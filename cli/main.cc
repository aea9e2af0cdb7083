// hpcq: the user command. Talks to hpcqd over its unix socket ($HPCQ_SOCKET).
// Human tables by default, --json everywhere; exit 0 on success, 2 on bad
// input, 1 on any other error, always with a one-line reason on stderr.
// This file parses the command line and dispatches: the commands about jobs
// are in job_commands.cc, those about the cluster in cluster_commands.cc.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "cli/cluster_commands.h"
#include "cli/job_commands.h"
#include "cli/rsh.h"
#include "cli/run.h"
#include "cli/simulate.h"
#include "cli/start.h"
#include "lib/core/build_info.h"

int main(int argc, char** argv) {
  using namespace hpcq::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  // submit has its own parser (lib/job/submit_options), shared with script directives.
  if (!args.empty() && args[0] == "submit") {
    return cmd_submit(std::vector<std::string>(args.begin() + 1, args.end()),
                      hpcq::job::SubmitKind::kSubmit);
  }
  if (!args.empty() && args[0] == "alloc") {
    return cmd_submit(std::vector<std::string>(args.begin() + 1, args.end()),
                      hpcq::job::SubmitKind::kAlloc);
  }
  if (!args.empty() && (args[0] == "batch" || args[0] == "run")) {
    return cmd_submit(
        std::vector<std::string>(args.begin() + 1, args.end()),
        args[0] == "batch" ? hpcq::job::SubmitKind::kBatch : hpcq::job::SubmitKind::kRun);
  }
  // hpcq-rsh (a link to hpcq) and hpcq rsh: ssh's words, not ours (cli/rsh.h).
  if (std::filesystem::path(argv[0]).filename() == "hpcq-rsh") return run_rsh(args);
  if (!args.empty() && args[0] == "rsh") {
    return run_rsh(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  // simulate needs no daemon and parses its own options (cli/simulate.cc).
  if (!args.empty() && args[0] == "simulate") {
    return run_simulate(std::vector<std::string>(args.begin() + 1, args.end()));
  }

  CLI::App app{"hpcq: submit and manage jobs on an hpcq cluster", "hpcq"};
  app.require_subcommand(1);
  app.set_version_flag("--version", hpcq::version_line("hpcq"));
  app.footer("hpcq COMMAND --help: a command's own options. See hpcq(1).");
  bool json = false;
  std::vector<std::string> ids;

  app.add_subcommand("submit", "submit a job: hpcq submit [options] COMMAND|SCRIPT [ARGS...]");
  app.add_subcommand("batch",
                     "submit a batch script that runs once, on the job's first node: "
                     "hpcq batch [options] SCRIPT [ARGS...]");
  app.add_subcommand("run",
                     "run a command in every task and show its output as it comes: "
                     "hpcq run [options] [--] COMMAND [ARGS...]");
  app.add_subcommand("alloc",
                     "wait for an allocation, then run COMMAND (default: your shell) here with "
                     "it: hpcq alloc [options] [-- COMMAND [ARGS...]]");
  app.add_subcommand("simulate", "run an SWF trace through the scheduler: hpcq simulate --help");
  app.add_subcommand("rsh",
                     "inside a job: run a command on one of its nodes, as an MPI launcher's ssh: "
                     "hpcq rsh NODE COMMAND...");
  std::string attach_job;
  FollowOptions attach_options;
  bool attach_all = false;
  auto* attach = app.add_subcommand(
      "attach", "show a running hpcq run job's output from now on (--all: from its start)");
  attach->add_option("job", attach_job, "job id")->required();
  attach->add_flag("--all", attach_all, "from the start of the output hpcqd holds");
  attach->add_flag("-l,--label", attach_options.label, "prefix each line with its task rank");
  attach->add_flag("--json", json, "refused: attach prints the job's output as it comes");
  std::string signal_job, signal_name;
  auto* signal_cmd = app.add_subcommand("signal", "send a signal to every task of a running job");
  signal_cmd->add_option("job", signal_job, "job id")->required();
  signal_cmd
      ->add_option("signal", signal_name, "HUP INT QUIT KILL USR1 USR2 ALRM TERM CONT, or a number")
      ->required();
  signal_cmd->add_flag("--json", json, "machine-readable output");
  auto* cancel = app.add_subcommand("cancel", "cancel jobs, or steps (JOB.STEP)");
  cancel->add_option("jobs", ids, "job ids: JOB or JOB.STEP")->required();
  cancel->add_flag("--json", json, "machine-readable output");
  auto* status = app.add_subcommand("status", "show jobs, or steps (JOB.STEP), in detail");
  status->add_option("jobs", ids, "job ids: JOB or JOB.STEP")->required();
  status->add_flag("--json", json, "machine-readable output");
  auto* wait = app.add_subcommand("wait", "wait for jobs to end; exit 0 only if all COMPLETED");
  wait->add_option("jobs", ids, "job ids")->required();
  wait->add_flag("--json", json, "machine-readable output");
  bool all = false;
  auto* queue = app.add_subcommand("queue", "list pending and running jobs");
  queue->add_flag("-a,--all", all, "include ended jobs");
  queue->add_flag("--json", json, "machine-readable output");
  auto* nodes = app.add_subcommand("nodes", "list the cluster's nodes");
  nodes->add_flag("--json", json, "machine-readable output");
  auto* queues = app.add_subcommand("queues", "each queue's nodes, cores and jobs, like sinfo");
  queues->add_flag("--json", json, "machine-readable output");
  auto* leaders = app.add_subcommand("leaders", "the hpcqd leader candidates and which one leads");
  leaders->add_flag("--json", json, "machine-readable output");
  auto* hold = app.add_subcommand("hold", "keep pending jobs from starting");
  hold->add_option("jobs", ids, "job ids")->required();
  hold->add_flag("--json", json, "machine-readable output");
  auto* release = app.add_subcommand("release", "let held jobs start again");
  release->add_option("jobs", ids, "job ids")->required();
  release->add_flag("--json", json, "machine-readable output");
  std::string checkpoint_job;
  std::string checkpoint_to;
  std::string then = "continue";
  auto* checkpoint = app.add_subcommand(
      "checkpoint", "dump a running job (CRIU); it runs on, or is requeued to be restored");
  checkpoint->add_option("job", checkpoint_job, "job id")->required();
  checkpoint->add_option("--then", then, "continue (default), requeue or stop (requeued and held)")
      ->check(CLI::IsMember({"continue", "requeue", "stop"}));
  checkpoint->add_flag("--json", json, "machine-readable output");
  checkpoint->add_option("--to", checkpoint_to,
                         "requeue/stop: restore only on these nodes (comma-separated names)");
  auto* migrate = app.add_subcommand("migrate",
                                     "checkpoint a running job and restore it on other nodes "
                                     "(--to: these; else any that fit now)");
  migrate->add_option("job", checkpoint_job, "job id")->required();
  migrate->add_option("--to", checkpoint_to, "restore only on these nodes (comma-separated names)");
  migrate->add_flag("--json", json, "machine-readable output");
  std::string resize_job;
  int resize_nodes = 0;
  auto* resize = app.add_subcommand(
      "resize", "shrink or expand a running elastic job within its node range (its owner or root)");
  resize->add_option("job", resize_job, "job id")->required();
  resize->add_option("-N,--nodes", resize_nodes, "the node count wanted")->required();
  resize->add_flag("--json", json, "machine-readable output");
  std::vector<std::string> node_names;
  std::string reason;
  auto* drain = app.add_subcommand("drain", "give nodes no new work (root)");
  drain->add_option("nodes", node_names, "node names or lists: node[1-4]")->required();
  drain->add_option("--reason", reason, "why (shown by hpcq nodes)");
  drain->add_flag("--json", json, "machine-readable output");
  auto* resume = app.add_subcommand("resume", "give drained nodes work again (root)");
  auto* requeue = app.add_subcommand(
      "requeue", "kill running jobs and queue them again, to run from the start");
  requeue->add_option("jobs", ids, "job ids")->required();
  requeue->add_flag("--json", json, "machine-readable output");
  std::string stat_job;
  auto* stat =
      app.add_subcommand("stat", "what a running job or step uses now on each node, like sstat");
  stat->add_option("job", stat_job, "JOB or JOB.STEP")->required();
  stat->add_flag("--json", json, "machine-readable output");
  std::string update_job, update_time, update_begin;
  auto* update = app.add_subcommand(
      "update", "change a job: --time-limit (lower it; root: either way), a pending job's --begin");
  update->add_option("job", update_job, "job id")->required();
  update->add_option("-t,--time-limit", update_time, "the new limit (as submit's -t)");
  update->add_option("--begin", update_begin,
                     "not before WHEN: now, now+COUNT[seconds|minutes|hours|days|weeks], "
                     "now+DURATION or YYYY-MM-DD[THH:MM[:SS]] (at most 365 days ahead)");
  update->add_flag("--json", json, "machine-readable output");
  resume->add_option("nodes", node_names, "node names or lists: node[1-4]")->required();
  resume->add_flag("--json", json, "machine-readable output");
  HistoryFilter history_filter;
  auto* history = app.add_subcommand("history", "ended jobs, like sacct");
  history->add_option("-u,--user", history_filter.user, "only this user's jobs");
  history->add_flag("--steps", history_filter.steps, "a row per step of each job too (JOB.STEP)");
  history
      ->add_option("-s,--state", history_filter.states,
                   "only these states (COMPLETED, FAILED, ...)")
      ->delimiter(',');
  history->add_option("-S,--since", history_filter.since,
                      "ended at or after YYYY-MM-DD[THH:MM[:SS]]");
  history->add_option("-E,--until", history_filter.until, "ended before YYYY-MM-DD[THH:MM[:SS]]");
  history->add_flag("--json", json, "machine-readable output");
  std::string key_path;
  bool force = false;
  auto* keygen = app.add_subcommand("keygen", "write a CURVE key pair for the overlay");
  keygen->add_option("file", key_path, "key file to write (mode 0600)")->required();
  keygen->add_flag("--force", force, "replace an existing file");
  keygen->add_flag("--json", json, "machine-readable output");
  std::string hostlist;
  auto* hostnames = app.add_subcommand("hostnames", "expand a node list, one name per line");
  hostnames->add_option("list", hostlist, "e.g. node[1-4,7] (default: $HPCQ_NODELIST)");
  hostnames->add_flag("--json", json, "machine-readable output");
  ReserveOptions reserve_options;
  auto* reserve =
      app.add_subcommand("reserve", "advance reservations of nodes (create/delete: root)");
  reserve->require_subcommand(1);
  auto* reserve_create = reserve->add_subcommand("create", "reserve nodes for users or accounts");
  reserve_create->add_option("name", reserve_options.name, "reservation name")->required();
  reserve_create
      ->add_option("--nodes", reserve_options.nodes, "node names: NAME[,NAME...] or node[1-4]")
      ->required();
  reserve_create->add_option("--start", reserve_options.start,
                             "now, now+COUNT[seconds|minutes|hours|days|weeks], now+DURATION, "
                             "or YYYY-MM-DD[THH:MM[:SS]] (default now; at most 365 days ahead)");
  reserve_create
      ->add_option("--duration", reserve_options.duration, "how long (e.g. 2h, 1-00:00:00)")
      ->required();
  reserve_create->add_option("--users", reserve_options.users, "who may use it (names or uids)")
      ->delimiter(',');
  reserve_create->add_option("--accounts", reserve_options.accounts, "accounts that may use it")
      ->delimiter(',');
  reserve_create->add_flag("--json", json, "machine-readable output");
  std::string reservation_name;
  auto* reserve_delete = reserve->add_subcommand("delete", "delete a reservation");
  reserve_delete->add_option("name", reservation_name, "reservation name")->required();
  reserve_delete->add_flag("--json", json, "machine-readable output");
  auto* reserve_list = reserve->add_subcommand("list", "list current and future reservations");
  reserve_list->add_flag("--json", json, "machine-readable output");
  StartOptions start_options;
  auto* start = app.add_subcommand("start", "run a command inside a private local cluster");
  start->add_option("--agents", start_options.agents, "number of agents")->capture_default_str();
  start->add_option("--topology", start_options.topology, "hwloc synthetic topology of each agent")
      ->capture_default_str();
  start->add_option("--fanout", start_options.fanout, "tree fan-out")->capture_default_str();
  start->add_option("--node-down-after", start_options.node_down_after_s,
                    "seconds without a heartbeat before a node is declared down (default 5; 15 "
                    "with --leaders, longer than a takeover)");
  start->add_flag("--keep", start_options.keep, "keep the cluster's directory and logs");
  start->add_option("--log-level", start_options.log_level, "log level of the daemons");
  start
      ->add_option("--executor", start_options.executor,
                   "the agents' executor: process, or test (runs nothing; for benchmarks)")
      ->check(CLI::IsMember({"process", "test"}));
  start->add_option("--config", start_options.config_extra,
                    "a TOML file of [scheduler], [[queue]], [[account]]... sections to add");
  start->add_option("--features", start_options.features,
                    "NODELIST=FEATURE[,FEATURE...]: features of those nodes (repeatable)");
  start->add_option("--gres", start_options.gres,
                    "NODELIST=NAME[:COUNT][,...]: generic resources of those nodes (repeatable)");
  start
      ->add_option("--etcd", start_options.etcd_endpoints,
                   "HOST:PORT[,...]: keep hpcqd's state in this etcd 3.4 instead of SQLite")
      ->delimiter(',');
  start->add_option("--etcd-ca", start_options.etcd_ca, "with --etcd: the CA of its certificates");
  start->add_option("--etcd-cert", start_options.etcd_cert,
                    "with --etcd: hpcqd's client certificate (etcd runs with --client-cert-auth)");
  start->add_option("--etcd-key", start_options.etcd_key, "with --etcd: the key of --etcd-cert");
  start
      ->add_option("--leaders", start_options.leaders,
                   "hpcqd candidates: one leads, the others stand by (on etcd: --etcd, or an etcd "
                   "of this many members that hpcq start runs)")
      ->check(CLI::Range(1, 9))
      ->capture_default_str();
  start->add_option("--wait", start_options.wait_s, "seconds to wait for the agents to come up")
      ->capture_default_str();

  // `hpcq start [options] -- CMD ARGS...`: the command is everything after
  // the first "--", kept away from CLI11 (its options are not ours).
  std::vector<std::string> words(argv + 1, argv + argc);
  if (!words.empty() && words[0] == "start") {
    auto dashes = std::find(words.begin(), words.end(), "--");
    if (dashes != words.end()) {
      start_options.command.assign(dashes + 1, words.end());
      words.erase(dashes, words.end());
    }
  }
  const std::set<std::string> commands = {"submit",  "cancel", "status",    "wait",    "queue",
                                          "nodes",   "keygen", "start",     "hold",    "release",
                                          "drain",   "resume", "history",   "reserve", "checkpoint",
                                          "migrate", "resize", "attach",    "signal",  "requeue",
                                          "update",  "stat",   "hostnames", "queues",  "leaders"};
  if (!words.empty() && words[0][0] != '-' && !commands.count(words[0])) {
    std::fprintf(stderr, "hpcq: unknown command '%s' (see hpcq --help)\n", words[0].c_str());
    return 2;
  }
  std::reverse(words.begin(), words.end());  // CLI11 takes a reversed vector
  try {
    app.parse(words);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "hpcq: %s\n", e.what());
    return 2;
  }
  if (*cancel) return cmd_cancel(ids, json);
  if (*status) return cmd_status(ids, json);
  if (*attach) {
    if (json) {
      std::fprintf(stderr,
                   "hpcq: attach: --json is not supported: it prints the job's output as it comes "
                   "(hpcq status --json describes the job)\n");
      return 2;
    }
    attach_options.from_start = attach_all;
    return cmd_attach(attach_job, attach_options);
  }
  if (*signal_cmd) return cmd_signal(signal_job, signal_name, json);
  if (*requeue) return cmd_requeue(ids, json);
  if (*update) return cmd_update(update_job, update_time, update_begin, json);
  if (*stat) return cmd_stat(stat_job, json);
  if (*wait) return cmd_wait(ids, json);
  if (*queue) return cmd_queue(all, json);
  if (*nodes) return cmd_nodes(json);
  if (*queues) return cmd_queues(json);
  if (*leaders) return cmd_leaders(json);
  if (*keygen) return cmd_keygen(key_path, force, json);
  if (*hostnames) return cmd_hostnames(hostlist, json);
  if (*history) return cmd_history(history_filter, json);
  if (*hold) return cmd_hold(ids, json);
  if (*release) return cmd_release(ids, json);
  if (*checkpoint) return cmd_checkpoint(checkpoint_job, then, checkpoint_to, json);
  // Without --to, a migration goes to other nodes that can take the job now.
  if (*migrate) {
    return cmd_checkpoint(checkpoint_job, "requeue", checkpoint_to, json, checkpoint_to.empty());
  }
  if (*resize) return cmd_resize(resize_job, resize_nodes, json);
  if (*drain) return cmd_drain(node_names, /*drain=*/true, reason, json);
  if (*resume) return cmd_drain(node_names, /*drain=*/false, "", json);
  if (*start) return run_start(start_options);
  if (*reserve_create) return cmd_reserve_create(reserve_options, json);
  if (*reserve_delete) return cmd_reserve_delete(reservation_name, json);
  if (*reserve_list) return cmd_reserve_list(json);
  return 2;
}
