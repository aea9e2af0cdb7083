#!/usr/bin/env python3
"""Control-plane scale benchmark (issue 9 figures), with the test executor
(agents run no process: a job "runs" for HPCQ_TEST_DURATION seconds, here 0),
so that hpcqd, the overlay and the agents are measured alone.

  (a) time until N emulated agents (default 256, fan-out 16: tree depth 2)
      are all up, from the start of `hpcq start`;
  (b) throughput with Q jobs queued at once (default 1K, 10K, 100K): the nodes
      are drained, Q jobs are submitted (8 clients), the nodes are resumed,
      and the time from resume to the last completion (seen on the WatchJobs
      stream) is measured, and also the steady rate between the 10th and the
      90th percentile of the ends (free of the fixed latency of the first
      start and the last report, which dominates a 1K run);
  (c) leader memory (VmRSS of hpcqd) per queued job, from the same runs.

Usage: bench/scale.py [--agents 256] [--queued 1000,10000,100000] [--repeat 3] [--build build]
Prints one JSON line per measurement and a table of the medians over the
repeats (sizes interleaved, so that a noisy minute does not hit one size
only); appends the JSON lines to bench/results/scale.jsonl. Run as root on an
idle machine: the leader uses a fraction of a core here, the 256 agents the
rest of the machine.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import throughput  # noqa: E402  (its commit() and host())

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

INNER = r'''
import json, os, subprocess, sys, time
Q = int(sys.argv[1]); N = int(sys.argv[2]); start_t = float(sys.argv[3])
def sh(*a): return subprocess.run(a, check=True, capture_output=True, text=True).stdout
up_s = time.time() - start_t
leader = [p for p in sh("pgrep", "-f", "hpcqd --config " + os.path.dirname(os.environ["HPCQ_SOCKET"])).split()][0]
def rss_kb():
    for line in open(f"/proc/{leader}/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1])
nodes = [f"node{i}" for i in range(1, N + 1)]
sh("hpcq", "drain", *nodes, "--reason", "bench")
rss0 = rss_kb()
load = subprocess.Popen(["hpcq-submit-load", "-n", str(Q), "-c", "8", "--wait"], stdout=subprocess.PIPE, text=True)
submitted = json.loads(load.stdout.readline())
rss1 = rss_kb()
t0 = time.time()
sh("hpcq", "resume", *nodes)
final = json.loads(load.stdout.read().strip().splitlines()[-1])
t1 = time.time()
assert load.wait() == 0 and final["completed"] == Q, final
load = dict(submit_per_second=round(Q / submitted["submit_seconds"], 1))
steady = 0.8 * Q / max(final["end_p90_s"] - final["end_p10_s"], 1e-6)
print(json.dumps(dict(queued=Q, agents=N, agents_up_s=round(up_s, 2), submit_per_second=load["submit_per_second"],
                      drain_s=round(t1 - t0, 3), jobs_per_second=round(Q / (t1 - t0), 1),
                      steady_jobs_per_second=round(steady, 1),
                      leader_rss_kb_before=rss0, leader_rss_kb_queued=rss1,
                      bytes_per_queued_job=round((rss1 - rss0) * 1024 / Q, 1))))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=256)
    ap.add_argument("--fanout", type=int, default=16)
    ap.add_argument("--queued", default="1000,10000,100000")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--label", default="",
                    help="kept in each result line: what was measured (e.g. a commit)")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    env = dict(os.environ, PATH=f"{build}/cli:{build}/bench:" + os.environ["PATH"])
    results = []
    tree, machine = throughput.commit(), throughput.host()
    sizes = [int(x) for x in a.queued.split(",")]
    for q in [q for _ in range(a.repeat) for q in sizes]:
        start_t = time.time()
        out = subprocess.run([f"{build}/cli/hpcq", "start", "--agents", str(a.agents), "--fanout",
                              str(a.fanout), "--executor", "test", "--topology",
                              "pack:1 numa:1 core:4 pu:1", "--log-level", "warn", "--wait", "300",
                              "--", sys.executable, "-c", INNER, str(q), str(a.agents), str(start_t)],
                             env=env, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"scale run with {q} queued failed:\n{out.stderr[-3000:]}")
        r = json.loads(out.stdout.strip().splitlines()[-1])
        r["when"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        r.update(host=machine, commit=tree)
        if a.label:
            r["label"] = a.label
        print(json.dumps(r), flush=True)
        results.append(r)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "scale.jsonl"), "a") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    def median(values):
        values = sorted(values)
        return values[len(values) // 2]
    print()
    print(f"medians of {a.repeat} runs each")
    print("| jobs queued at once | agents up (s) | drain time (s) | jobs/s (all) | jobs/s (10-90%) "
          "| 10-90% rate / smallest size's | leader bytes per queued job |")
    print("|---|---|---|---|---|---|---|")
    base = None
    for q in sizes:
        runs = [r for r in results if r["queued"] == q]
        steady = median([r["steady_jobs_per_second"] for r in runs])
        base = base or steady
        print(f"| {q:,} | {median([r['agents_up_s'] for r in runs])} | "
              f"{median([r['drain_s'] for r in runs])} | "
              f"{median([r['jobs_per_second'] for r in runs]):,.0f} | {steady:,.0f} | "
              f"{steady / base:.2f} | {median([r['bytes_per_queued_job'] for r in runs]):,.0f} |")


if __name__ == "__main__":
    main()
