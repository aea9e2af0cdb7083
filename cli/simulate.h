// `hpcq simulate TRACE --cores N [--policy NAME] [--estimates user|exact]
// [--json] [--events FILE]`: runs an SWF trace through the scheduler on a
// virtual clock (lib/sim) and reports the schedule's metrics. No daemon.
//
// Also: `--nodes K --cores-per-node C` for K nodes of C cores (`--cores N`
// alone is one node of N cores; with --nodes, N cores split evenly), and
// `--skip-impossible` to drop jobs larger than the cluster instead of
// failing, `--half-life D` for fair-share's usage decay (default 7d),
// `--option KEY=VALUE` (repeatable) for scheduler options on top of the
// policy's, and `hpcq simulate --replay LOG` (no trace) to replay hpcqd's
// decision log (lib/sim/replay.h): prints "replayed N cycles, M starts:
// identical", or the first difference with its line, and exits 1 on a
// difference.
//
// The one place in the simulator's path that reads a clock (elapsed_s, the
// wall time of the simulation), so that lib/sim stays pure.
//
// Exit status: 0 done (replay: identical); 2 bad options, unknown policy,
// malformed trace or decision log, or a job that cannot fit; 1 a replay that
// differs; 1 unreadable trace or events file, or an internal
// error. Always one line on stderr.
#pragma once

#include <string>
#include <vector>

namespace hpcq::cli {

// `args` are the words after "simulate".
int run_simulate(const std::vector<std::string>& args);

}  // namespace hpcq::cli
