#include "cli/rsh.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
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

}  // namespace

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
        "accepted and ignored. See hpcq(1).\n");
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
  std::string command;
  for (; i < args.size(); ++i) command += (command.empty() ? "" : " ") + args[i];

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
