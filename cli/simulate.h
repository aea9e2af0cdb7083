// `hpcq simulate TRACE --cores N [--policy NAME] [--estimates user|exact]
// [--json] [--events FILE]`: runs an SWF trace through the scheduler on a
// virtual clock (lib/sim) and reports the schedule's metrics. No daemon.
//
// Also: `--nodes K --cores-per-node C` for K nodes of C cores (`--cores N`
// alone is one node of N cores; with --nodes, N cores split evenly), and
// `--skip-impossible` to drop jobs larger than the cluster instead of
// failing.
//
// The one place in the simulator's path that reads a clock (elapsed_s, the
// wall time of the simulation), so that lib/sim stays pure.
//
// Exit status: 0 done; 2 bad options, unknown policy, malformed trace or a
// job that cannot fit; 1 unreadable trace or events file, or an internal
// error. Always one line on stderr.
#pragma once

#include <string>
#include <vector>

namespace hpcq::cli {

// `args` are the words after "simulate".
int run_simulate(const std::vector<std::string>& args);

}  // namespace hpcq::cli
