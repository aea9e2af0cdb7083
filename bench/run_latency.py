#!/usr/bin/env python3
"""Launch latency of hpcq run against Slurm's srun (issue 22's bench).

Command to exit of `run -n 1 true` and `run -N 4 -n 4 true`, each both
outside an allocation (the command makes a job and runs it) and as a step
inside one (a batch job holding the 4 nodes; hpcq: HPCQ_JOB_ID set, Slurm:
`srun --jobid --overlap`), on hpcq (`hpcq start --agents 4`, 2 cores per
node) and on Slurm 22.05 from Debian (slurmctld + 4 slurmd on loopback,
../shared/peers/slurm, 4 x 2 CPUs), in the same session. Each run times
--launches launches one after another and keeps their median; --runs runs
per case give the min and median reported (ms).

Usage: bench/run_latency.py [--runs 3] [--launches 20] [--skip-slurm] [--label L]
Run as root on an idle machine; never two benchmarks at once. Appends one JSON
line per run to bench/results/run_latency.jsonl and prints a summary table.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from slurm_peer import slurm_cluster

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CASES = {"1_task": ["-n", "1"], "4_nodes_4_tasks": ["-N", "4", "-n", "4"]}


def time_launches(cmd, launches, env=None):
    """The median wall time of `launches` runs of cmd, in ms."""
    times = []
    for _ in range(launches):
        t0 = time.monotonic()
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        times.append((time.monotonic() - t0) * 1000)
    return statistics.median(times)


def hpcq_runs(build, runs, launches):
    """Inside `hpcq start`: this script again with --inside."""
    out = subprocess.run(
        [f"{build}/cli/hpcq", "start", "--agents", "4", "--topology", "pack:1 numa:1 core:2 pu:1",
         "--", sys.executable, os.path.abspath(__file__), "--inside", "--build", build,
         "--runs", str(runs), "--launches", str(launches)],
        check=True, capture_output=True, text=True).stdout
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


def inside(build, runs, launches):
    hpcq = f"{build}/cli/hpcq"
    env = dict(os.environ)
    env.pop("HPCQ_JOB_ID", None)
    d = tempfile.mkdtemp(prefix="hpcq-bench-")
    gate = os.path.join(d, "gate")
    script = os.path.join(d, "hold.sh")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\n#HPCQ -N 4 -n 8 -o /dev/null\n"
                f"while [ ! -e {gate} ]; do sleep 0.1; done\n")
    os.chmod(script, 0o755)
    for r in range(runs):
        for case, args in CASES.items():
            ms = time_launches([hpcq, "run", *args, "--", "true"], launches, env)
            print(json.dumps(dict(system="hpcq", where="outside", case=case, run=r + 1,
                                  median_ms=round(ms, 2))), flush=True)
        job = subprocess.run([hpcq, "batch", script], check=True, capture_output=True, text=True,
                             env=env, cwd=d).stdout.strip()
        while json.loads(subprocess.run([hpcq, "status", job, "--json"], check=True,
                                        capture_output=True, text=True).stdout)["state"] != "RUNNING":
            time.sleep(0.05)
        step_env = dict(env, HPCQ_JOB_ID=job)
        for case, args in CASES.items():
            ms = time_launches([hpcq, "run", *args, "--", "true"], launches, step_env)
            print(json.dumps(dict(system="hpcq", where="step", case=case, run=r + 1,
                                  median_ms=round(ms, 2))), flush=True)
        open(gate, "w").close()
        subprocess.run([hpcq, "wait", job], env=env, stdout=subprocess.DEVNULL)
        os.remove(gate)


def slurm_runs(runs, launches):
    out = []
    with slurm_cluster() as (env, peer):
        for r in range(runs):
            for case, args in CASES.items():
                ms = time_launches(["srun", *args, "true"], launches, env)
                out.append(dict(system="slurm", where="outside", case=case, run=r + 1,
                                median_ms=round(ms, 2)))
            job = subprocess.run(["sbatch", "--parsable", "-N", "4", "-n", "8", "-o", "/dev/null",
                                  "--wrap", "sleep 600"], check=True, capture_output=True,
                                 text=True, env=env, cwd=peer).stdout.strip().split(";")[0]
            while subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True,
                                 text=True, env=env).stdout.strip() != "RUNNING":
                time.sleep(0.05)
            for case, args in CASES.items():
                ms = time_launches(["srun", "--jobid", job, "--overlap", *args, "true"], launches,
                                   env)
                out.append(dict(system="slurm", where="step", case=case, run=r + 1,
                                median_ms=round(ms, 2)))
            subprocess.run(["scancel", job], env=env)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--launches", type=int, default=20)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--skip-slurm", action="store_true")
    ap.add_argument("--label", default="")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    if a.inside:
        return inside(build, a.runs, a.launches)
    results = hpcq_runs(build, a.runs, a.launches)
    if not a.skip_slurm:
        results += slurm_runs(a.runs, a.launches)
    when = time.strftime("%Y-%m-%dT%H:%M:%S")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "run_latency.jsonl"), "a") as f:
        for r in results:
            r.update(when=when, launches=a.launches, **({"label": a.label} if a.label else {}))
            f.write(json.dumps(r) + "\n")
    print("| case | where | hpcq min / median ms | Slurm min / median ms | hpcq / Slurm (median) |")
    print("|---|---|---|---|---|")
    for case in CASES:
        for where in ("outside", "step"):
            def stats(system):
                v = [r["median_ms"] for r in results
                     if r["system"] == system and r["case"] == case and r["where"] == where]
                return (min(v), statistics.median(v)) if v else None
            h, s = stats("hpcq"), stats("slurm")
            fmt = lambda x: f"{x[0]:.1f} / {x[1]:.1f}" if x else "-"
            ratio = f"{h[1] / s[1]:.2f}" if h and s else "-"
            print(f"| {case} | {where} | {fmt(h)} | {fmt(s)} | {ratio} |")


if __name__ == "__main__":
    main()
