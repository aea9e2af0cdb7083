#!/usr/bin/env python3
"""What a migration costs a running job in hpcq, end to end (hpcq issue 6:
the paper's t, as a user sees it), for the process executor and for OCI
containers (runc), by resident memory.

What it does, on a real hpcqd with 2 real agents on this machine (`hpcq
start`): for each executor and each size N MB it submits a one-task job that
holds N MB (a shell variable of N bytes: busybox sh in a busybox-static
image for the container, the host's /bin/busybox sh for the process) and
then counts once per 100 ms into its output; once it counts, `hpcq migrate
JOB --to <the other node>`; then waits until it counts on there. Figures
per run:
  dump_s     the agent's measure of the dump (CRIU, or runc checkpoint), from
             the job's checkpoint record
  migrate_s  `hpcq migrate` wall time: it returns once the images are written
             and the job is requeued
  resumed_s  from the migrate command to the first new count written on the
             target node (requeue, scheduling, restore, first step)
  image_mb   the images' size
  counts_on  the count went on with no gap and no restart from zero
The images go through the leader's checkpoint_dir on the same disk (a real
site's shared file system adds its transfer time: bench/checkpoint_cost.py
measures a copy).

Usage (root, from the repository root, after `ninja -C build`; CRIU >= 4 and
runc installed, as .ci/run does):
  bench/migrate_cost.py [--build build] [--sizes 10,100,1000] [--runs 3]
Output: one JSON line per executor and size (medians over the runs), also
appended to bench/results/migrate_cost.jsonl.
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


def holder(mb):
    return (f"x=$(head -c {mb * 1048576} /dev/zero | tr '\\0' x); "
            "i=0; while :; do i=$((i+1)); echo $i; sleep 0.1; done")


def counts(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [int(v) for v in f.read().split()]


def busybox_rootfs():
    root = tempfile.mkdtemp(prefix="hpcq-bench-rootfs-")
    os.chmod(root, 0o755)
    os.makedirs(os.path.join(root, "bin"))
    shutil.copy("/bin/busybox", os.path.join(root, "bin", "busybox"))
    for applet in ("sh", "head", "tr", "sleep", "echo"):
        os.symlink("busybox", os.path.join(root, "bin", applet))
    return root


def inside(args):
    hpcq = os.path.join(args.build, "cli", "hpcq")
    work = tempfile.mkdtemp(prefix="hpcq-migrate-bench-")
    os.chmod(work, 0o1777)
    image = busybox_rootfs()

    def run(*words):
        p = subprocess.run([hpcq, *words], capture_output=True, text=True, cwd=work)
        if p.returncode != 0:
            sys.exit(f"hpcq {' '.join(words)}: {p.stderr.strip()}")
        return p.stdout

    def status(job):
        return json.loads(run("status", str(job), "--json"))

    def wait(what, condition, timeout=300):
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                sys.exit(f"migrate_cost: {what} after {timeout} s")
            time.sleep(0.01)

    nodes = [n["name"] for n in json.loads(run("nodes", "--json"))]
    results = []
    for executor in ("process", "container"):
        for mb in [int(s) for s in args.sizes.split(",") if s]:
            runs = []
            for _ in range(args.runs):
                extra = ["--image", image] if executor == "container" else []
                shell = "sh" if executor == "container" else "/bin/busybox"
                argv = ["sh", "-c", holder(mb)] if executor == "container" else \
                    [shell, "sh", "-c", holder(mb)]
                job = int(run("submit", "-n", "1", *extra, "-o", "count-%j.out", "--", *argv))
                out = os.path.join(work, f"count-{job}.out")
                s = wait("the job running", lambda: (lambda s: s if s["state"] == "RUNNING"
                                                    else None)(status(job)))
                wait("the job counting", lambda: len(counts(out)) >= 3)
                target = [n for n in nodes if n not in s["nodes"]][0]
                start = time.monotonic()
                run("migrate", str(job), "--to", target, "--json")
                migrate_s = time.monotonic() - start
                at = counts(out)[-1]  # the job is stopped: its last count
                wait("the job counting on its new node",
                     lambda: status(job)["nodes"] == [target] and counts(out)[-1] > at)
                resumed_s = time.monotonic() - start
                run("cancel", str(job))
                wait("the job cancelled", lambda: status(job)["state"] == "CANCELLED")
                c = counts(out)
                ck = status(job)["checkpoints"][-1]
                runs.append({"dump_s": ck["dump_seconds"], "migrate_s": migrate_s,
                             "resumed_s": resumed_s, "image_mb": ck["image_bytes"] / 1048576,
                             "counts_on": c == list(range(1, len(c) + 1))})
            line = {"executor": executor, "mb": mb, "runs": len(runs),
                    **{k: round(statistics.median(r[k] for r in runs), 3)
                       for k in ("dump_s", "migrate_s", "resumed_s", "image_mb")},
                    "counts_on": all(r["counts_on"] for r in runs),
                    "host_cpus": os.cpu_count()}
            print(json.dumps(line), flush=True)
            results.append(line)
    with open(os.path.join(ROOT, "bench", "results", "migrate_cost.jsonl"), "a") as f:
        for line in results:
            f.write(json.dumps(line) + "\n")
    shutil.rmtree(image, ignore_errors=True)
    if not all(line["counts_on"] for line in results):
        sys.exit("migrate_cost: a job did not count on after its migration")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    if args.inside:
        return inside(args)
    cmd = [os.path.join(args.build, "cli", "hpcq"), "start", "--agents", "2", "--fanout", "2",
           "--topology", "pack:1 numa:1 core:2 pu:1", "--",
           sys.executable, os.path.abspath(__file__), "--inside", "--build", args.build,
           "--sizes", args.sizes, "--runs", str(args.runs)]
    env = dict(os.environ, HPCQ_BUILD_ROOT=args.build)
    sys.exit(subprocess.run(cmd, env=env).returncode)


if __name__ == "__main__":
    main()
