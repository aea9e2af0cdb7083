#!/usr/bin/env python3
"""What one call of the command costs (issue 27, goal 1): `hpcq --help`,
`hpcq submit -o /dev/null -- true` (command to exit: the answer comes only
once the job is committed to SQLite), the same submission deferred by an
hour (`--begin now+3600`: the submit path alone, no job running beside it)
and `hpcq queue`, against Slurm's `sbatch --help`, `sbatch -o /dev/null
--wrap true`, `sbatch --begin now+3600 ...` and `squeue`, with /bin/true as
the floor of starting any process here, in the same session.

hpcq runs inside `hpcq start --agents 4` (2 cores a node) and Slurm 22.05
from Debian on loopback (slurmctld + 4 slurmd, ../shared/peers/slurm). The
submitted jobs run while the next calls are made, on both. Each run makes
--calls calls of each case one after another and keeps their median; --runs
runs give the min and median reported (ms).

--before PATH also measures another hpcq command (say, an earlier release)
against the same hpcqd, as system "hpcq-before": the socket serves both the
local wire and gRPC, so a command from before the local wire works too.

System "hpcq-slurm" is hpcq's Slurm commands (compat/slurm: sbatch, squeue)
against the same hpcqd, the same words as Slurm's (issue 47's bench row).
Case "submit_wait" is end to end: `sbatch -W --wrap true` (`hpcq submit
--wait`) returns once the job has ended.

Usage: bench/cli_latency.py [--runs 3] [--calls 40] [--before PATH] [--skip-slurm] [--label L]
Run as root on an idle machine; never two benchmarks at once. Appends one JSON
line per run and case to bench/results/cli_latency.jsonl and prints a table.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from slurm_peer import slurm_cluster

import throughput  # noqa: E402  (its commit() and host())

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CASES = ("true", "help", "submit", "submit_deferred", "queue", "submit_wait")


def commands(system, hpcq):
    if system == "hpcq-slurm":
        bin_dir = os.path.join(os.path.dirname(os.path.dirname(hpcq)), "compat", "slurm", "bin")
        return {case: [os.path.join(bin_dir, cmd[0]), *cmd[1:]]
                for case, cmd in commands("slurm", None).items() if cmd[0] != "/bin/true"}
    if system.startswith("hpcq"):
        return {"true": ["/bin/true"], "help": [hpcq, "--help"],
                "submit": [hpcq, "submit", "-o", "/dev/null", "--", "true"],
                "submit_deferred": [hpcq, "submit", "--begin", "now+3600", "-o", "/dev/null", "--",
                                    "true"],
                "queue": [hpcq, "queue"],
                "submit_wait": [hpcq, "submit", "--wait", "-o", "/dev/null", "--", "true"]}
    return {"true": ["/bin/true"], "help": ["sbatch", "--help"],
            "submit": ["sbatch", "-o", "/dev/null", "--wrap", "true"],
            "submit_deferred": ["sbatch", "--begin", "now+3600", "-o", "/dev/null", "--wrap",
                                "true"],
            "queue": ["squeue"],
            "submit_wait": ["sbatch", "-W", "-o", "/dev/null", "--wrap", "true"]}


def time_calls(cmd, calls, env=None, cwd=None):
    """The median wall time of `calls` runs of cmd, in ms."""
    times = []
    for _ in range(calls):
        t0 = time.monotonic()
        subprocess.run(cmd, check=True, env=env, cwd=cwd, stdout=subprocess.DEVNULL)
        times.append((time.monotonic() - t0) * 1000)
    return statistics.median(times)


def measure(system, hpcq, runs, calls, env=None, cwd=None):
    out = []
    for r in range(runs):
        for case, cmd in commands(system, hpcq).items():
            ms = time_calls(cmd, calls, env, cwd)
            out.append(dict(system=system, case=case, run=r + 1, median_ms=round(ms, 2),
                            load=os.getloadavg()[0]))
    return out


def hpcq_runs(build, runs, calls, before):
    """Inside `hpcq start`: this script again with --inside."""
    out = subprocess.run(
        [f"{build}/cli/hpcq", "start", "--agents", "4", "--topology", "pack:1 numa:1 core:2 pu:1",
         "--", sys.executable, os.path.abspath(__file__), "--inside", "--build", build,
         "--runs", str(runs), "--calls", str(calls), *(["--before", before] if before else [])],
        check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def slurm_runs(runs, calls):
    with slurm_cluster() as (env, peer):
        try:
            return measure("slurm", None, runs, calls, env, peer)
        finally:
            # The deferred jobs would outlive this cluster: the peer keeps its
            # state (and the next benchmark would wait for them to run).
            subprocess.run(["scancel", "--state", "PENDING"], env=env, check=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--before", default="", help="another hpcq command to measure beside")
    ap.add_argument("--skip-slurm", action="store_true")
    ap.add_argument("--label", default="")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    if a.inside:
        for r in range(a.runs):  # interleaved, so that both see the same machine
            for system, hpcq in (("hpcq", f"{build}/cli/hpcq"), ("hpcq-before", a.before),
                                 ("hpcq-slurm", f"{build}/cli/hpcq")):
                if hpcq:
                    for line in measure(system, hpcq, 1, a.calls):
                        print(json.dumps(dict(line, run=r + 1)), flush=True)
        return
    results = hpcq_runs(build, a.runs, a.calls, os.path.abspath(a.before) if a.before else "")
    if not a.skip_slurm:
        results += slurm_runs(a.runs, a.calls)
    commit = throughput.commit()
    when = time.strftime("%Y-%m-%dT%H:%M:%S")
    host = throughput.host()
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "cli_latency.jsonl"), "a") as f:
        for r in results:
            r.update(when=when, calls=a.calls, commit=commit, host=host,
                     **({"label": a.label} if a.label else {}))
            f.write(json.dumps(r) + "\n")
    print("| case | hpcq min / median ms | hpcq-before | hpcq's sbatch, squeue | Slurm | "
          "Slurm / hpcq (median) | Slurm / hpcq's sbatch |")
    print("|---|---|---|---|---|---|---|")
    for case in CASES:
        def stats(system):
            v = [r["median_ms"] for r in results if r["system"] == system and r["case"] == case]
            return (min(v), statistics.median(v)) if v else None
        h, b, c, s = stats("hpcq"), stats("hpcq-before"), stats("hpcq-slurm"), stats("slurm")
        fmt = lambda x: f"{x[0]:.1f} / {x[1]:.1f}" if x else "-"
        ratio = lambda x, y: f"{y[1] / x[1]:.2f}x" if x and y else "-"
        print(f"| {case} | {fmt(h)} | {fmt(b)} | {fmt(c)} | {fmt(s)} | {ratio(h, s)} | "
              f"{ratio(c, s)} |")


if __name__ == "__main__":
    main()
