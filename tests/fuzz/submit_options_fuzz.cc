// libFuzzer target for everything a user types at `hpcq submit` (and batch,
// run, alloc): script
// directives, command-line words, durations and memory sizes. It must never
// crash, and what it accepts must hold up: a parsed spec passes validate(),
// and formatted units read back to the same value.
//
// The input is used three ways: as the text of a script (after a shebang),
// as command-line words (split at NUL bytes, so a word may hold spaces and
// newlines), and as one unit string.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "lib/core/units.h"
#include "lib/job/job.h"
#include "lib/job/submit_options.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void check_one_line(const hpcq::Status& s) {
  check(s.code() == hpcq::Code::kInvalidArgument);
  check(s.message().find('\n') == std::string::npos);
}

void check_result(const hpcq::Result<hpcq::job::SubmitOptions>& r) {
  if (!r.is_ok()) {
    check_one_line(r.status());
    return;
  }
  check(!r->spec.argv.empty());
  check(hpcq::job::validate(r->spec).is_ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);

  auto directives = hpcq::job::parse_directives(input, "fuzz.sh");
  if (!directives.is_ok()) check_one_line(directives.status());
  auto sbatch = hpcq::job::parse_directives(input, "fuzz.sh", hpcq::job::Dialect::kSlurm);
  if (!sbatch.is_ok()) check_one_line(sbatch.status());

  hpcq::job::SubmitContext ctx;
  ctx.cwd = "/home/fuzz";
  ctx.environment = {{"PATH", "/usr/bin"}, {"HOME", "/home/fuzz"}};
  const std::string script = "#!/bin/sh\n" + input;
  ctx.read_file = [&](const std::string& path) -> hpcq::Result<std::string> {
    if (path == "job.sh") return script;
    if (path == "raw") return input;
    return hpcq::not_found(path);
  };
  check_result(hpcq::job::parse_submit_args({"job.sh", "arg"}, ctx));
  check_result(hpcq::job::parse_submit_args({"raw"}, ctx));

  std::vector<std::string> words;
  std::string word;
  for (char c : input) {
    if (c == '\0') {
      words.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  words.push_back(word);
  // hpcq submit, batch, run and alloc share the words and differ in the rest.
  using hpcq::job::SubmitKind;
  for (SubmitKind kind :
       {SubmitKind::kSubmit, SubmitKind::kBatch, SubmitKind::kRun, SubmitKind::kAlloc}) {
    check_result(hpcq::job::parse_submit_args(words, ctx, kind));
  }
  // sbatch, srun and salloc of the Slurm commands: the same words in Slurm's dialect.
  hpcq::job::SubmitContext slurm = ctx;
  slurm.dialect = hpcq::job::Dialect::kSlurm;
  slurm.downgraded = {"--mail-type"};
  for (SubmitKind kind : {SubmitKind::kBatch, SubmitKind::kRun, SubmitKind::kAlloc}) {
    check_result(hpcq::job::parse_submit_args(words, slurm, kind));
  }
  (void)hpcq::job::names_command(words);
  words.push_back("job.sh");
  check_result(hpcq::job::parse_submit_args(words, ctx));
  check_result(hpcq::job::parse_submit_args(words, ctx, SubmitKind::kBatch));
  check_result(hpcq::job::parse_submit_args(words, slurm, SubmitKind::kBatch));

  if (auto d = hpcq::parse_duration_s(input); d.is_ok()) {
    check(*d >= 0);
    auto back = hpcq::parse_duration_s(hpcq::format_duration(*d));
    check(back.is_ok() && *back == *d);
  } else {
    check_one_line(d.status());
  }
  if (auto m = hpcq::parse_memory_bytes(input); m.is_ok()) {
    auto back = hpcq::parse_memory_bytes(hpcq::format_memory(*m));
    check(back.is_ok() && *back == *m);
  } else {
    check_one_line(m.status());
  }
  return 0;
}
