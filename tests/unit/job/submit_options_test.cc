#include "lib/job/submit_options.h"

#include <gtest/gtest.h>

#include <csignal>
#include <map>
#include <string>
#include <vector>

namespace hpcq::job {
namespace {

using Words = std::vector<std::string>;

// A submit directory with these files and this environment; no disk.
class Submit : public ::testing::Test {
 protected:
  Submit() {
    ctx_.cwd = "/home/u/work";
    ctx_.environment = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/u"}, {"LANG", "C"}};
    ctx_.read_file = [this](const std::string& path) -> Result<std::string> {
      ++reads_;
      auto it = files_.find(path);
      if (it == files_.end()) return not_found("cannot read " + path);
      return it->second;
    };
  }

  Result<SubmitOptions> parse(const Words& args) { return parse_submit_args(args, ctx_, kind_); }

  SubmitOptions ok(const Words& args) {
    auto r = parse(args);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return r.is_ok() ? std::move(r).value() : SubmitOptions{};
  }

  std::string error(const Words& args) {
    auto r = parse(args);
    EXPECT_FALSE(r.is_ok());
    if (r.is_ok()) return "";
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
    return r.status().message();
  }

  SubmitContext ctx_;
  std::map<std::string, std::string> files_;
  int reads_ = 0;
  SubmitKind kind_ = SubmitKind::kSubmit;
};

TEST_F(Submit, MpiIsTheSitesUnlessGivenAndADirectiveSetsIt) {
  EXPECT_EQ(ok({"./app"}).spec.mpi, "");  // the site's default (hpcq.toml, leader.mpi)
  EXPECT_EQ(ok({"--mpi", "none", "./app"}).spec.mpi, "none");
  EXPECT_EQ(ok({"--mpi=pmi1", "./app"}).spec.mpi, "pmi1");
  EXPECT_EQ(ok({"--mpi=pmi1,pmix", "./app"}).spec.mpi, "pmi1,pmix");
  EXPECT_EQ(ok({"--mpi", "pmix", "./app"}).spec.mpi, "pmix");
  files_["job.sh"] = "#!/bin/sh\n#HPCQ --mpi none\n./app\n";
  EXPECT_EQ(ok({"job.sh"}).spec.mpi, "none");
  EXPECT_EQ(ok({"--mpi", "pmi1", "job.sh"}).spec.mpi, "pmi1");  // the command line wins
}

TEST_F(Submit, CommandWithDefaults) {
  SubmitOptions o = ok({"hostname"});
  const JobSpec& s = o.spec;
  EXPECT_EQ(s.argv, Words{"hostname"});
  EXPECT_EQ(s.name, "hostname");
  EXPECT_TRUE(s.script.empty());
  EXPECT_EQ(s.request.nodes, 0);
  EXPECT_EQ(s.request.ntasks, 1);
  EXPECT_EQ(s.request.cpus_per_task, 1);
  EXPECT_EQ(s.request.mem_per_node_bytes, 0u);
  EXPECT_EQ(s.time_limit_s, 0);
  EXPECT_EQ(s.output, "hpcq-%j.out");
  EXPECT_EQ(s.error, "");
  EXPECT_EQ(s.queue, "");
  EXPECT_EQ(s.cwd, "/home/u/work");
  EXPECT_EQ(s.env, ctx_.environment);  // --export=ALL
  EXPECT_FALSE(s.requeue);
  EXPECT_FALSE(o.json);
  EXPECT_FALSE(o.wait);
}

TEST_F(Submit, BatchNeedsAScriptAndRunsItOnce) {
  kind_ = SubmitKind::kBatch;
  files_["job.sh"] = "#!/bin/sh\n#HPCQ -N 2\nsrun-like\n";
  SubmitOptions o = ok({"job.sh", "arg"});
  EXPECT_TRUE(o.spec.batch);
  EXPECT_FALSE(o.spec.forward_output);
  EXPECT_EQ(o.spec.request.nodes, 2);
  EXPECT_EQ(o.spec.output, "hpcq-%j.out");
  EXPECT_EQ(o.spec.argv, (Words{"job.sh", "arg"}));
  EXPECT_EQ(error({"hostname"}),
            "batch: 'hostname' is not a script (want a readable file starting with #!)");
  files_["plain.txt"] = "echo hi\n";
  EXPECT_NE(error({"plain.txt"}).find("is not a script"), std::string::npos);
  EXPECT_EQ(error({"-N", "2"}), "batch: no script given");
}

TEST_F(Submit, RunForwardsOutputAndNeverReadsAScript) {
  kind_ = SubmitKind::kRun;
  files_["job.sh"] = "#!/bin/sh\n#HPCQ -N 2\n";
  SubmitOptions o = ok({"-l", "-n", "4", "job.sh"});
  EXPECT_EQ(reads_, 0);
  EXPECT_TRUE(o.spec.forward_output);
  EXPECT_FALSE(o.spec.batch);
  EXPECT_TRUE(o.spec.script.empty());  // a command, whatever the file holds
  EXPECT_EQ(o.spec.request.nodes, 0);
  EXPECT_EQ(o.spec.output, "");
  EXPECT_TRUE(o.label);
  EXPECT_NE(error({"-o", "x", "true"}).find("--output"), std::string::npos);
  EXPECT_EQ(error({"--label"}), "run: no command given");
  kind_ = SubmitKind::kSubmit;
  EXPECT_EQ(error({"--label", "true"}), "--label: only hpcq run labels output lines");
}

TEST_F(Submit, SignalBeforeTheTimeLimit) {
  SubmitOptions o = ok({"--signal", "USR1@90", "-t", "10", "true"});
  EXPECT_EQ(o.spec.warn_signal, SIGUSR1);
  EXPECT_EQ(o.spec.warn_seconds, 90);
  o = ok({"--signal=SIGTERM", "true"});
  EXPECT_EQ(o.spec.warn_signal, SIGTERM);
  EXPECT_EQ(o.spec.warn_seconds, 60);  // sbatch's default
  EXPECT_NE(error({"--signal", "STOP", "true"}).find("--signal: signal: 'STOP'"),
            std::string::npos);
  EXPECT_EQ(error({"--signal", "USR1@0", "true"}),
            "--signal: want SIG[@SECONDS] with 1..65535 seconds, got 'USR1@0'");
  EXPECT_NE(error({"--signal", "USR1@", "true"}).find("1..65535"), std::string::npos);
}

TEST_F(Submit, BeginTimeIsReadAgainstTheSubmittersNow) {
  ctx_.now_us = 1'000 * kUsPerSecond;
  EXPECT_EQ(ok({"true"}).spec.begin_time_us, 0);
  EXPECT_EQ(ok({"--begin", "now+90", "true"}).spec.begin_time_us, 1'090 * kUsPerSecond);
  EXPECT_EQ(ok({"--begin=+1:00:00", "true"}).spec.begin_time_us, 4'600 * kUsPerSecond);
  EXPECT_EQ(ok({"--begin=now+2m", "true"}).spec.begin_time_us, 1'120 * kUsPerSecond);
  EXPECT_EQ(ok({"--begin", "now", "true"}).spec.begin_time_us, 1'000 * kUsPerSecond);
  files_["job.sh"] = "#!/bin/sh\n#HPCQ --begin now+60\ntrue\n";
  EXPECT_EQ(ok({"job.sh"}).spec.begin_time_us, 1'060 * kUsPerSecond);
  EXPECT_EQ(error({"--begin", "soon", "true"}),
            "--begin: bad time 'soon' (want now, now+DURATION or YYYY-MM-DD[THH:MM[:SS]])");
  EXPECT_EQ(error({"--begin", "now+0", "true"}),
            "--begin: bad offset '0' (want now+COUNT[seconds|minutes|hours|days|weeks], e.g. "
            "now+90, now+2hours, or now+DURATION as -t takes it, e.g. now+1:00:00)");
  EXPECT_EQ(ok({"--begin", "now+2hours", "true"}).spec.begin_time_us, 8'200 * kUsPerSecond);
  // A bare count is seconds (Slurm's default unit), never minutes, and does not overflow.
  EXPECT_EQ(error({"--begin", "now+99999999999", "true"}),
            "--begin: 'now+99999999999' is more than 365 days ahead");
  EXPECT_EQ(error({"--begin=", "true"}), "--begin: empty value");
  // An absolute time is bounded against the submitter's now.
  EXPECT_NE(error({"--begin", "2030-01-02T03:04", "true"}).find("is more than 365 days ahead"),
            std::string::npos);
  ctx_.now_us = std::int64_t{1'893'456'000} * kUsPerSecond;  // 2030-01-01
  EXPECT_GT(ok({"--begin", "2030-01-02T03:04", "true"}).spec.begin_time_us, ctx_.now_us);
}

TEST_F(Submit, HelpIsAskedAmongTheOptionsOnly) {
  EXPECT_TRUE(asks_for_help({"--help"}));
  EXPECT_TRUE(asks_for_help({"-h"}));
  EXPECT_TRUE(asks_for_help({"-N", "2", "--begin", "now", "--json", "--help", "job.sh"}));
  EXPECT_TRUE(asks_for_help({"--mem=4G", "-h"}));
  EXPECT_FALSE(asks_for_help({"grep", "--help"}));
  EXPECT_FALSE(asks_for_help({"--", "--help"}));
  EXPECT_FALSE(asks_for_help({"-J", "--help", "true"}));  // the job's name
  EXPECT_FALSE(asks_for_help({}));
  for (SubmitKind kind :
       {SubmitKind::kSubmit, SubmitKind::kBatch, SubmitKind::kRun, SubmitKind::kAlloc}) {
    const std::string help = submit_help(kind);
    EXPECT_TRUE(help.starts_with("usage: hpcq ")) << help;
    EXPECT_NE(help.find("--begin WHEN"), std::string::npos);
    EXPECT_NE(help.find("--help"), std::string::npos);
  }
  EXPECT_TRUE(submit_help(SubmitKind::kBatch).starts_with("usage: hpcq batch "));
  EXPECT_NE(submit_help(SubmitKind::kRun).find("--pty"), std::string::npos);
  EXPECT_EQ(submit_help(SubmitKind::kRun).find("--output"), std::string::npos);
}

TEST_F(Submit, AFileThatCannotBeAScriptIsRefusedNotRun) {
  ctx_.read_file = [](const std::string& path) -> Result<std::string> {
    if (path == "/dev/zero") {
      return Status(Code::kFailedPrecondition, "'/dev/zero' is not a regular file");
    }
    return not_found("cannot read " + path);
  };
  EXPECT_EQ(error({"/dev/zero"}), "submit: '/dev/zero' is not a regular file");
  kind_ = SubmitKind::kBatch;
  EXPECT_EQ(error({"/dev/zero"}), "batch: '/dev/zero' is not a regular file");
  kind_ = SubmitKind::kSubmit;
  EXPECT_EQ(ok({"hostname"}).spec.argv, Words{"hostname"});  // not found: a command
}

TEST_F(Submit, EveryOptionLongAndShort) {
  const Words short_form = {"-N",     "2",        "-n",       "8",       "-c",        "4",
                            "--mem",  "4G",       "-t",       "1:00:00", "-J",        "big",
                            "-o",     "o-%j",     "-e",       "e-%j",    "-q",        "batch",
                            "-D",     "/scratch", "--export", "NONE",    "--requeue", "--json",
                            "--wait", "./a.out",  "-c",       "x"};
  const Words long_form = {"--nodes=2",
                           "--ntasks=8",
                           "--cpus-per-task=4",
                           "--mem=4G",
                           "--time=1:00:00",
                           "--job-name=big",
                           "--output=o-%j",
                           "--error=e-%j",
                           "--queue=batch",
                           "--chdir=/scratch",
                           "--export=NONE",
                           "--requeue",
                           "--json",
                           "--wait",
                           "./a.out",
                           "-c",
                           "x"};
  const Words glued = {"-N2",        "-n8",      "-c4",    "--mem",     "4G",
                       "-t1:00:00",  "-Jbig",    "-oo-%j", "-ee-%j",    "-qbatch",
                       "-D/scratch", "--export", "NONE",   "--requeue", "--json",
                       "--wait",     "./a.out",  "-c",     "x"};
  for (const Words& args : {short_form, long_form, glued}) {
    SubmitOptions o = ok(args);
    const JobSpec& s = o.spec;
    EXPECT_EQ(s.request.nodes, 2);
    EXPECT_EQ(s.request.ntasks, 8);
    EXPECT_EQ(s.request.cpus_per_task, 4);
    EXPECT_EQ(s.request.mem_per_node_bytes, 4ull << 30);
    EXPECT_EQ(s.time_limit_s, 3600);
    EXPECT_EQ(s.name, "big");
    EXPECT_EQ(s.output, "o-%j");
    EXPECT_EQ(s.error, "e-%j");
    EXPECT_EQ(s.queue, "batch");
    EXPECT_EQ(s.cwd, "/scratch");
    EXPECT_TRUE(s.env.empty());
    EXPECT_TRUE(s.requeue);
    EXPECT_TRUE(o.json);
    EXPECT_TRUE(o.wait);
    // Options end at the command: its own -c is an argument.
    EXPECT_EQ(s.argv, (Words{"./a.out", "-c", "x"}));
    EXPECT_EQ(s.name, "big");
  }
}

TEST_F(Submit, SchedulingOptions) {
  auto o = parse({"-A", "physics", "--qos=high", "--priority", "-5", "-d", "afterok:3:4",
                  "--array=0-9%2", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.account, "physics");
  EXPECT_EQ(o->spec.qos, "high");
  EXPECT_EQ(o->spec.priority, -5);
  EXPECT_EQ(format_dependencies(o->spec.dependencies), "afterok:3:4");
  EXPECT_EQ(o->spec.array, "0-9%2");
  for (const Words& bad : {Words{"--priority", "x", "p"}, Words{"--priority", "99999999", "p"},
                           Words{"-d", "later:3", "p"}, Words{"--array", "5-1", "p"}}) {
    auto r = parse(bad);
    EXPECT_FALSE(r.is_ok()) << bad[0] << " " << bad[1];
  }
}

TEST_F(Submit, PlacementOptions) {
  auto o =
      parse({"-n", "4", "--gpus-per-task=1", "--mem-per-cpu", "2G", "-m", "cyclic:cyclic",
             "--cpu-bind=threads", "--numa-policy", "single-numa-node", "--oversubscribe", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  const resource::ResourceRequest& r = o->spec.request;
  EXPECT_EQ(r.gpus_per_task, 1);
  EXPECT_EQ(r.gpus_per_node, 0);
  EXPECT_EQ(r.mem_per_cpu_bytes, 2ULL << 30);
  EXPECT_EQ(r.node_distribution, resource::Distribution::kCyclic);
  EXPECT_EQ(r.core_distribution, resource::Distribution::kCyclic);
  EXPECT_EQ(r.cpu_bind, resource::CpuBind::kThreads);
  EXPECT_EQ(r.numa_policy, resource::NumaPolicy::kSingleNumaNode);
  EXPECT_TRUE(r.oversubscribe);

  // --exclusive is whole nodes (issue 47), no longer "not --oversubscribe".
  o = parse({"--gpus-per-node", "2", "-m", "cyclic", "--exclusive", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.request.gpus_per_node, 2);
  EXPECT_EQ(o->spec.request.node_distribution, resource::Distribution::kCyclic);
  EXPECT_EQ(o->spec.request.core_distribution, resource::Distribution::kBlock);
  EXPECT_FALSE(o->spec.request.oversubscribe);
  EXPECT_TRUE(o->spec.request.exclusive);
  EXPECT_FALSE(parse({"--oversubscribe", "--exclusive", "prog"}).is_ok()) << "both at once";
  // The command line's choice wins over a directive's.
  files_["both.sh"] = "#!/bin/sh\n#HPCQ --oversubscribe\ntrue\n";
  o = parse({"--exclusive", "both.sh"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_TRUE(o->spec.request.exclusive);
  EXPECT_FALSE(o->spec.request.oversubscribe);

  o = parse({"-n", "8", "--profile", "network", "--workers", "2", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.profile, "network");
  EXPECT_EQ(o->spec.workers, 2);

  o = parse({"--image", "images/busybox", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.image, ctx_.cwd + "/images/busybox");  // relative to the submit dir
  o = parse({"--checkpoint-interval", "10m", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.checkpoint_interval_s, 600);
  o = parse({"--image", "/srv/img", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.image, "/srv/img");
  o = parse({"-w", "n1,n3", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.nodelist, (std::vector<std::string>{"n1", "n3"}));
  o = parse({"--nodelist=node[1-2,4]", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.nodelist, (std::vector<std::string>{"node1", "node2", "node4"}));
  o = parse({"-x", "node[2-3]", "--exclude=gpu1", "prog"});  // the last one given counts
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.exclude, (std::vector<std::string>{"gpu1"}));
  o = parse({"-x", "node[2-3]", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.exclude, (std::vector<std::string>{"node2", "node3"}));
  EXPECT_EQ(parse({"-x", "n[1-", "prog"}).status().message().substr(0, 30),
            "--exclude: bad node list 'n[1-");
  o = parse({"-C", "a100&ib|v100", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.constraint, "a100&ib|v100");
  EXPECT_EQ(parse({"--constraint=a100&", "prog"}).status().message(),
            "-C/--constraint 'a100&': an empty feature name");

  // --ntasks-per-node: with -N, that many per node; with -n alone, the nodes
  // the tasks need; with both, a maximum.
  o = parse({"-N", "3", "--ntasks-per-node", "4", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.request.nodes, 3);
  EXPECT_EQ(o->spec.request.ntasks, 12);
  EXPECT_EQ(o->spec.ntasks_per_node, 4);
  o = parse({"-n", "5", "--ntasks-per-node=2", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.request.nodes, 3);
  EXPECT_EQ(o->spec.request.ntasks, 5);
  o = parse({"--ntasks-per-node", "2", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.request.nodes, 1);
  EXPECT_EQ(o->spec.request.ntasks, 2);
  EXPECT_EQ(parse({"-N", "2", "-n", "5", "--ntasks-per-node", "2", "prog"}).status().message(),
            "--ntasks-per-node: 5 tasks on 2 nodes are more than 2 per node");
  EXPECT_FALSE(parse({"--ntasks-per-node", "0", "prog"}).is_ok());

  o = parse({"-L", "matlab:2,fluent", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.licenses, (std::map<std::string, int>{{"fluent", 1}, {"matlab", 2}}));
  EXPECT_EQ(parse({"--licenses=matlab:x", "prog"}).status().message(),
            "-L/--licenses 'matlab:x': bad count 'x' for 'matlab' (want 1..1000000)");
  EXPECT_EQ(parse({"-L", "a,,b", "prog"}).status().message(),
            "-L/--licenses 'a,,b': bad license name ''");

  o = parse({"--gres", "nvme:2,fpga", "prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.request.gres, (std::map<std::string, int>{{"fpga", 1}, {"nvme", 2}}));
  EXPECT_EQ(parse({"--gres=nvme:0", "prog"}).status().message(),
            "--gres 'nvme:0': bad count '0' for 'nvme' (want 1..1000000)");
  EXPECT_EQ(parse({"--gres", "gpu:1", "prog"}).status().message(),
            "--gres: GPUs are not gres here: ask with --gpus-per-node or --gpus-per-task");
  EXPECT_EQ(parse({"--gres", "nvme,nvme:2", "prog"}).status().message(),
            "--gres 'nvme,nvme:2': 'nvme' given twice");

  o = parse({"prog"});
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->spec.profile, "");
  EXPECT_EQ(o->spec.image, "");
  EXPECT_EQ(o->spec.request.cpu_bind, resource::CpuBind::kCores);
  EXPECT_EQ(o->spec.request.numa_policy, resource::NumaPolicy::kBestEffort);
}

TEST_F(Submit, DoubleDashEndsOptions) {
  SubmitOptions o = ok({"-J", "fails", "--", "sh", "-c", "exit 3"});
  EXPECT_EQ(o.spec.argv, (Words{"sh", "-c", "exit 3"}));
  EXPECT_EQ(o.spec.name, "fails");
  o = ok({"--", "-weird-command", "--mem=1"});
  EXPECT_EQ(o.spec.argv, (Words{"-weird-command", "--mem=1"}));
  EXPECT_EQ(o.spec.request.mem_per_node_bytes, 0u);
  EXPECT_EQ(ok({"true", "-N"}).spec.argv, (Words{"true", "-N"}));
}

TEST_F(Submit, NameIsTheBasenameOfTheCommand) {
  EXPECT_EQ(ok({"/usr/bin/env", "true"}).spec.name, "env");
  EXPECT_EQ(ok({"-J", "", "./bin/app"}).spec.name, "app");  // empty -J: the default
}

TEST_F(Submit, NtasksDefaultsToNodes) {
  EXPECT_EQ(ok({"-N", "3", "true"}).spec.request.ntasks, 3);
  EXPECT_EQ(ok({"-N", "3", "-n", "7", "true"}).spec.request.ntasks, 7);
  EXPECT_EQ(ok({"-n", "7", "true"}).spec.request.nodes, 0);
}

// -N 0 ran on one node: an explicit 0 is a mistake, not "as few as fit".
TEST_F(Submit, ExplicitZeroNodesIsRefused) {
  EXPECT_EQ(error({"-N", "0", "true"}), "--nodes: must be at least 1, got '0'");
}

TEST_F(Submit, NodeRanges) {
  SubmitOptions o = ok({"-N", "1-4", "--elastic", "--priority=-2", "prog"});
  EXPECT_EQ(o.spec.request.nodes, 1);
  EXPECT_EQ(o.spec.max_nodes, 4);
  EXPECT_EQ(o.spec.request.ntasks, 1);  // per node: ntasks / MIN
  EXPECT_TRUE(o.spec.elastic);
  EXPECT_EQ(o.spec.priority, -2);
  // Moldable: a range without --elastic.
  o = ok({"--nodes=2-8", "-n", "4", "prog"});
  EXPECT_EQ(o.spec.request.nodes, 2);
  EXPECT_EQ(o.spec.max_nodes, 8);
  EXPECT_EQ(o.spec.request.ntasks, 4);
  EXPECT_FALSE(o.spec.elastic);
  // MIN-MIN is no range; a later plain -N drops an earlier range.
  EXPECT_EQ(ok({"-N", "3-3", "prog"}).spec.max_nodes, 0);
  o = ok({"-N", "1-4", "-N", "2", "prog"});
  EXPECT_EQ(o.spec.request.nodes, 2);
  EXPECT_EQ(o.spec.max_nodes, 0);
  EXPECT_FALSE(ok({"-N", "1-4", "--elastic", "--no-elastic", "prog"}).spec.elastic);

  EXPECT_EQ(error({"-N", "4-2", "prog"}), "--nodes: range '4-2' has MIN > MAX");
  EXPECT_EQ(error({"-N", "0-4", "prog"}), "--nodes: range '0-4' must have MIN and MAX >= 1");
  EXPECT_EQ(error({"-N", "1-", "prog"}), "--nodes: bad range '1-' (want MIN-MAX)");
  EXPECT_EQ(error({"-N", "a-3", "prog"}), "--nodes: bad range 'a-3' (want MIN-MAX)");
  EXPECT_EQ(error({"-N", "1-2-3", "prog"}), "--nodes: bad range '1-2-3' (want MIN-MAX)");
  EXPECT_EQ(error({"--elastic", "prog"}),
            "--elastic: needs a node range (-N MIN-MAX with MIN < MAX)");
  EXPECT_EQ(error({"-N", "2", "--elastic", "prog"}),
            "--elastic: needs a node range (-N MIN-MAX with MIN < MAX)");
  EXPECT_NE(error({"-N", "2-4", "-n", "3", "prog"}).find("do not divide"), std::string::npos);
  EXPECT_NE(error({"-n", "1-4", "prog"}).find("--ntasks: a task range '1-4' is not supported"),
            std::string::npos);
  EXPECT_NE(error({"-N", "1-4", "-a", "0-3", "prog"}).find("array"), std::string::npos);
}

TEST_F(Submit, NodeRangeDirectives) {
  files_["job.sh"] =
      "#!/bin/sh\n"
      "#HPCQ -N 2-6 --elastic\n"
      "#HPCQ --priority -1\n"
      "run\n";
  SubmitOptions o = ok({"job.sh"});
  EXPECT_EQ(o.spec.request.nodes, 2);
  EXPECT_EQ(o.spec.max_nodes, 6);
  EXPECT_TRUE(o.spec.elastic);
  EXPECT_EQ(o.spec.priority, -1);
  // The command line overrides a directive's range.
  o = ok({"-N", "1-3", "job.sh"});
  EXPECT_EQ(o.spec.request.nodes, 1);
  EXPECT_EQ(o.spec.max_nodes, 3);
  files_["bad.sh"] = "#!/bin/sh\n#HPCQ -N 3-1\nrun\n";
  EXPECT_EQ(error({"bad.sh"}), "bad.sh:2: --nodes: range '3-1' has MIN > MAX");
}

TEST_F(Submit, LastOccurrenceWins) {
  SubmitOptions o = ok({"-N", "1", "--nodes=2", "-N3", "-J", "a", "-J", "b", "true"});
  EXPECT_EQ(o.spec.request.nodes, 3);
  EXPECT_EQ(o.spec.name, "b");
  EXPECT_TRUE(ok({"--no-requeue", "--requeue", "true"}).spec.requeue);
  EXPECT_FALSE(ok({"--requeue", "--no-requeue", "true"}).spec.requeue);
}

TEST_F(Submit, ChdirIsResolvedAgainstTheSubmitDirectory) {
  EXPECT_EQ(ok({"-D", "out", "true"}).spec.cwd, "/home/u/work/out");
  EXPECT_EQ(ok({"-D", "../x/./y/", "true"}).spec.cwd, "/home/u/x/y");
  EXPECT_EQ(ok({"-D", "/", "true"}).spec.cwd, "/");
  EXPECT_EQ(ok({"-D", ".", "true"}).spec.cwd, "/home/u/work");
}

TEST_F(Submit, TimeForms) {
  EXPECT_EQ(ok({"-t", "0:02", "true"}).spec.time_limit_s, 2);
  EXPECT_EQ(ok({"-t", "10", "true"}).spec.time_limit_s, 600);
  EXPECT_EQ(ok({"--time=1.5h", "true"}).spec.time_limit_s, 5400);
  EXPECT_EQ(ok({"-t", "2-00", "true"}).spec.time_limit_s, 2 * 86400);
  EXPECT_EQ(ok({"-t", "UNLIMITED", "true"}).spec.time_limit_s, JobSpec::kUnlimited);
}

TEST_F(Submit, ExportForms) {
  using Env = std::map<std::string, std::string>;
  EXPECT_EQ(ok({"--export=ALL", "true"}).spec.env, ctx_.environment);
  EXPECT_EQ(ok({"--export=NONE", "true"}).spec.env, Env{});
  // A list: only those (a name the submitter lacks is not set), plus assignments.
  EXPECT_EQ(ok({"--export=PATH,X=1,MISSING", "true"}).spec.env,
            (Env{{"PATH", "/usr/bin:/bin"}, {"X", "1"}}));
  EXPECT_EQ(ok({"--export", "HOME=/elsewhere", "true"}).spec.env, (Env{{"HOME", "/elsewhere"}}));
  EXPECT_EQ(ok({"--export=X=a=b", "true"}).spec.env, (Env{{"X", "a=b"}}));
  EXPECT_EQ(ok({"--export=EMPTY=", "true"}).spec.env, (Env{{"EMPTY", ""}}));
  Env all_plus = ctx_.environment;
  all_plus["X"] = "1";
  all_plus["LANG"] = "fr_FR";
  EXPECT_EQ(ok({"--export=ALL,X=1,LANG=fr_FR", "true"}).spec.env, all_plus);
  EXPECT_EQ(ok({"--export=X=1,ALL", "true"}).spec.env.at("X"), "1");
}

// The submitter's umask goes with the job whatever --export says (Slurm's
// SLURM_UMASK); without one known, nothing is set.
TEST_F(Submit, TheSubmittersUmaskIsCarriedAsHpcqUmask) {
  EXPECT_EQ(ok({"true"}).spec.env.count("HPCQ_UMASK"), 0u);
  ctx_.umask = 077;
  EXPECT_EQ(ok({"true"}).spec.env.at("HPCQ_UMASK"), "0077");
  EXPECT_EQ(ok({"--export=NONE", "true"}).spec.env,
            (std::map<std::string, std::string>{{"HPCQ_UMASK", "0077"}}));
  ctx_.umask = 02;
  EXPECT_EQ(ok({"true"}).spec.env.at("HPCQ_UMASK"), "0002");
}

TEST_F(Submit, ScriptDirectivesThenCommandLineOverrides) {
  files_["job.sh"] =
      "#!/bin/bash\n"
      "# a comment\n"
      "\n"
      "#HPCQ -N 2\n"
      "#HPCQ --ntasks=4 -c 2   # two cores each\n"
      "#HPCQ -J \"my job\" -t 5:00\n"
      "#HPCQ -o 'out-%j.txt' --mem 1G\n"
      "#HPCQ --requeue\n"
      "   \t\n"
      "echo hello\n"
      "#HPCQ -N 9\n";  // after the first command: a plain comment
  SubmitOptions o = ok({"-n", "6", "--no-requeue", "job.sh", "arg1", "-N", "5"});
  const JobSpec& s = o.spec;
  EXPECT_EQ(s.script, files_["job.sh"]);
  EXPECT_EQ(s.argv, (Words{"job.sh", "arg1", "-N", "5"}));
  EXPECT_EQ(s.request.nodes, 2);
  EXPECT_EQ(s.request.ntasks, 6);  // the command line wins
  EXPECT_EQ(s.request.cpus_per_task, 2);
  EXPECT_EQ(s.request.mem_per_node_bytes, 1ull << 30);
  EXPECT_EQ(s.name, "my job");
  EXPECT_EQ(s.time_limit_s, 300);
  EXPECT_EQ(s.output, "out-%j.txt");
  EXPECT_FALSE(s.requeue);
}

TEST_F(Submit, ScriptNtasksDefaultUsesMergedNodes) {
  files_["n.sh"] = "#!/bin/sh\n#HPCQ -N 3\ntrue\n";
  EXPECT_EQ(ok({"n.sh"}).spec.request.ntasks, 3);
  EXPECT_EQ(ok({"-N", "4", "n.sh"}).spec.request.ntasks, 4);
  EXPECT_EQ(ok({"-n", "5", "n.sh"}).spec.request.ntasks, 5);
}

TEST_F(Submit, ScriptNameAndPath) {
  files_["scripts/run.sh"] = "#!/bin/sh\r\n#HPCQ -n 2\r\nhostname\r\n";  // CRLF too
  SubmitOptions o = ok({"--", "scripts/run.sh"});
  EXPECT_EQ(o.spec.name, "run.sh");
  EXPECT_EQ(o.spec.argv, Words{"scripts/run.sh"});
  EXPECT_EQ(o.spec.request.ntasks, 2);
  EXPECT_FALSE(o.spec.script.empty());
}

TEST_F(Submit, AFileWithoutShebangIsACommand) {
  files_["a.out"] = std::string(
      "\x7f"
      "ELF\x02\x01",
      6);
  files_["notes"] = "#HPCQ -N 9\n";
  SubmitOptions o = ok({"a.out"});
  EXPECT_TRUE(o.spec.script.empty());
  EXPECT_EQ(o.spec.argv, Words{"a.out"});
  o = ok({"notes"});
  EXPECT_TRUE(o.spec.script.empty());
  EXPECT_EQ(o.spec.request.nodes, 0);
}

TEST_F(Submit, NoReadFileMeansCommands) {
  ctx_.read_file = nullptr;
  EXPECT_EQ(ok({"job.sh"}).spec.argv, Words{"job.sh"});
}

TEST_F(Submit, ScriptDirectiveErrorsNameTheLine) {
  files_["unknown_directive.sh"] = "#!/bin/sh\n#HPCQ -N 1\n#HPCQ --frobnicate\ntrue\n";
  EXPECT_EQ(error({"unknown_directive.sh"}),
            "unknown_directive.sh:3: unknown option '--frobnicate'");
  files_["bad_mem.sh"] = "#!/bin/sh\n#HPCQ --mem=lots\ntrue\n";
  EXPECT_EQ(error({"bad_mem.sh"}), "bad_mem.sh:2: --mem: bad size 'lots'");
  files_["bad_time.sh"] = "#!/bin/sh\n#HPCQ -t 1:2:3:4\ntrue\n";
  EXPECT_EQ(error({"bad_time.sh"}), "bad_time.sh:2: --time: bad duration '1:2:3:4'");
  files_["bad_quote.sh"] = "#!/bin/sh\n#HPCQ -J \"unterminated\ntrue\n";
  EXPECT_EQ(error({"bad_quote.sh"}), "bad_quote.sh:2: unterminated \" quote");
  files_["bad_nodes.sh"] = "#!/bin/sh\n\n#HPCQ -N many\ntrue\n";
  EXPECT_EQ(error({"bad_nodes.sh"}), "bad_nodes.sh:3: --nodes: bad count 'many'");
  files_["positional.sh"] = "#!/bin/sh\n#HPCQ -N 1 extra\n";
  EXPECT_EQ(error({"positional.sh"}),
            "positional.sh:2: unexpected argument 'extra' (directives take options only)");
  files_["split.sh"] = "#!/bin/sh\n#HPCQ -N\n#HPCQ 2\n";
  EXPECT_EQ(error({"split.sh"}), "split.sh:2: --nodes: missing value");
  files_["odd\nname.sh"] = "#!/bin/sh\n#HPCQ --bad\n";
  EXPECT_EQ(error({"odd\nname.sh"}), "'odd\\x0aname.sh':2: unknown option '--bad'");
  // Validation after merging names the option, not a line.
  files_["nodes.sh"] = "#!/bin/sh\n#HPCQ -N 3 -n 2\n";
  EXPECT_NE(error({"nodes.sh"}).find("--nodes"), std::string::npos);
}

TEST_F(Submit, CommandLineErrorsComeBeforeTheScriptIsRead) {
  files_["job.sh"] = "#!/bin/sh\n#HPCQ --frobnicate\n";
  EXPECT_EQ(error({"--mem", "lots", "job.sh"}), "--mem: bad size 'lots'");
  EXPECT_EQ(reads_, 0);
}

struct DirectiveCase {
  const char* text;
  Words words;
};

class Directives : public ::testing::TestWithParam<DirectiveCase> {};

TEST_P(Directives, Splits) {
  auto r = parse_directives(GetParam().text, "job.sh");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(*r, GetParam().words) << GetParam().text;
}

INSTANTIATE_TEST_SUITE_P(
    Submit, Directives,
    ::testing::Values(
        DirectiveCase{"", {}}, DirectiveCase{"#!/bin/sh\n", {}},
        DirectiveCase{"#!/bin/sh\n#HPCQ -N 2\n#HPCQ\t-n\t4\n", {"-N", "2", "-n", "4"}},
        DirectiveCase{"#HPCQ -N 2\n", {"-N", "2"}},                    // no shebang: from line 1
        DirectiveCase{"#!/bin/sh\n#HPCQ\n#HPCQ -J x\n", {"-J", "x"}},  // an empty directive
        DirectiveCase{"#!/bin/sh\n#HPCQ -J 'a b' -o \"c d\" -e e\\ f\n",
                      {"-J", "a b", "-o", "c d", "-e", "e f"}},
        DirectiveCase{"#HPCQ -J 'it''s' -o \"q\\\"\\\\\\n\" -e ''\n",
                      {"-J", "its", "-o", "q\"\\\\n", "-e", ""}},
        DirectiveCase{"#HPCQ -J a#b # comment 'unterminated\n", {"-J", "a#b"}},
        DirectiveCase{"#HPCQ -J '#x'\n", {"-J", "#x"}},
        DirectiveCase{"#!/bin/sh\n\n  \n# plain comment\n#SBATCH -N 5\n#HPCQ -N 2\n", {"-N", "2"}},
        DirectiveCase{"#!/bin/sh\nset -e\n#HPCQ -N 2\n", {}},  // stops at the first command
        DirectiveCase{"#!/bin/sh\n#HPCQX -N 2\n#HPCQ-N 3\n #HPCQ -N 4\n", {}},  // not directives
        DirectiveCase{"#!/bin/sh\r\n#HPCQ -N 2\r\n", {"-N", "2"}}));

TEST(DirectiveErrors, NameScriptAndLine) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"#!/bin/sh\n#HPCQ -J 'open\n", "run.sh:2: unterminated ' quote"},
      {"#!/bin/sh\n\n#HPCQ -J \"open\n", "run.sh:3: unterminated \" quote"},
      {"#HPCQ -J x\\\n", "run.sh:1: backslash at the end of the line"},
      // Issue 47 item 3: a Slurm script is not run as if it asked for nothing.
      {"#!/bin/sh\n# a Slurm job\n#SBATCH -N 2\n#SBATCH -p big\nsrun hostname\n",
       "run.sh:3: #SBATCH lines are not read by hpcq: write its options as #HPCQ lines "
       "(docs/user-guide.md)"},
  };
  for (const auto& c : cases) {
    auto r = parse_directives(c.text, "run.sh");
    ASSERT_FALSE(r.is_ok()) << c.text;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.message);
  }
}

struct BadArgs {
  Words args;
  const char* message;  // exact
};

class SubmitBad : public Submit, public ::testing::WithParamInterface<BadArgs> {};

TEST_P(SubmitBad, OneLineNamingTheOptionAndValue) {
  EXPECT_EQ(error(GetParam().args), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Submit, SubmitBad,
    ::testing::Values(
        BadArgs{{}, "submit: no command or script given"},
        BadArgs{{"-N", "2"}, "submit: no command or script given"},
        BadArgs{{"--"}, "submit: no command or script given"},
        BadArgs{{"--mem", "lots", "true"}, "--mem: bad size 'lots'"},
        BadArgs{{"--mem=-1", "true"}, "--mem: bad size '-1'"},
        BadArgs{{"--mem=99999999999T", "true"}, "--mem: size '99999999999T' is too large"},
        BadArgs{{"--frobnicate", "true"}, "unknown option '--frobnicate'"},
        BadArgs{{"--frobnicate=3", "true"}, "unknown option '--frobnicate'"},
        BadArgs{{"-Y", "true"}, "unknown option '-Y'"},
        BadArgs{{"-N", "1", "--frobnicate", "--", "true"}, "unknown option '--frobnicate'"},
        BadArgs{{"-t", "-5", "true"}, "--time: bad duration '-5'"},
        BadArgs{{"-t", "0", "true"},
                "--time: bad duration '0': must be more than 0 (UNLIMITED for no limit)"},
        BadArgs{{"-n", "0", "true"}, "--ntasks: must be 1..1000000, got 0"},
        BadArgs{{"-n", "-1", "true"}, "--ntasks: bad count '-1'"},
        BadArgs{{"-N", "3", "-n", "2", "true"},
                "--nodes: 3 nodes for 2 tasks (every node runs at least one task)"},
        BadArgs{{"-N", "many", "true"}, "--nodes: bad count 'many'"},
        // Found by the fuzzer: a value holding a newline is shown escaped.
        BadArgs{{"-m", "a\nb", "true"},
                "--distribution: unknown distribution 'a\\x0ab' "
                "(want block or cyclic, optionally :block or :cyclic)"},
        BadArgs{{"--cpu-bind", "a\nb", "true"},
                "--cpu-bind: unknown binding 'a\\x0ab' (want cores, threads or none)"},
        BadArgs{{"--numa-policy", "a\nb", "true"},
                "--numa-policy: unknown policy 'a\\x0ab' "
                "(want best-effort, single-numa-node or none)"},
        BadArgs{{"-N", "99999999999", "true"}, "--nodes: bad count '99999999999'"},
        BadArgs{{"-c", "x", "true"}, "--cpus-per-task: bad count 'x'"},
        BadArgs{{"-c", "0", "true"}, "--cpus-per-task: must be 1..4096, got 0"},
        BadArgs{{"-N"}, "--nodes: missing value"},
        BadArgs{{"--mem=", "true"}, "--mem: empty value"},
        BadArgs{{"-J", "x", "--job-name=", "true"}, "--job-name: empty value"},
        BadArgs{{"-o", "", "true"}, "--output: empty file name"},
        BadArgs{{"-D", "", "true"}, "--chdir: empty directory"},
        BadArgs{{"-J", "a\nb", "true"}, "--job-name: control character in 'a\\x0ab'"},
        BadArgs{{"--export=", "true"}, "--export: empty value"},
        BadArgs{{"--export", "A,,B", "true"},
                "--export: bad list 'A,,B' (ALL, NONE, or [ALL,]VAR[=value],...)"},
        BadArgs{{"--export", "NONE,A=1", "true"},
                "--export: bad list 'NONE,A=1' (ALL, NONE, or [ALL,]VAR[=value],...)"},
        BadArgs{{"--export", "=1", "true"}, "--export: bad variable name in '=1'"},
        BadArgs{{"--requeue=maybe", "true"}, "--requeue: bad value 'maybe'"},
        BadArgs{
            {"--help"},
            "submit: usage: hpcq submit [-N NODES|MIN-MAX] [--elastic] [-n NTASKS] [-c CPUS] "
            "[--mem SIZE] [-t TIME] "
            "[-J NAME] [-o FILE] [-e FILE] [-q QUEUE] [-A ACCOUNT] [--qos QOS] [--priority N] "
            "[-d TYPE:ID[,...]] [-a INDICES[%MAX]] [-D DIR] [--export VARS] [--requeue] "
            "[--gpus-per-node N] [--gpus-per-task N] [--mem-per-cpu SIZE] [-m DIST[:DIST]] "
            "[--cpu-bind cores|threads|none] [--numa-policy POLICY] [--oversubscribe] "
            "[--exclusive] "
            "[--profile cpu|memory|network] [--workers N] [--image DIR] [--checkpoint-interval "
            "TIME] [--deadline WHEN] [--signal [B:]SIG[@SECONDS]] [--mpi pmi1|pmix|pmi1,pmix|none] "
            "[-w NODELIST] [-x "
            "NODELIST] "
            "[-C FEATURES] [--ntasks-per-node N] [-L NAME[:N],...] [--gres NAME[:N],...] [--json] "
            "[--wait] [--] COMMAND|SCRIPT [ARGS...]"},
        BadArgs{{"--mpi", "openmpi", "true"},
                "--mpi: want pmi1, pmix, pmi1,pmix or none, got 'openmpi'"},
        // The fuzzer's find: a value with a newline made a two-line message.
        BadArgs{{"--mpi", "pm\ni1", "true"},
                "--mpi: want pmi1, pmix, pmi1,pmix or none, got 'pm\\x0ai1'"},
        BadArgs{{"--mpi", "pmi2", "true"},
                "--mpi pmi2: not served; hpcq serves pmi1 (MPICH and its kin; PMI-2 on the same "
                "socket), pmix (Open MPI), both (pmi1,pmix) or none"},
        BadArgs{{"-w", "n1,,n2", "true"},
                "--nodelist: bad node list 'n1,,n2': an empty name (want NAME[,NAME...], or a "
                "hostlist: node[1-4,7])"},
        BadArgs{{"--profile", "gpu", "true"},
                "--profile: unknown profile 'gpu' (want cpu, memory or network)"},
        BadArgs{{"-n", "2", "--profile", "cpu", "--workers", "3", "true"},
                "--workers: must be 0..2 (at most one worker per task), got 3"},
        BadArgs{{"--workers", "1", "true"},
                "--workers: give --profile too (workers are how a profiled job is cut)"},
        BadArgs{{"--gpus-per-task", "x", "true"}, "--gpus-per-task: bad count 'x'"},
        BadArgs{{"--gpus-per-node", "2", "--gpus-per-task", "1", "true"},
                "--gpus-per-node and --gpus-per-task: give one, not both"},
        BadArgs{{"--gpus-per-node", "5000", "true"},
                "--gpus-per-node/--gpus-per-task: must be 0..1024"},
        BadArgs{{"--mem", "1G", "--mem-per-cpu", "1G", "true"},
                "--mem and --mem-per-cpu: give one, not both"},
        BadArgs{{"-m", "plane", "true"},
                "--distribution: unknown distribution 'plane' (want block or cyclic, optionally "
                ":block or :cyclic)"},
        BadArgs{{"--distribution=block:fcyclic", "true"},
                "--distribution: unknown distribution 'block:fcyclic' (want block or cyclic, "
                "optionally :block or :cyclic)"},
        BadArgs{{"--cpu-bind", "sockets", "true"},
                "--cpu-bind: unknown binding 'sockets' (want cores, threads or none)"},
        BadArgs{{"--numa-policy", "strict", "true"},
                "--numa-policy: unknown policy 'strict' (want best-effort, single-numa-node or "
                "none)"}));

}  // namespace
}  // namespace hpcq::job
