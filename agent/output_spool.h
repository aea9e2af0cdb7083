// The forwarded output (hpcq run, batch steps) this agent numbered lately, on
// disk for the next agent on this node. An agent killed with output in hand
// (read from a shell, not yet through to the leader) would lose it, and its
// successor would not know where each stream stood. So each chunk OutputLog
// numbers is appended to <dir>/<job>.<step> before it is sent; the next
// agent loads the files of the runs it takes back, continues each stream
// from there and sends the chunks again (the leader skips what it has), as
// after a change of way (output_log.h). Past kCompactBytes a file is
// rewritten with what OutputLog keeps of its run; it is removed once the
// run's end is acknowledged.
//
// A record: u32 rank, u8 stderr, u32 attempt, u64 offset, u64 incarnation,
// u32 length, then the data, little-endian. Not synced: a crash of the machine ends the jobs
// too. A torn tail (a kill mid-append) is cut off on load.
//
// Loop thread only. Errors are logged, never fatal: without its spool a
// stream taken back may lose what was in flight, nothing else.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/output_log.h"
#include "lib/core/ids.h"

namespace hpcq::agent {

class OutputSpool {
 public:
  static constexpr std::uint64_t kCompactBytes = 1 << 20;

  explicit OutputSpool(std::string dir);
  ~OutputSpool();
  OutputSpool(const OutputSpool&) = delete;
  OutputSpool& operator=(const OutputSpool&) = delete;

  using Run = std::pair<JobId, std::uint32_t>;  // a job (step 0) or one of its steps

  // The chunks the previous agent left for `runs` (those taken back), oldest
  // first per stream; every other file is removed.
  std::vector<OutputLog::Chunk> take(const std::set<Run>& runs);
  // Appends `chunk`; true when its run's file has grown past kCompactBytes
  // (then rewrite() it).
  bool append(const OutputLog::Chunk& chunk);
  // Replaces the run's file with `kept` (OutputLog::kept of the run).
  void rewrite(Run run, const std::vector<OutputLog::Chunk>& kept);
  // The run's end was acknowledged; step 0: the job's and all its steps'.
  void forget(JobId id, std::uint32_t step);

 private:
  struct File {
    int fd = -1;
    std::uint64_t bytes = 0;
  };
  std::string path_of(Run run) const;
  File* file_of(Run run);
  void close_file(std::map<Run, File>::iterator it, bool remove);

  const std::string dir_;
  std::map<Run, File> files_;
};

}  // namespace hpcq::agent
