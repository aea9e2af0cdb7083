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
import socket
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit(f"no VmRSS for pid {pid}")


def leader(build):
    d = tempfile.mkdtemp(prefix="hpcq-mem-")
    key = os.path.join(d, "leader.key")
    public = subprocess.run([f"{build}/cli/hpcq", "keygen", key], check=True,
                            capture_output=True, text=True).stdout.strip()
    with open(os.path.join(d, "hpcq.toml"), "w") as f:
        f.write(f'[leader]\nstate_dir = "{d}/state"\nsocket = "{d}/hpcqd.sock"\n'
                f'secret_key = "{key}"\n\n[[rank]]\nname = "leader"\n'
                f'endpoint = "tcp://127.0.0.1:{free_port()}"\npublic_key = "{public}"\n')
    log = open(os.path.join(d, "hpcqd.log"), "w")
    p = subprocess.Popen([f"{build}/daemon/hpcqd", "--config", f"{d}/hpcq.toml",
                          "--log-level", "warn"], stdout=log, stderr=log)
    env = dict(os.environ, HPCQ_SOCKET=f"{d}/hpcqd.sock")
    for _ in range(400):
        if subprocess.run([f"{build}/cli/hpcq", "queue"], env=env,
                          capture_output=True).returncode == 0:
            return p, env, d
        time.sleep(0.05)
    raise SystemExit("hpcqd did not start")


def measure(build, jobs, array_size):
    p, env, d = leader(build)
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
