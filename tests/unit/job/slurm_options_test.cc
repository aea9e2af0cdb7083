// Slurm's dialect of the submit options (sbatch, srun, salloc of
// compat/slurm): #SBATCH directives, Slurm's meanings of -p and -q, its
// own options, and one line for each option hpcq cannot honour.
#include <gtest/gtest.h>

#include <csignal>
#include <map>
#include <string>
#include <vector>

#include "lib/job/submit_options.h"

namespace hpcq::job {
namespace {

using Words = std::vector<std::string>;

class Slurm : public ::testing::Test {
 protected:
  Slurm() {
    ctx_.dialect = Dialect::kSlurm;
    ctx_.cwd = "/home/u/work";
    ctx_.host = "login1";
    ctx_.environment = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/u"}};
    ctx_.read_file = [this](const std::string& path) -> Result<std::string> {
      auto it = files_.find(path);
      if (it == files_.end()) return not_found("cannot read " + path);
      return it->second;
    };
  }
  SubmitOptions ok(const Words& args, SubmitKind kind = SubmitKind::kBatch) {
    auto r = parse_submit_args(args, ctx_, kind);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return r.is_ok() ? std::move(r).value() : SubmitOptions{};
  }
  std::string error(const Words& args, SubmitKind kind = SubmitKind::kBatch) {
    auto r = parse_submit_args(args, ctx_, kind);
    EXPECT_FALSE(r.is_ok());
    if (r.is_ok()) return "";
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
    return r.status().message();
  }
  SubmitContext ctx_;
  std::map<std::string, std::string> files_;
};

TEST_F(Slurm, SbatchDirectivesAreReadAndHpcqsAreComments) {
  files_["job.sh"] =
      "#!/bin/bash\n"
      "#SBATCH --job-name=sim\n"
      "#SBATCH -N 2 --ntasks-per-node=2\n"
      "#SBATCH -p long -q high -A physics\n"
      "#SBATCH -t 1-00:00:00\n"
      "#HPCQ -N 4\n"
      "srun ./sim\n";
  const SubmitOptions o = ok({"job.sh"});
  EXPECT_EQ(o.spec.name, "sim");
  EXPECT_EQ(o.spec.request.nodes, 2) << "an #HPCQ line is a comment to sbatch";
  EXPECT_EQ(o.spec.request.ntasks, 4);
  EXPECT_EQ(o.spec.queue, "long") << "-p is the partition";
  EXPECT_EQ(o.spec.qos, "high") << "-q is Slurm's QOS";
  EXPECT_EQ(o.spec.account, "physics");
  EXPECT_EQ(o.spec.time_limit_s, 86400);
  EXPECT_TRUE(o.spec.slurm_environment);
  EXPECT_EQ(o.spec.output, "slurm-%j.out") << "sbatch's default";
  EXPECT_EQ(o.spec.env.at("SLURM_SUBMIT_DIR"), "/home/u/work");
  EXPECT_EQ(o.spec.env.at("SLURM_SUBMIT_HOST"), "login1");
  // The command line wins over the script, as in sbatch.
  EXPECT_EQ(ok({"-N", "1", "-n", "1", "job.sh"}).spec.request.nodes, 1);
}

TEST_F(Slurm, HpcqsSpellingIsNotSlurms) {
  EXPECT_EQ(ok({"-q", "normal", "--wrap", "true"}).spec.queue, "");
  EXPECT_NE(error({"--queue", "long", "--wrap", "true"}).find("--queue"), std::string::npos);
}

TEST_F(Slurm, WrapMakesAScriptNamedWrap) {
  const SubmitOptions o = ok({"--wrap", "echo hi; hostname"});
  EXPECT_EQ(o.spec.name, "wrap");
  EXPECT_EQ(o.spec.script,
            "#!/bin/sh\n# This script was created by sbatch --wrap.\n\necho hi; hostname\n");
  EXPECT_TRUE(o.spec.batch);
  files_["job.sh"] = "#!/bin/sh\ntrue\n";
  EXPECT_NE(error({"--wrap", "true", "job.sh"}).find("--wrap"), std::string::npos);
}

TEST_F(Slurm, ParsableHoldWaitNiceAndArraysOutput) {
  const SubmitOptions o = ok({"--parsable", "-H", "-W", "--nice=10", "-a", "0-3%2", "--wrap", "x"});
  EXPECT_TRUE(o.parsable);
  EXPECT_TRUE(o.spec.hold);
  EXPECT_TRUE(o.wait);
  EXPECT_EQ(o.spec.priority, -10);
  EXPECT_EQ(o.spec.output, "slurm-%A_%a.out") << "sbatch's default for an array";
  EXPECT_FALSE(ok({"--wrap", "x"}).spec.hold);
}

TEST_F(Slurm, GpusAsGresOrInAll) {
  EXPECT_EQ(ok({"--gres=gpu:2", "--wrap", "x"}).spec.request.gpus_per_node, 2);
  EXPECT_EQ(ok({"--gres=gpu", "--wrap", "x"}).spec.request.gpus_per_node, 1);
  const SubmitOptions mixed = ok({"--gres=nvme:1,gpu:4", "--wrap", "x"});
  EXPECT_EQ(mixed.spec.request.gpus_per_node, 4);
  EXPECT_EQ(mixed.spec.request.gres.at("nvme"), 1);
  EXPECT_EQ(mixed.spec.request.gres.count("gpu"), 0u);
  EXPECT_NE(error({"--gres=gpu:a100:2", "--wrap", "x"}).find("typed"), std::string::npos);
  EXPECT_EQ(ok({"-N", "2", "--gpus=4", "--wrap", "x"}).spec.request.gpus_per_node, 2);
  EXPECT_EQ(ok({"-G", "2", "--wrap", "x"}).spec.request.gpus_per_node, 2);
  EXPECT_NE(error({"-N", "2", "--gpus=3", "--wrap", "x"}).find("--gpus"), std::string::npos);
}

TEST_F(Slurm, SignalSparesTheScriptUnlessBSaysItAlone) {
  const SubmitOptions steps = ok({"--signal=USR1@50", "--wrap", "x"});
  EXPECT_EQ(steps.spec.warn_signal, SIGUSR1);
  EXPECT_EQ(steps.spec.warn_seconds, 50);
  EXPECT_EQ(steps.spec.warn_target, WarnTarget::kSteps) << "sbatch's default";
  EXPECT_EQ(ok({"--signal=B:USR1@50", "--wrap", "x"}).spec.warn_target, WarnTarget::kScript);
  EXPECT_NE(error({"--signal=R:USR1@50", "--wrap", "x"}).find("R:"), std::string::npos);
  ctx_.dialect = Dialect::kHpcq;
  EXPECT_EQ(ok({"--signal=USR1@50", "./app"}, SubmitKind::kSubmit).spec.warn_target,
            WarnTarget::kScriptAndSteps)
      << "hpcq's default: the script and its steps";
  EXPECT_EQ(ok({"--signal=B:USR1", "./app"}, SubmitKind::kSubmit).spec.warn_target,
            WarnTarget::kScript);
}

TEST_F(Slurm, DeadlineIsATimeToComeAfterTheBegin) {
  ctx_.now_us = 1'000'000'000'000'000;  // 2001-09-09
  const SubmitOptions o = ok({"--deadline=now+3600", "--wrap", "x"});
  EXPECT_EQ(o.spec.deadline_us, ctx_.now_us + 3600'000'000LL);
  EXPECT_NE(error({"--deadline=2000-01-01", "--wrap", "x"}).find("--deadline"), std::string::npos);
  EXPECT_NE(error({"--begin=now+7200", "--deadline=now+3600", "--wrap", "x"}).find("--deadline"),
            std::string::npos);
}

TEST_F(Slurm, MpiTakesSlurmsNames) {
  EXPECT_EQ(ok({"--mpi=pmi2", "./app"}, SubmitKind::kRun).spec.mpi, "pmi1");
  EXPECT_EQ(ok({"--mpi=pmix_v4", "./app"}, SubmitKind::kRun).spec.mpi, "pmix");
  EXPECT_EQ(ok({"--mpi=none", "./app"}, SubmitKind::kRun).spec.mpi, "none");
}

TEST_F(Slurm, AnOptionHpcqCannotHonourIsRefusedInOneLineNamingIt) {
  EXPECT_TRUE(ok({"--exclusive", "--wrap", "x"}).spec.request.exclusive) << "whole nodes";
  for (const char* name : kSlurmUnhonoured) {
    const std::string option = name;
    const Words words = option == "--test-only" ? Words{option, "--wrap", "x"}
                                                : Words{option + "=v", "--wrap", "x"};
    EXPECT_EQ(error(words).rfind(option + ":", 0), 0u) << option;
  }
  files_["job.sh"] = "#!/bin/sh\n#SBATCH --mail-type=END\ntrue\n";
  EXPECT_EQ(error({"job.sh"}), "job.sh:2: --mail-type: not honoured by hpcq (docs/slurm.md)");
  EXPECT_NE(error({"-i", "in.txt", "--wrap", "x"}).find("--input"), std::string::npos);
  EXPECT_TRUE(ok({"-i", "/dev/null", "--wrap", "x"}).warnings.empty());
}

TEST_F(Slurm, ASiteMayLetChosenOnesThroughWithAWarning) {
  ctx_.downgraded = {"--mail-type", "--mail-user"};
  files_["job.sh"] =
      "#!/bin/sh\n#SBATCH --mail-type=END --mail-user=u@x\n#SBATCH --comment=x\ntrue\n";
  EXPECT_EQ(error({"job.sh"}).rfind("job.sh:3: --comment:", 0), 0u) << "not downgraded";
  files_["job.sh"] = "#!/bin/sh\n#SBATCH --mail-type=END --mail-user=u@x\ntrue\n";
  const SubmitOptions o = ok({"job.sh"});
  ASSERT_EQ(o.warnings.size(), 2u);
  EXPECT_EQ(o.warnings[0].rfind("--mail-type ignored", 0), 0u);
}

TEST_F(Slurm, NamesCommandTellsWhetherSbatchReadsStdin) {
  EXPECT_FALSE(names_command({"-N", "2", "--parsable", "-J", "x"}));
  EXPECT_TRUE(names_command({"-N", "2", "job.sh"}));
  EXPECT_TRUE(names_command({"--wrap", "true"}));
  EXPECT_TRUE(names_command({"--wrap=true"}));
  EXPECT_FALSE(names_command({"--"}));
}

TEST_F(Slurm, HpcqBatchStillRefusesASlurmOnlyScript) {
  ctx_.dialect = Dialect::kHpcq;
  files_["job.sh"] = "#!/bin/sh\n#SBATCH -N 2\ntrue\n";
  EXPECT_NE(error({"job.sh"}).find("#SBATCH lines are not read by hpcq"), std::string::npos);
}

}  // namespace
}  // namespace hpcq::job
