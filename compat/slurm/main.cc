// hpcq-slurm: Slurm's commands, told apart by the name they are run by
// (commands.h). `hpcq-slurm COMMAND ARGS...` runs one by its name too.
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/client.h"
#include "cli/job_commands.h"
#include "compat/slurm/commands.h"

namespace {

using hpcq::job::SubmitKind;

// The directory the command was run from (where its links are), absolute.
std::string bin_dir_of(const std::string& argv0) {
  std::string dir;
  if (const std::size_t slash = argv0.rfind('/'); slash != std::string::npos) {
    dir = argv0.substr(0, std::max<std::size_t>(slash, 1));  // "/sbatch": "/"
  } else if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::string_view rest = path;
    while (!rest.empty() && dir.empty()) {
      const std::size_t colon = std::min(rest.find(':'), rest.size());
      std::string candidate(rest.substr(0, colon));
      std::string file = candidate;
      file.append("/").append(argv0);  // not operator+: GCC 12's false -Wrestrict
      if (!candidate.empty() && access(file.c_str(), X_OK) == 0) dir = std::move(candidate);
      rest.remove_prefix(std::min(colon + 1, rest.size()));
    }
  }
  char resolved[PATH_MAX];
  return !dir.empty() && realpath(dir.c_str(), resolved) != nullptr ? resolved : "";
}

int submit(const std::string& name, const std::vector<std::string>& args, SubmitKind kind,
           const std::string& argv0) {
  hpcq::cli::SubmitStyle style;
  style.bin_dir = bin_dir_of(argv0);  // only a submission puts it on the job's PATH
  style.program = name;
  style.dialect = hpcq::job::Dialect::kSlurm;
  style.stdin_script = kind == SubmitKind::kBatch;
  return hpcq::cli::cmd_submit(args, kind, style);
}

int run(const std::string& name, const std::vector<std::string>& args, const std::string& argv0) {
  hpcq::cli::set_error_style({name, /*slurm=*/true});
  if (name == "sbatch") return submit(name, args, SubmitKind::kBatch, argv0);
  if (name == "srun") return submit(name, args, SubmitKind::kRun, argv0);
  if (name == "salloc") return submit(name, args, SubmitKind::kAlloc, argv0);
  if (name == "squeue") return hpcq::compat::squeue(args);
  if (name == "sacct") return hpcq::compat::sacct(args);
  if (name == "sinfo") return hpcq::compat::sinfo(args);
  if (name == "scancel") return hpcq::compat::scancel(args);
  if (name == "scontrol") return hpcq::compat::scontrol(args);
  if (name == "sstat") return hpcq::compat::sstat(args);
  if (name == "sattach") return hpcq::compat::sattach(args);
  std::cerr << "hpcq-slurm: no Slurm command " << name
            << " (sbatch, srun, salloc, squeue, sacct, sinfo, scancel, scontrol, sstat, sattach)\n";
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
  return run(name, args, argv[0]);
}
