// Slurm's commands over hpcq's API (docs/slurm.md): one program, told which
// command it is by its name (main.cc), installed as sbatch, srun, salloc,
// squeue, scancel, sacct, sinfo and scontrol in a directory of
// their own that a site puts on PATH (meson option slurm_bindir), so that
// they never shadow a real Slurm. sbatch, srun and salloc are hpcq batch,
// run and alloc in Slurm's dialect (lib/job/submit_options.h); the others
// ask hpcqd and print in Slurm's forms (slurm_text.h). Each returns the
// command's exit status; errors are one line, "COMMAND: error: ...", and
// exit 1, as Slurm's.
#pragma once

#include <string>
#include <vector>

#include "cli/client.h"
#include "lib/core/status.h"
#include "proto/hpcq.pb.h"

namespace hpcq::compat {

// What the commands share: every job the caller may see, by id (ended ones
// too with `ended_too`), and whether a -u/-p/-A/-n list lets a value through
// (an empty list lets every one).
Result<std::vector<v1::Job>> list_jobs(const cli::Client& client, bool ended_too);
bool allowed(const std::vector<std::string>& values, const std::string& value);

int squeue(const std::vector<std::string>& args);
int sacct(const std::vector<std::string>& args);
int sinfo(const std::vector<std::string>& args);
int scancel(const std::vector<std::string>& args);
int scontrol(const std::vector<std::string>& args);

}  // namespace hpcq::compat
