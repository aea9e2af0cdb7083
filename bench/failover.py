#!/usr/bin/env python3
"""Leader failover and the cost of replication (issue 25, item 6).

(1) Failover time: `hpcq start --agents 4 --leaders 3` (three hpcqd
    candidates on an etcd of three members, all on this host); the active
    leader gets kill -9 --kills times, while a job runs; each time, the
    seconds from the kill until another candidate leads and answers `hpcq
    queue`; the killed candidate is started again (it stands by) before the
    next kill. Median and max.
(2) The cost of replication, in the same run, round by round: acknowledged
    submissions per second (hpcq-submit-load, 1 and 8 clients, jobs `true`
    that run meanwhile) and end-to-end jobs per second (8 clients; each run
    waits for its jobs before the next),
    on `hpcq start --agents 4` with its SQLite store against `--leaders 3`
    (etcd of three members on the same 2 cores: the members' CPU is part of
    the cost here; on a real cluster they run on other hosts).

Usage: bench/failover.py [--kills 10] [--rounds 3] [--jobs 1000] [--label L]
Run as root on an idle machine; never two benchmarks at once. Appends one JSON
line per measurement to bench/results/failover.jsonl and prints a summary.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import throughput  # noqa: E402  (its commit() and host())

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Runs inside the cluster: kills the active candidate KILLS times.
KILLER = r'''
import json, os, re, signal, subprocess, sys, time
kills = int(sys.argv[1])
cluster = os.path.dirname(os.environ["HPCQ_SOCKET"])
logs = os.path.join(cluster, "logs")

def active():
    latest = None
    for f in os.listdir(logs):
        if not re.match(r"hpcqd-\d+\.log$", f):
            continue
        for line in open(os.path.join(logs, f), errors="replace"):
            m = re.match(r"(\S+) info hpcqd: (leader-\d+) leads", line)
            if m and (latest is None or m.group(1) > latest[1]):
                latest = (m.group(2), m.group(1))
    return latest[0]

def pid_of(name):
    out = subprocess.run(["pgrep", "-f", f"hpcqd --config {cluster}/hpcq.toml .*--name {name} "],
                         capture_output=True, text=True).stdout.split()
    return int(out[0])

def answers():
    try:
        return subprocess.run(["hpcq", "queue"], capture_output=True, timeout=2).returncode == 0
    except subprocess.TimeoutExpired:
        return False

job = subprocess.run(["hpcq", "submit", "-o", "/dev/null", "--", "sleep", "3600"],
                     capture_output=True, text=True, check=True).stdout.strip()
times = []
restarted = []
for k in range(kills):
    old = active()
    pid = pid_of(old)
    cmdline = open(f"/proc/{pid}/cmdline").read().split("\0")[:-1]
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    while not (active() != old and answers()):
        if time.monotonic() - killed > 60:
            raise SystemExit(f"no leader 60 s after kill {k + 1}")
        time.sleep(0.02)
    times.append(round(time.monotonic() - killed, 3))
    log = open(os.path.join(logs, f"hpcqd-{old.split('-')[1]}.log"), "a")
    restarted.append(subprocess.Popen(cmdline, stdout=log, stderr=log))
    time.sleep(1.5)  # it campaigns and stands by
state = json.loads(subprocess.run(["hpcq", "status", job, "--json"], capture_output=True,
                                  text=True).stdout)["state"]
print(json.dumps({"failover_seconds": times, "job_state_after": state}))
for p in restarted:  # not hpcq start's children: it would not stop them
    p.terminate()
    p.wait()
'''


def in_cluster(build, extra, script):
    env = dict(os.environ, PATH=f"{build}/cli:{build}/bench:" + os.environ["PATH"])
    out = subprocess.run([f"{build}/cli/hpcq", "start", "--agents", "4", "--topology",
                          "pack:1 numa:1 core:2 pu:1", "--log-level", "info", *extra,
                          "--", "bash", "-c", script],
                         check=True, capture_output=True, text=True, env=env)
    return [json.loads(line) for line in out.stdout.strip().splitlines()
            if line.startswith("{") and line.endswith("}")]


def load(build, store, jobs):
    """Acknowledged submissions with 1 and 8 clients, and 8 clients' jobs end
    to end; each run waits for its own jobs, so that none queues behind
    another run's."""
    extra = ("--leaders", "3") if store == "etcd" else ()
    script = f"hpcq-submit-load -n {jobs} -c 1 --wait && hpcq-submit-load -n {jobs} -c 8 --wait"
    lines = [x for x in in_cluster(build, extra, script) if "jobs" in x]
    if len(lines) != 2:
        raise SystemExit(f"hpcq-submit-load gave {lines}")
    one, eight = lines
    return {"submit_per_second_1_client": one["submit_per_second"],
            "submit_per_second_8_clients": eight["submit_per_second"],
            "end_to_end_per_second_8_clients": eight["per_second"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    results = os.path.join(HERE, "results", "failover.jsonl")
    base = {"commit": throughput.commit(), "host": throughput.host(), "label": args.label}
    lines = []

    def record(line):
        line.update(base, when=time.strftime("%Y-%m-%dT%H:%M:%S"), load=os.getloadavg()[0])
        lines.append(line)
        print(json.dumps(line), flush=True)
        with open(results, "a") as f:
            f.write(json.dumps(line) + "\n")

    script = f"python3 - {args.kills} <<'EOF'\n{KILLER}\nEOF"
    (failover,) = in_cluster(args.build, ("--leaders", "3", "--node-down-after", "30"), script)
    record({"measurement": "failover", **failover})
    for r in range(1, args.rounds + 1):
        for store in ("sqlite", "etcd"):
            record({"measurement": "load", "store": store, "round": r, "jobs": args.jobs,
                    **load(args.build, store, args.jobs)})

    times = lines[0]["failover_seconds"]
    print(f"\nfailover after kill -9, {len(times)} kills: median {statistics.median(times):.2f} s, "
          f"max {max(times):.2f} s; the running job: {lines[0]['job_state_after']}")
    print("| per second (min / median) | SQLite | etcd, 3 members | etcd / SQLite (medians) |")
    print("|---|---|---|---|")
    for key in ("submit_per_second_1_client", "submit_per_second_8_clients",
                "end_to_end_per_second_8_clients"):
        by = {s: [x[key] for x in lines if x.get("store") == s] for s in ("sqlite", "etcd")}
        med = {s: statistics.median(v) for s, v in by.items()}
        print(f"| {key} | {min(by['sqlite']):.0f} / {med['sqlite']:.0f} | "
              f"{min(by['etcd']):.0f} / {med['etcd']:.0f} | {med['etcd'] / med['sqlite']:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
