#!/usr/bin/env python3
"""Paper 001's experiment on a real (emulated) cluster, compared with the
simulation of the same job set (hpcq issue 7, item 5's real-cluster half).

The cluster: `hpcq start` with 64 agents of one core each (--topology
"core:1 pu:1"): 64 slots, as the paper's, and one replica = one node, the
unit hpcq's elastic jobs grow and shrink by (4 agents of 16 slots would
make a node the unit of 16 replicas, which the paper's 2-8 replica jobs
cannot use). The scheduler: the simulator's "elastic" policy (actions
enqueue, elastic, allocate, backfill; EASY; elastic.rescale_gap_s).

The jobs: one job set drawn as bench/elastic_paper.py draws them (16 jobs,
random class and priority 1-5; --seed), each the sample elastic app
(examples/elastic_app) run with the same Amdahl model the simulator uses:
an iteration takes serial_ms + step_ms / nodes, T1 = iterations x
(serial_ms + step_ms), s = serial_ms / (serial_ms + step_ms), so the app on
n nodes runs T1 (s + (1 - s)/n), re-cut on every resize it acknowledges.
Time is compressed by --compress K (default 10): T1, the submission gap
and the rescale gap are divided by K, and the measured times multiplied by
K before they are compared with the simulation of the uncompressed set.

Per policy (rigid-min, rigid-max, moldable, elastic: as elastic_paper.py
builds them): total time (last end - first submit), utilisation (node-
seconds held, resizes counted, over 64 x total), priority-weighted mean
response and completion, resizes; the same from `hpcq simulate --jobs` on
the same set; and the ratio real / simulated. The real run includes what
the simulation leaves out: launching tasks, the resize protocol (the app
answers at its next iteration), the scheduler's cycle timing.

Usage (root; hpcq built in build/):
  bench/elastic_cluster.py [--build build] [--seed 1] [--compress 10]
      [--policies elastic,moldable,rigid-min,rigid-max] [--gap 90] [--rescale 60]
Results: one JSON line per policy appended to bench/results/elastic_cluster.jsonl.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import elastic_paper as paper  # noqa: E402

ITERATIONS = 1000

INSIDE = r"""
import json, os, subprocess, sys, time
hpcq, app, plan_path, work = sys.argv[1:5]
plan = json.load(open(plan_path))
t0 = time.monotonic()
ids = []
for job in plan:
    delay = job["submit_s"] - (time.monotonic() - t0)
    if delay > 0:
        time.sleep(delay)
    out = subprocess.run([hpcq, "submit", *job["args"], "-o", "/dev/null", "--", app,
                          "--iterations", str(job["iterations"]), "--serial-ms",
                          str(job["serial_ms"]), "--step-ms", str(job["step_ms"]),
                          "--out", os.path.join(work, f"app-{len(ids)}.out")],
                         check=True, capture_output=True, text=True)
    ids.append(out.stdout.strip())
subprocess.run([hpcq, "wait", *ids], capture_output=True)
print(json.dumps([json.loads(subprocess.run([hpcq, "status", i, "--json"], check=True,
                                            capture_output=True, text=True).stdout)
                  for i in ids]))
"""


def plan_for(drawn, policy, gap, compress):
    plan = []
    for i, job in enumerate(paper.job_file(drawn, policy, gap)):
        lo, hi = job["min_nodes"], job["max_nodes"]
        s = job["serial_fraction"]
        t1 = job["runtime_s"] / paper.amdahl(lo, s) / compress  # seconds on one node
        per_iteration_ms = 1000.0 * t1 / ITERATIONS
        args = ["-N", f"{lo}-{hi}" if hi > lo else str(lo), "--priority", str(job["priority"])]
        if job["elastic"]:
            args.append("--elastic")
        plan.append({"submit_s": job["submit_s"] / compress, "args": args,
                     "iterations": ITERATIONS, "serial_ms": round(s * per_iteration_ms, 3),
                     "step_ms": round((1 - s) * per_iteration_ms, 3),
                     "priority": job["priority"]})
    return plan


def node_seconds(job):
    """Nodes held over time, acknowledged resizes counted."""
    start, end = job["start_time"], job["end_time"]
    changes = [r for r in job["resizes"]
               if r["outcome"] in ("acknowledged", "timed_out") and r["answered"]]
    n = changes[0]["from"] if changes else len(job["nodes"])
    total, t = 0.0, start
    for r in changes:
        if r["kind"] == "expand" and r["outcome"] == "timed_out":
            pass  # the nodes stay: counted from the answer on
        total += n * (r["answered"] - t)
        t, n = r["answered"], r["to"]
    return total + n * (end - t)


def measure(jobs, compress):
    first = min(j["submit_time"] for j in jobs)
    last = max(j["end_time"] for j in jobs)
    total = (last - first) * compress
    used = sum(node_seconds(j) for j in jobs) * compress
    weights = sum(j["priority"] for j in jobs)
    resp = sum(j["priority"] * (j["start_time"] - j["submit_time"]) for j in jobs) * compress
    compl = sum(j["priority"] * (j["end_time"] - j["submit_time"]) for j in jobs) * compress
    return {"total_s": total, "utilization_pct": 100.0 * used / (paper.SLOTS * total),
            "weighted_response_s": resp / weights, "weighted_completion_s": compl / weights,
            "resizes": sum(len(j["resizes"]) for j in jobs)}


def run_cluster(build, plan, rescale, compress, work):
    config = os.path.join(work, "elastic.toml")
    with open(config, "w") as f:
        f.write(f"""
