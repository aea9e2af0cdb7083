// hpcq-slurm: Slurm's commands, told apart by the name they are run by
// (commands.h). `hpcq-slurm COMMAND ARGS...` runs one by its name too.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/client.h"
#include "cli/job_commands.h"
#include "compat/slurm/commands.h"

namespace {

using hpcq::job::SubmitKind;

int submit(const std::string& name, const std::vector<std::string>& args, SubmitKind kind) {
  hpcq::cli::SubmitStyle style;
  style.program = name;
  style.dialect = hpcq::job::Dialect::kSlurm;
  style.stdin_script = kind == SubmitKind::kBatch;
  return hpcq::cli::cmd_submit(args, kind, style);
}

int run(const std::string& name, const std::vector<std::string>& args) {
  hpcq::cli::set_error_style({name, /*slurm=*/true});
  if (name == "sbatch") return submit(name, args, SubmitKind::kBatch);
  if (name == "srun") return submit(name, args, SubmitKind::kRun);
  if (name == "salloc") return submit(name, args, SubmitKind::kAlloc);
  if (name == "squeue") return hpcq::compat::squeue(args);
  if (name == "sacct") return hpcq::compat::sacct(args);
  if (name == "sinfo") return hpcq::compat::sinfo(args);
  if (name == "scancel") return hpcq::compat::scancel(args);
  if (name == "scontrol") return hpcq::compat::scontrol(args);
  std::cerr << "hpcq-slurm: no Slurm command " << name
            << " (sbatch, srun, salloc, squeue, sacct, sinfo, scancel, scontrol)\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const char* slash = std::strrchr(argv[0], '/');
  std::string name = slash != nullptr ? slash + 1 : argv[0];
  std::vector<std::string> args(argv + 1, argv + argc);
  if (name == "hpcq-slurm") {
    if (args.empty()) {
      std::cerr << "usage: hpcq-slurm COMMAND [ARGS...] (or run it as sbatch, squeue, ...)\n";
      return 1;
    }
    name = args.front();
    args.erase(args.begin());
  }
  return run(name, args);
}
