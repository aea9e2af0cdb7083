#!/usr/bin/env python3
"""Checkpoint and restore cost of a process by resident memory (CRIU).

What it measures: for each size N (MB; default 10, 100, 1000) it starts a task
that touches N MB (one non-zero byte per page, so every page is resident) and
then counts once per 100 ms into a file; dumps it with `criu dump` (the tree
is killed once the images are written, as the executor's CheckpointThen::kStop),
restores it with `criu restore`, and checks that it counts on from where it
was (no gap, no restart). Times are wall-clock seconds of the criu command.
Between the two the images are transferred: copied to a second directory and
fsynced (--to DIR: a shared file system such as the configured
checkpoint_dir on an NFS or Lustre mount; default a directory on the same
disk, a lower bound), and the restore reads them there, as a target node
would.

How the task is held: as the process executor holds a job (process_executor.h)
-- PID 1 of its own PID namespace, a session leader, stdio on files, the
host's mount namespace -- through `unshare --pid --fork setsid`, and with the
same criu flags and environment as agent/executor/checkpoint.cc (-v4 logs,
--manage-cgroups=ignore; restore --restore-detached --restore-sibling;
CRIU_FAULT=130). The images go to a directory on disk (--dir, default a new
one under /tmp), so the dump time includes writing N MB into the page cache.

Output: one JSON line per size on stdout:
  {"mb": 100, "rss_mb": 108.4, "dump_s": 0.41, "transfer_s": 0.2, "restore_s": 0.29,
   "image_mb": 101.2, "counts_on": true, "criu": "4.1.1"}
A size whose dump or restore fails prints {"mb": N, "error": "..."} and the
script exits 1 at the end.

Usage (root, a CRIU >= 4 on PATH: .ci/install-criu):
  sudo bench/checkpoint_cost.py [--sizes 10,100,1000] [--dir DIR] [--to DIR] [--criu PATH]
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TOUCHER = r"""
import sys, time
n = int(sys.argv[1]) << 20
b = bytearray(n)
for i in range(0, n, 4096):
    b[i] = 1
out = open(sys.argv[2], "a", buffering=1)
i = 0
while True:
    i += 1
    out.write(f"{i}\n")
    time.sleep(0.1)
"""


def numbers(path):
    with open(path) as f:
        return [int(line) for line in f if line.strip()]


def wait_for(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise RuntimeError(f"timed out waiting for {what}")


def ns_init_of(unshare_pid):
    """Host PID of unshare's child: the namespace's init (the task)."""
    def child():
        try:
            with open(f"/proc/{unshare_pid}/task/{unshare_pid}/children") as f:
                kids = f.read().split()
            return int(kids[0]) if kids else None
        except OSError:
            return None
    wait_for(lambda: child() is not None, 10, "the task to start")
    return child()


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def dir_mb(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
    return total / (1 << 20)


def first_error(log):
    try:
        with open(log) as f:
            for line in f:
                if "Error (" in line and "RLIMIT_NOFILE" not in line:
                    return line.split("): ", 1)[-1].strip()
    except OSError:
        pass
    return "see " + log


# As the agent runs CRIU (kCriuEnvironment in agent/executor/checkpoint.h):
# hardware breakpoints off, or dumps hang in some virtual machines.
CRIU_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "CRIU_FAULT": "130"}


def run_criu(criu, args, log):
    start = time.monotonic()
    r = subprocess.run([criu] + args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       env=CRIU_ENV)
    seconds = time.monotonic() - start
    if r.returncode != 0:
        raise RuntimeError(f"criu {args[0]} failed: {first_error(log)}")
    return seconds


def transfer(source, target):
    """Copies the images to `target` and syncs them to its disk; seconds."""
    start = time.monotonic()
    shutil.copytree(source, target)
    for root, _, files in os.walk(target):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    return time.monotonic() - start


def measure(criu, version, mb, workdir, todir):
    dumped = os.path.join(workdir, f"img-{mb}")
    images = os.path.join(todir, f"moved-{mb}")
    shutil.rmtree(images, ignore_errors=True)
    os.makedirs(dumped)
    out = os.path.join(workdir, f"count-{mb}")
    open(out, "w").close()
    unshare = subprocess.Popen(
        ["unshare", "--pid", "--fork", "setsid", sys.executable, "-c", TOUCHER, str(mb), out],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = None
    try:
        task = ns_init_of(unshare.pid)
        wait_for(lambda: len(numbers(out)) >= 3, 120, f"the {mb} MB task to count")
        rss = rss_mb(task)
        dump_s = run_criu(criu, ["dump", "--tree", str(task), "--images-dir", dumped,
                                 "--work-dir", dumped, "--log-file", "dump.log", "-v4",
                                 "--manage-cgroups=ignore"], os.path.join(dumped, "dump.log"))
        unshare.wait(timeout=30)
        transfer_s = transfer(dumped, images)
        at_dump = numbers(out)
        restore_s = run_criu(criu, ["restore", "--images-dir", images, "--work-dir", images,
                                    "--log-file", "restore.log", "-v4",
                                    "--manage-cgroups=ignore", "--restore-detached",
                                    "--restore-sibling", "--pidfile", "restore.pid"],
                             os.path.join(images, "restore.log"))
        with open(os.path.join(images, "restore.pid")) as f:
            root = int(f.read())
        wait_for(lambda: len(numbers(out)) >= len(at_dump) + 3, 30, "the restored task to count")
        got = numbers(out)
        counts_on = got == list(range(1, len(got) + 1)) and got[: len(at_dump)] == at_dump
        return {"mb": mb, "rss_mb": round(rss, 1), "dump_s": round(dump_s, 3),
                "transfer_s": round(transfer_s, 3), "restore_s": round(restore_s, 3),
                "image_mb": round(dir_mb(dumped), 1),
                "counts_on": counts_on, "criu": version}
    finally:
        if root is not None:
            os.kill(root, signal.SIGKILL)
            os.waitpid(root, 0)  # our child: --restore-sibling
        if unshare.poll() is None:
            unshare.kill()
            unshare.wait()
        shutil.rmtree(dumped, ignore_errors=True)
        shutil.rmtree(images, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="10,100,1000", help="MB, comma-separated")
    p.add_argument("--dir", help="where the images go (default: a new directory under /tmp)")
    p.add_argument("--to", help="where the images are transferred to (default: --dir)")
    p.add_argument("--criu", default=shutil.which("criu") or "criu")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("checkpoint_cost: needs root (CRIU)")
    v = subprocess.run([args.criu, "--version"], capture_output=True, text=True)
    version = next((l.split()[1] for l in v.stdout.splitlines() if l.startswith("Version:")), "")
    if not version or int(version.split(".")[0]) < 4:
        sys.exit(f"checkpoint_cost: {args.criu} is not CRIU >= 4 (run .ci/install-criu)")
    workdir = args.dir or tempfile.mkdtemp(prefix="hpcq-checkpoint-cost-")
    os.makedirs(workdir, exist_ok=True)
    failed = False
    try:
        for mb in [int(s) for s in args.sizes.split(",") if s]:
            try:
                print(json.dumps(measure(args.criu, version, mb, workdir, args.to or workdir)),
                      flush=True)
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                failed = True
                print(json.dumps({"mb": mb, "error": str(e)}), flush=True)
    finally:
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
