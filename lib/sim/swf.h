// Reader for the Standard Workload Format (SWF) of the Parallel Workloads
// Archive (https://www.cs.huji.ac.il/labs/parallel/workload/swf.html): one
// job per line, 18 whitespace-separated numeric fields; lines starting with
// ';' are header comments. Plain files and gzip files (read through zlib's
// gzopen, which also reads uncompressed files as they are).
//
// Strict: a data line with a field count other than 18, a value that is not
// a number, a fractional value in a field that must be integral, or a
// negative value other than the "unknown" marker -1 stops the read with
// "FILE:LINE: field N (name): bad value 'x'" (or "FILE:LINE: 17 fields, SWF
// has 18"). Nothing is guessed.
//
// Which rows become jobs follows ../shared/traces/README.md block A (the
// setting of the Batsim/HPCOpt results we validate against):
//   - rows with -1 in job number, submit time, run time or allocated
//     processors are dropped and counted (the wait time is not read by the
//     simulator, so -1 there drops nothing);
//   - size = requested processors (field 8) if > 0, else allocated (field 5);
//     a row whose size is then 0 is dropped too (a job on no processor);
//   - runtime = field 4 exactly (0 is kept: the job starts and ends at once);
//   - requested time = field 9 if > 0, else the runtime.
//
// Ownership: plain values. Threads: pure functions, safe from any thread.
// Errors: kNotFound (cannot open/read the file), kInvalidArgument (malformed
// line, message as above).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/status.h"

namespace hpcq::sim {

// One job as the simulator uses it; times in seconds.
struct SwfJob {
  std::int64_t id = 0;           // field 1
  std::int64_t submit_s = 0;     // field 2
  std::int64_t runtime_s = 0;    // field 4
  int size = 0;                  // processors: field 8, else field 5
  std::int64_t requested_s = 0;  // field 9, else the runtime
  std::int64_t user = -1;        // field 12 (-1: unknown)
  std::int64_t queue = -1;       // field 15 (-1: unknown)
  std::int64_t partition = -1;   // field 16 (-1: unknown)
  int line = 0;                  // 1-based line in the file, for messages
};

struct SwfTrace {
  std::vector<SwfJob> jobs;         // in file order
  std::size_t rows = 0;             // data lines read
  std::size_t dropped = 0;          // rows that did not become jobs (see above)
  std::vector<std::string> header;  // the ';' lines, without the ';'
};

// The queue name the simulator gives a job (PendingJob.queue, the per-queue
// metrics): "q<field 15>" when the queue number is known, ".p<field 16>"
// appended when the partition is known too ("q1", "q1.p2", "p2"); empty
// (the default queue) when neither is.
std::string swf_queue_name(const SwfJob& job);

// The name of SWF field `n` (1..18), e.g. "run time"; "?" outside.
std::string_view swf_field_name(int n);

// Parses trace text; `name` is used as FILE in messages.
Result<SwfTrace> parse_swf(std::string_view text, std::string_view name);

// Reads and parses a file, gzip or plain.
Result<SwfTrace> read_swf(const std::string& path);

}  // namespace hpcq::sim
