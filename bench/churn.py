#!/usr/bin/env python3
"""Issue 9 (d): end-to-end throughput through real agents (process executor,
each job runs `true`) while one interior agent is killed with -9 and
restarted every 10 s, against a baseline in the same cluster without kills.

The cluster is `hpcq start --agents 16 --fanout 4`: ranks 1-4 are interior,
each relaying for 3 leaves. Rank 1 is the one killed: its leaves detour to
the leader within two heartbeats and come back when it returns. Jobs that
were running on rank 1 itself when it died end NODE_FAIL (they are counted);
every other job must complete.

Usage: bench/churn.py [--jobs 6000] [--build build]
Prints one JSON line and appends it to bench/results/churn.jsonl.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

INNER = r'''
import json, os, signal, subprocess, sys, threading, time
jobs = int(sys.argv[1])
cfg = os.path.dirname(os.environ["HPCQ_SOCKET"]) + "/hpcq.toml"

def run_load():
    out = subprocess.run(["hpcq-submit-load", "-n", str(jobs), "-c", "8", "--wait"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])

def agent_pid(rank):
    out = subprocess.run(["pgrep", "-o", "-f", f"hpcq-agent --config {cfg} --rank {rank} "],
                         capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else None

baseline = run_load()
stop = threading.Event()
kills = []
restarted = []
def churn():
    while not stop.wait(10):
        pid = agent_pid(1)
        if pid is None:
            continue
        argv = open(f"/proc/{pid}/cmdline").read().split("\0")[:-1]
        os.kill(pid, signal.SIGKILL)
        kills.append(time.time())
        time.sleep(1)
        log = open(os.path.dirname(cfg) + "/logs/agent-1.log", "a")
        restarted.append(subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True))
t = threading.Thread(target=churn)
t.start()
churned = run_load()
stop.set()
t.join()
# hpcq start stops only the agents it started.
for p in restarted:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
print(json.dumps({"baseline": baseline, "churn": churned, "kills": len(kills)}))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=6000)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    env = dict(os.environ, PATH=f"{build}/cli:{build}/bench:{build}/agent:" + os.environ["PATH"])
    out = subprocess.run([f"{build}/cli/hpcq", "start", "--agents", "16", "--fanout", "4",
                          "--topology", "pack:1 numa:1 core:2 pu:1", "--log-level", "warn", "--",
                          sys.executable, "-c", INNER, str(args.jobs)],
                         check=True, capture_output=True, text=True, env=env)
    inner = json.loads(out.stdout.strip().splitlines()[-1])
    b, c = inner["baseline"], inner["churn"]
    result = {
        "bench": "churn", "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "jobs": args.jobs,
        "agents": 16, "fanout": 4, "kills": inner["kills"],
        "baseline_per_second": b.get("per_second"), "churn_per_second": c.get("per_second"),
        "ratio": round(c["per_second"] / b["per_second"], 3) if b.get("per_second") else None,
        "baseline_completed": b.get("completed"), "churn_completed": c.get("completed"),
        "churn_acked": c.get("acked"),
    }
    print(json.dumps(result))
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "churn.jsonl"), "a") as f:
        f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
