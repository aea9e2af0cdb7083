#!/usr/bin/env python3
"""The cost of running a job in an OCI container rather than as plain
processes: the paper's c (papers/004: the efficiency of a containerised job,
native time / container time; its bound on the load a gap queue adds is
0.1 (1 - t) c).

What it measures, through hpcq itself (`hpcq start --agents 1`, the process
executor): the same CPU-bound job -- busybox sh counting to N, one task on
one core -- submitted as processes and with --image (a busybox-static root
file system: runc, cgroups, the static container shell), alternately, R
times each; the job's time is its end minus its start as hpcqd records them
(so it includes starting the container). Also a `true` job both ways: the
start-up overhead alone. c is the median native time over the median
container time of the CPU-bound job.

Output: one JSON line on stdout, also appended to bench/results/
container_slowdown.jsonl:
  {"count_to": N, "reps": R, "native_s": [...], "container_s": [...],
   "native_median_s": .., "container_median_s": .., "c": 0.99,
   "true_native_median_s": .., "true_container_median_s": .., "overhead_s": ..}

Usage (root; runc and busybox-static installed, hpcq built in build/):
  bench/container_slowdown.py [--build build] [--count-to 3000000] [--reps 5]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

INSIDE = r"""
import json, os, subprocess, sys, time
hpcq, rootfs, count_to, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
work = os.environ["WORK"]

def run(*args):
    job = subprocess.run([hpcq, "submit", "-n", "1", "-o", "/dev/null", *args], cwd=work,
                         check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run([hpcq, "wait", job], check=True, capture_output=True)
    s = json.loads(subprocess.run([hpcq, "status", job, "--json"], check=True,
                                  capture_output=True, text=True).stdout)
    if s["state"] != "COMPLETED":
        raise SystemExit(f"job {job}: {s['state']} {s['reason']}")
    return s["end_time"] - s["start_time"]

loop = f"i=0; while [ $i -lt {count_to} ]; do i=$((i+1)); done"
native, container, true_native, true_container = [], [], [], []
for _ in range(reps):
    native.append(run("--", "/bin/busybox", "sh", "-c", loop))
    container.append(run("--image", rootfs, "--", "/bin/busybox", "sh", "-c", loop))
    true_native.append(run("--", "/bin/busybox", "true"))
    true_container.append(run("--image", rootfs, "--", "/bin/busybox", "true"))
print(json.dumps(dict(native=native, container=container, true_native=true_native,
                      true_container=true_container)))
"""


def busybox_rootfs():
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not os.path.exists(busybox):
        raise SystemExit("busybox (Debian's busybox-static) is not installed")
    root = tempfile.mkdtemp(prefix="hpcq-bench-rootfs-")
    os.chmod(root, 0o755)
    os.makedirs(os.path.join(root, "bin"))
    shutil.copy(busybox, os.path.join(root, "bin", "busybox"))
    os.symlink("busybox", os.path.join(root, "bin", "sh"))
    return root, busybox


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--count-to", type=int, default=3_000_000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    hpcq = os.path.join(os.path.abspath(args.build), "cli", "hpcq")
    rootfs, busybox = busybox_rootfs()
    work = tempfile.mkdtemp(prefix="hpcq-bench-work-")
    os.chmod(work, 0o1777)
    if not os.path.exists("/bin/busybox"):
        raise SystemExit("the native job runs /bin/busybox: install busybox-static")
    try:
        out = subprocess.run([hpcq, "start", "--agents", "1", "--log-level", "warn", "--",
                              sys.executable, "-c", INSIDE, hpcq, rootfs, str(args.count_to),
                              str(args.reps)],
                             capture_output=True, text=True, env=dict(os.environ, WORK=work))
        if out.returncode != 0:
            raise SystemExit(f"container_slowdown: the run failed:\n{out.stderr[-2000:]}")
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    med = statistics.median
    result = {
        "count_to": args.count_to, "reps": args.reps,
        "native_s": [round(x, 3) for x in r["native"]],
        "container_s": [round(x, 3) for x in r["container"]],
        "native_median_s": round(med(r["native"]), 3),
        "container_median_s": round(med(r["container"]), 3),
        "c": round(med(r["native"]) / med(r["container"]), 4),
        "true_native_median_s": round(med(r["true_native"]), 3),
        "true_container_median_s": round(med(r["true_container"]), 3),
        "overhead_s": round(med(r["true_container"]) - med(r["true_native"]), 3),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    line = json.dumps(result)
    print(line)
    with open(os.path.join(ROOT, "bench", "results", "container_slowdown.jsonl"), "a") as f:
        f.write(line + "\n")


if __name__ == "__main__":
    main()