[scheduler]
actions = ["enqueue", "elastic", "allocate", "backfill"]
plugins = ["fcfs"]

[scheduler.options]
"backfill.reservation_depth" = 1
"elastic.rescale_gap_s" = {max(1, round(rescale / compress))}
""")
    plan_path = os.path.join(work, "plan.json")
    with open(plan_path, "w") as f:
        json.dump(plan, f)
    hpcq = os.path.join(build, "cli", "hpcq")
    app = os.path.join(build, "examples", "hpcq-elastic-app")
    out = subprocess.run([hpcq, "start", "--agents", str(paper.SLOTS), "--fanout", "8",
                          "--topology", "core:1 pu:1", "--config", config, "--log-level", "warn",
                          "--", sys.executable, "-c", INSIDE, hpcq, app, plan_path, work],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"elastic_cluster: the cluster run failed:\n{out.stderr[-3000:]}")
    jobs = json.loads(out.stdout.strip().splitlines()[-1])
    for job, p in zip(jobs, plan):
        job["priority"] = p["priority"]
        if job["state"] != "COMPLETED":
            raise SystemExit(f"elastic_cluster: job {job['id']} is {job['state']}: {job['reason']}")
    return measure(jobs, compress)


def run_sim(build, drawn, policy, gap, rescale, work):
    path = os.path.join(work, "jobs.json")
    with open(path, "w") as f:
        json.dump(paper.job_file(drawn, policy, gap), f)
    total, util, resp, compl, resizes = paper.simulate(
        os.path.join(build, "cli", "hpcq"), path, rescale)
    return {"total_s": total, "utilization_pct": util, "weighted_response_s": resp,
            "weighted_completion_s": compl, "resizes": resizes}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--compress", type=float, default=10)
    ap.add_argument("--policies", default="elastic,moldable,rigid-min,rigid-max")
    ap.add_argument("--gap", type=float, default=paper.TABLE_GAP)
    ap.add_argument("--rescale", type=float, default=paper.DEFAULT_RESCALE)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    drawn = paper.draw(random.Random(args.seed))
    keys = ["total_s", "utilization_pct", "weighted_response_s", "weighted_completion_s",
            "resizes"]
    print(f"job set seed {args.seed}: {drawn}")
    print(f"{'policy':10} " + " ".join(f"{k:>28}" for k in keys[:4]) + f" {'resizes':>12}")
    for policy in args.policies.split(","):
        with tempfile.TemporaryDirectory(prefix="hpcq-elastic-") as work:
            os.chmod(work, 0o1777)
            plan = plan_for(drawn, policy, args.gap, args.compress)
            started = time.monotonic()
            real = run_cluster(build, plan, args.rescale, args.compress, work)
            wall = time.monotonic() - started
            sim = run_sim(build, drawn, policy, args.gap, args.rescale, work)
        row = {"bench": "elastic_cluster", "policy": policy, "seed": args.seed,
               "compress": args.compress, "submit_gap_s": args.gap, "rescale_gap_s": args.rescale,
               "serial_fraction": paper.SERIAL, "real": real, "simulated": sim,
               "wall_s": round(wall, 1),
               "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        with open(os.path.join(HERE, "results", "elastic_cluster.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")
        cells = [f"{real[k]:8.1f} | {sim[k]:8.1f} ({real[k] / sim[k] if sim[k] else 0:4.2f})"
                 for k in keys[:4]]
        print(f"{policy:10} " + " ".join(f"{c:>28}" for c in cells) +
              f" {real['resizes']:5d} | {sim['resizes']:4.0f}", flush=True)


if __name__ == "__main__":
    main()
