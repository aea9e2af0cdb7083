// Action "backfill": start queued jobs out of order when that delays none of
// the first `reservation_depth` blocked jobs, and promise those jobs a start
// time (Reserve decisions). Runs after "allocate" (actions = ["allocate",
// "backfill"]) and picks up where its strict FCFS walk stopped; run alone it
// does allocate's work too.
//
// Depth 1 is EASY backfilling (Lifka's EASY; Mu'alem & Feitelson, IEEE TPDS
// 2001): the first job that does not fit gets a reservation at its shadow
// time, and a later job may start now if it ends before the shadow time or
// uses only the "extra" cores (those the reserved job leaves free at the
// shadow time). Depth D (Maui/Moab's RESERVATIONDEPTH) reserves for the first
// D blocked jobs in queue order; depth 0 ("unlimited") reserves for every
// blocked job: conservative backfilling.
//
// The walk, in job order (the Session's ordered queue), over the jobs that
// the earlier actions did not start:
//   1. Start now if it fits now without taking what a reservation needs
//      before the job's end (now + its time limit): on every node, at most
//      the least that stays free over [now, end) in the planner. "Ends
//      before the shadow time" and "uses only extra cores" are both this one
//      test.
//   2. Otherwise, while fewer than `reservation_depth` reservations exist,
//      reserve at the earliest time it fits (its shadow time) on the nodes
//      the planner picks, and emit Reserve{job, shadow time}.
//   Jobs that would not fit even on the idle cluster are passed over and
//   take no reservation (as allocate does).
//
// Semantics chosen:
//   - The time limit is the job's request, PendingJob.time_limit_s; 0 or
//     less means none: such a job runs "forever", so it backfills only on
//     cores no reservation ever needs, and its own reservation never ends.
//   - Running jobs free their cores at end_estimate (the caller decides
//     between user estimates and exact runtimes); an estimate already past
//     counts as now + 1 s (see planner.h). Jobs started earlier in this
//     cycle end at now + their time limit.
//   - The extra cores are per node: a reservation holds a count of cores
//     (and memory, GPUs and gres units) on each of its nodes, not
//     particular core or GPU ids. A job started now gets, on each node, at
//     most the least of each that stays free until its end, so it takes no
//     GPU or unit a reserved job waits for either.
//   - An --exclusive job (whole nodes) starts now only on idle nodes that
//     no reservation needs before its end (a node a promise limits holds
//     the promised part back, so it is not idle), and is promised whole
//     nodes, idle over its window (planner.h): nothing else starts on them
//     if it would still run when the promise begins.
//   - Ties: the Session's job order (plugins, then submit time, then job id)
//     decides who reserves first; nodes in the plugins' preference order.
//   - A reservation is recomputed every cycle; it is a promise for this
//     cycle's backfill, not a lease.
//
//   - Advance reservations (Snapshot.reservations) are blocks in the
//     planner: a job a reservation does not admit gets nothing of its nodes
//     over its window, neither now (a start ending after the window opens is
//     kept off them) nor in a promise (its shadow time lands after the
//     window, or on other nodes). An admitted job is not stopped by it.
//   - Jobs the Session does not find ready (job-ready hooks, held jobs) get
//     no candidates from it, so they neither start nor reserve.
//
// Cost per cycle (Q queued, N nodes, E = changes in the profile: running
// jobs' ends plus two per reserved node, R = reservation_depth):
//   each job that cannot start now: O(1) when the free-core count rules it
//   out or its request shape already failed with an earlier end (no
//   predicate registered); else O(N + limits) for one placement;
//   each reservation: one planner.earliest(), O(N + E) (planner.h).
//   So EASY and depth R cost O(Q + R * (N + E)) beyond the placements, and
//   conservative (depth 0) O(Q * (N + E)) with E growing by the
//   reservations made: linear in Q while N dominates, quadratic after.
//   Measured (bench/sched_bench.cc): 10,000 queued / 5,000 running on 4,096
//   nodes, one cycle in about 17 ms (EASY), 24 ms (depth 5), 3.6 s CPU
//   (conservative, 9,877 reservations; was 8.3 s).
//
// Options: reservation_depth = N >= 1 (default 1), or 0, -1 or "unlimited"
// for every blocked job. Anything else fails Scheduler::create().
#pragma once

#include <memory>
#include <string_view>

#include "lib/core/status.h"
#include "lib/sched/action.h"

namespace hpcq::sched {

struct BackfillOptions {
  static constexpr int kUnlimited = 0;
  int reservation_depth = 1;  // kUnlimited: every blocked job
  // Restricted backfilling (RLScheduler's and some simulators'): a job may
  // pass a blocked one only if it ends before the earliest start promised so
  // far this cycle; no "extra cores" rule. Option backfill.restricted.
  bool restricted = false;
};

class BackfillAction final : public Action {
 public:
  static constexpr std::string_view kName = "backfill";
  static constexpr std::string_view kReservationDepth = "reservation_depth";
  static constexpr std::string_view kRestricted = "restricted";

  // From configuration options (see above).
  static Result<std::unique_ptr<Action>> create(const ActionOptions& options);

  explicit BackfillAction(BackfillOptions options = {}) : options_(options) {}
  std::string_view name() const override { return kName; }
  void execute(Session& session) override;

 private:
  BackfillOptions options_;
};

}  // namespace hpcq::sched
