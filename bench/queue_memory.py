#!/usr/bin/env python3
"""hpcqd's memory per queued job, with real submissions from a shell (issue
20, item 17).

A leader with no agents (every job stays queued) gets (a) --jobs separate
`hpcq submit -o /dev/null -- true` calls from a shell loop, each carrying
this shell's whole environment as a user's would, and (b) one array of
--array-size tasks; the leader's VmRSS is read before and after each, and
the growth divided by the jobs queued. Each --build given is measured in
turn, --repeat times, interleaved (to compare two builds back to back).

Usage: bench/queue_memory.py [--build build ...] [--jobs 2000] [--array-size 10001]
           [--repeat 3] [--label NAME ...]
Prints one JSON line per measurement and the medians; appends the lines to
bench/results/queue_memory.jsonl. Run as root on an idle machine.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from throughput import standalone_leader  # noqa: E402  (a leader with no agents)


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit(f"no VmRSS for pid {pid}")


def measure(build, jobs, array_size):
    p, env, d = standalone_leader(build)
    try:
        time.sleep(1)
        before = rss_kb(p.pid)
        loop = f'for i in $(seq {jobs}); do "{build}/cli/hpcq" submit -o /dev/null -- true; done'
        subprocess.run(["bash", "-c", loop], env=env, check=True, capture_output=True, cwd=d)
        time.sleep(1)
        after_loop = rss_kb(p.pid)
        subprocess.run([f"{build}/cli/hpcq", "submit", "-o", "/dev/null",
                        f"--array=0-{array_size - 1}", "--", "true"], env=env, check=True,
                       capture_output=True, cwd=d)
        time.sleep(1)
        after_array = rss_kb(p.pid)
        return {"jobs": jobs, "array_size": array_size,
                "environment_bytes": sum(len(k) + len(v) + 2 for k, v in os.environ.items()),
                "rss_kb_before": before, "rss_kb_after_jobs": after_loop,
                "rss_kb_after_array": after_array,
                "bytes_per_submitted_job": round((after_loop - before) * 1024 / jobs),
                "bytes_per_array_task": round((after_array - after_loop) * 1024 / array_size)}
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", action="append")
    ap.add_argument("--label", action="append", help="one per --build, kept in its lines")
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--array-size", type=int, default=10001)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    builds = [os.path.abspath(b) for b in (a.build or [os.path.join(ROOT, "build")])]
    labels = a.label or builds
    if len(labels) != len(builds):
        raise SystemExit("queue_memory: give one --label per --build")
    results = []
    for _ in range(a.repeat):
        for build, label in zip(builds, labels):
            r = measure(build, a.jobs, a.array_size)
            r.update(label=label, when=time.strftime("%Y-%m-%dT%H:%M:%S"))
            print(json.dumps(r), flush=True)
            results.append(r)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "queue_memory.jsonl"), "a") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    print()
    print("| build | bytes per submitted job (min / median) | bytes per array task (min / median) |")
    print("|---|---|---|")
    for label in labels:
        runs = [r for r in results if r["label"] == label]
        jobs = sorted(r["bytes_per_submitted_job"] for r in runs)
        tasks = sorted(r["bytes_per_array_task"] for r in runs)
        print(f"| {label} | {jobs[0]:,} / {jobs[len(jobs) // 2]:,} | "
              f"{tasks[0]:,} / {tasks[len(tasks) // 2]:,} |")


if __name__ == "__main__":
    main()
