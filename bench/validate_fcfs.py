#!/usr/bin/env python3
"""Validate `hpcq simulate` FCFS against published results (issue 4, item 4a).

Runs the whole CTC-SP2 trace on 512 cores with FCFS and compares makespan,
utilisation, mean and p95 wait and p95 bounded slowdown (60 s) with the
Batsim and HPCOpt figures in ../shared/traces/README.md block A.

Two settings, because the two engines differ in one rule:
  * block A as written (hpcq's default): a job runs exactly its trace
    runtime. The HPCOpt Python engine does this.
  * --kill-at-limit: a job that runs past its requested time (field 9) is
    ended there. Batsim does this (a job reaching its walltime is killed,
    COMPLETED_WALLTIME_REACHED); 7,174 of CTC-SP2's 77,222 jobs run past
    their request. This setting reproduces Batsim's makespan and p95 wait to
    the second and its mean wait to 0.02%, which is how the difference was
    found.

Each engine is compared in its own setting; exit status 1 when makespan or
mean wait differ by more than 1% (2 when hpcq cannot be run).

Usage: bench/validate_fcfs.py [--hpcq build/cli/hpcq] [--trace PATH]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_TRACE = os.path.join(ROOT, "..", "shared", "traces", "CTC-SP2-1996-3.1-cln.swf.gz")

# README block A (ErenAri/HPC-workload-optimizer @ 02c2997b).
BATSIM = {"makespan_s": 29306682, "utilization": 0.555, "mean_wait_s": 6102,
          "p95_wait_s": 34117, "p95_bsld_60": 185.64}
HPCOPT = {"makespan_s": 29306751, "utilization": 0.555, "mean_wait_s": 6183,
          "p95_wait_s": 34361, "p95_bsld_60": 188.05}
METRICS = ["makespan_s", "utilization", "mean_wait_s", "p95_wait_s", "p95_bsld_60"]
GATED = ["makespan_s", "mean_wait_s"]
TOLERANCE_PCT = 1.0


def simulate(hpcq, trace, extra):
    cmd = [hpcq, "simulate", trace, "--cores", "512", "--policy", "fcfs", "--json"] + extra
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", "") or str(e)
        sys.exit(f"validate_fcfs: {' '.join(cmd)} failed: {detail.strip()}")
    return json.loads(out.stdout)


def fmt(metric, value):
    if metric == "utilization":
        return f"{100 * value:.2f}%"
    if metric == "p95_bsld_60":
        return f"{value:.2f}"
    return f"{value:,.0f}"


def compare(title, ours, theirs, name, gated=True):
    print(f"\n{title}")
    print(f"{'metric':<14} {'ours':>14} {name:>14} {'diff':>9}")
    failed = []
    for m in METRICS:
        diff = 100.0 * (ours[m] - theirs[m]) / theirs[m]
        outside = m in GATED and abs(diff) > TOLERANCE_PCT
        if outside and gated:
            failed.append(m)
        mark = ("  FAIL" if gated else "  (> 1%)") if outside else ""
        print(f"{m:<14} {fmt(m, ours[m]):>14} {fmt(m, theirs[m]):>14} {diff:>+8.3f}%{mark}")
    return failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hpcq", default=os.path.join(ROOT, "build", "cli", "hpcq"))
    parser.add_argument("--trace", default=DEFAULT_TRACE)
    args = parser.parse_args()

    plain = simulate(args.hpcq, args.trace, [])
    killed = simulate(args.hpcq, args.trace, ["--kill-at-limit"])
    print(f"CTC-SP2, 512 cores, FCFS: {plain['jobs']} jobs ({plain['dropped']} rows dropped); "
          f"simulated in {plain['elapsed_s']:.3f} s and {killed['elapsed_s']:.3f} s")
    failed = []
    failed += compare("block A, trace runtimes (hpcq default) vs HPCOpt Python engine",
                      plain, HPCOPT, "HPCOpt")
    failed += compare("jobs ended at their requested time (--kill-at-limit) vs Batsim 5.0.0-rc1",
                      killed, BATSIM, "Batsim")
    # Informational only: the two engines' rules differ (see above).
    compare("for reference: block A, trace runtimes, vs Batsim (not gated: Batsim kills jobs "
            "at their walltime)", plain, BATSIM, "Batsim", gated=False)
    print("\nutilisation: the published 55.5% counts trace runtimes; with --kill-at-limit the "
          f"jobs run less,\nhence {100 * killed['utilization']:.2f}%. Gated: makespan and mean wait "
          f"within {TOLERANCE_PCT}%.")
    if failed:
        print(f"\nFAILED: {', '.join(failed)} outside {TOLERANCE_PCT}%")
        return 1
    print("\nOK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
