#!/usr/bin/env python3
"""The overhead of hpcq's resize protocol (hpcq issue 7), measured on a real
hpcqd and 4 real agents on this machine (`hpcq start`).

What it does: submits the sample elastic app (examples/elastic_app) with
-N 1-4 --elastic and one whole node per task, waits until it runs on all 4
nodes, then --rounds times: `hpcq resize JOB --nodes 2` (a shrink: the agent
on the first node rewrites the node list files, signals the app and writes
the notice on its socket; the app acknowledges; the leader then kills the
parts on the 2 removed nodes) and `hpcq resize JOB --nodes 4` (an expansion:
the leader starts the job's tasks on the 2 added nodes, then tells the app).
The scheduler's "elastic" action starts it on 4 nodes; its rescale gap is set
so long that nothing but these commands resizes it.

Three figures per resize, from the job's resize records (hpcq status --json):
  app_ms     the agent's measure: notice written (right after the signal) to
             the app's "ack" read back; the app polls its socket once per
             iteration, so this is bounded below by its iteration time
             (--step-ms / nodes; default 4 ms / nodes)
  leader_ms  the leader's: its decision to the outcome recorded (for an
             expansion this includes starting the tasks on the new nodes)
  cli_ms     `hpcq resize` wall time as a user sees it (gRPC, process start)
Output: one JSON line per kind with the median, p90 and max of each, and the
settings.

Usage (root, from the repository root, after `ninja -C build`):
  bench/resize_overhead.py [--build build] [--rounds 20] [--step-ms 4]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# The "elastic" action starts the app at its maximum (4 idle nodes); its
# rescale gap keeps the scheduler from resizing it afterwards, so only the
# bench's commands do.
CONFIG = """
[scheduler]
actions = ["elastic", "allocate"]
plugins = ["fcfs"]

[scheduler.options.elastic]
rescale_gap_s = 1000000
"""


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p * (len(values) - 1))))]


def summary(values):
    return {"median": round(statistics.median(values), 2), "p90": round(percentile(values, 0.9), 2),
            "max": round(max(values), 2)}


def inside(args):
    hpcq = os.path.join(args.build, "cli", "hpcq")
    app = os.path.join(args.build, "examples", "hpcq-elastic-app")
    work = tempfile.mkdtemp(prefix="hpcq-resize-bench-")
    os.chmod(work, 0o1777)

    def run(*words, check=True):
        p = subprocess.run([hpcq, *words], capture_output=True, text=True, cwd=work)
        if check and p.returncode != 0:
            sys.exit(f"hpcq {' '.join(words)}: {p.stderr.strip()}")
        return p

    def status(job):
        return json.loads(run("status", str(job), "--json").stdout)

    job = int(run("submit", "-N", "1-4", "--elastic", "-c", "16", "-t", "1:00:00", "--", app,
                  "--out", os.path.join(work, "app.out"), "--iterations", "100000000",
                  "--step-ms", str(args.step_ms)).stdout)
    deadline = time.monotonic() + 60
    while len(status(job)["nodes"]) != 4 or not os.path.exists(os.path.join(work, "app.out")):
        if time.monotonic() > deadline:
            sys.exit("the app did not start on 4 nodes")
        time.sleep(0.05)
    cli = {"shrink": [], "expand": []}
    try:
        for _ in range(args.rounds):
            for nodes in (2, 4):
                while True:
                    start = time.monotonic()
                    p = run("resize", str(job), "--nodes", str(nodes), "--json", check=False)
                    took = (time.monotonic() - start) * 1000
                    if p.returncode == 0:
                        break
                    if "still ending" not in p.stderr:  # the removed parts' ends are not in yet
                        sys.exit(f"hpcq resize: {p.stderr.strip() or p.stdout.strip()}")
                    time.sleep(0.01)
                cli["shrink" if nodes == 2 else "expand"].append(took)
    finally:
        run("cancel", str(job), check=False)
    records = status(job)["resizes"]
    for kind in ("shrink", "expand"):
        mine = [r for r in records if r["kind"] == kind and r["outcome"] == "acknowledged"]
        print(json.dumps({
            "kind": kind, "resizes": len(mine), "nodes": "4->2" if kind == "shrink" else "2->4",
            "app_ms": summary([r["answer_seconds"] * 1000 for r in mine]),
            "leader_ms": summary([(r["answered"] - r["time"]) * 1000 for r in mine]),
            "cli_ms": summary(cli[kind]),
            "app_iteration_ms": {"at_2_nodes": args.step_ms / 2, "at_4_nodes": args.step_ms / 4},
            "agents": 4, "host_cpus": os.cpu_count()}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--step-ms", type=float, default=4)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    if args.inside:
        return inside(args)
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(CONFIG)
    cmd = [os.path.join(args.build, "cli", "hpcq"), "start", "--agents", "4", "--fanout", "2",
           "--topology", "pack:2 numa:2 core:4 pu:1", "--config", f.name, "--",
           sys.executable, os.path.abspath(__file__), "--inside", "--build", args.build,
           "--rounds", str(args.rounds), "--step-ms", str(args.step_ms)]
    env = dict(os.environ, HPCQ_BUILD_ROOT=args.build)
    code = subprocess.run(cmd, env=env).returncode
    os.unlink(f.name)
    sys.exit(code)


if __name__ == "__main__":
    main()
