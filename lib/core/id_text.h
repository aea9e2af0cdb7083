// Job and step ids as users write them on the command line: "17", "17.2"
// (a step of job 17). Digits only: no sign, no space, no "0x", as Slurm's
// scancel and squeue take them; an array's element ("18_3") is the CLI's to
// resolve (it asks hpcqd), but both of its numbers go through here.
//
// Pure functions; safe from any thread. Every error is
// Status(kInvalidArgument) with one line that quotes the text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lib/core/ids.h"
#include "lib/core/status.h"

namespace hpcq {

// A job id: 1..2^64-1, decimal digits only.
Result<JobId> parse_job_id(std::string_view text);

// "JOB" or "JOB.STEP": the job's text (left for the caller to read: N or
// ARRAY_INDEX) and the step, 0 when none is given. A step is 1..2^32-1 in
// decimal digits; "17.", "17.0", "17.+1" and "17. 1" are errors.
struct JobStepText {
  std::string job;
  std::uint32_t step = 0;
};
Result<JobStepText> split_job_step(std::string_view text);

}  // namespace hpcq
