// Slurm's commands over hpcq's API (docs/slurm.md): one program, told which
// command it is by its name (main.cc), installed as sbatch, srun, salloc,
// squeue, scancel, sacct, sinfo, scontrol, sstat and sattach in a directory of
// their own that a site puts on PATH (meson option slurm_bindir), so that
// they never shadow a real Slurm. sbatch, srun and salloc are hpcq batch,
// run and alloc in Slurm's dialect (lib/job/submit_options.h); the others
// ask hpcqd and print in Slurm's forms (slurm_text.h). Each returns the
// command's exit status; errors are one line, "COMMAND: error: ...", and
// exit 1, as Slurm's.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cli/client.h"
#include "compat/slurm/slurm_format.h"
#include "lib/core/status.h"
#include "proto/hpcq.pb.h"

namespace hpcq::compat {

// What the commands share: every job the caller may see, by id (ended ones
// too with `ended_too`), and whether a -u/-p/-A/-n list lets a value through
// (an empty list lets every one).
Result<std::vector<v1::Job>> list_jobs(const cli::Client& client, bool ended_too);
bool allowed(const std::vector<std::string>& values, const std::string& value);
// sacct's and sstat's table: a header and a line of dashes (unless
// !header), then `rows` rows of value_of(row, field); parsable: fields
// joined by `delimiter` (and one after the last with `trailing`, -p).
struct TableStyle {
  bool header = true;
  bool parsable = false;
  bool trailing = false;
  std::string delimiter = "|";
};
void print_table(const std::vector<Field>& fields, const TableStyle& style, std::size_t rows,
                 const std::function<std::string(std::size_t, const Field&)>& value_of);

// --help, --usage: prints "Usage: PROGRAM [OPTIONS]" and the options hpcq
// honours, and says so (true: the command exits 0).
bool printed_usage(const ReadOptions& options, const char* program, const char* operands = "");

int squeue(const std::vector<std::string>& args);
int sacct(const std::vector<std::string>& args);
int sinfo(const std::vector<std::string>& args);
int scancel(const std::vector<std::string>& args);
int scontrol(const std::vector<std::string>& args);
int sstat(const std::vector<std::string>& args);
int sattach(const std::vector<std::string>& args);

}  // namespace hpcq::compat
