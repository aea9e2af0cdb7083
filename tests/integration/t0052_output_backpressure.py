#!/usr/bin/env python3
"""`hpcq run` output is byte-exact however slow its reader (issue 45 item 2).
hpcqd held a window of each job's output and dropped what a slow reader had
not taken: `hpcq run -- cat blob > copy` lost bytes and exited 0. Now each
hop passes on only what the next has room for (credit from hpcqd, granted
as the reader takes the output): a task whose reader does not read blocks
on its pipe, as under srun. Checked here:
- a reader that does not read for a while, then reads slowly: the task is
  still running (blocked) after the pause, and every byte of 32 MiB of
  random data arrives (sha256), exit 0;
- a batch job's step whose output goes to the script's output file: exact;
- the node of a running `hpcq run` lost mid-stream (its agent and its
  job's processes killed): `hpcq run` exits non-zero, never 0."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=1, topology="pack:1 numa:1 core:2 pu:1")

SIZE = 32 << 20  # four times what hpcqd held of a job's output


def blob(d):
    """SIZE random bytes in a file of `d`; returns its path and sha256."""
    path = os.path.join(d, "blob")
    data = os.urandom(SIZE)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o644)
    return path, hashlib.sha256(data).hexdigest()


def running_job():
    jobs = [j for j in json.loads(t.hpcq("queue", "--json").stdout) if j["state"] == "RUNNING"]
    return jobs[0]["id"] if len(jobs) == 1 else None


def read_slowly(stream):
    """All of `stream`, 256 KiB at a time with a pause between reads: a
    reader slower than `cat`. Returns sha256 and the length."""
    digest, n = hashlib.sha256(), 0
    while True:
        data = stream.read(256 << 10)
        if not data:
            return digest.hexdigest(), n
        digest.update(data)
        n += len(data)
        time.sleep(0.005)


def read_to_end(p):
    """hpcq run `p`'s stdout read slowly to its end, then its stderr and exit
    status: (sha256, length, stderr, exit status)."""
    got, n = read_slowly(p.stdout)
    err = p.stderr.read().decode(errors="replace")
    return got, n, err, p.wait(timeout=120)


def test_a_slow_reader_gets_every_byte():
    d = t.workdir()
    path, want = blob(d)
    p = subprocess.Popen([t.HPCQ, "run", "-n", "1", "--", "cat", path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=d)
    try:
        job = t.wait_until("the job running", running_job, timeout=30)
        # Not read at all for a while: a task without back-pressure writes
        # all of it meanwhile (and hpcqd keeps only part), one with it
        # blocks once the buffers on the way are full.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and t.status(job)["state"] == "RUNNING":
            time.sleep(0.1)
        state = t.status(job)["state"]
        got, n, err, rc = read_to_end(p)
    finally:
        if p.poll() is None:
            p.kill()
    t.check(n == SIZE and got == want,
            f"{n} of {SIZE} bytes, sha256 {'matches' if got == want else 'differs'}; "
            f"hpcq run said: {err.strip()}")
    t.check(rc == 0, f"hpcq run exit {rc}: {err}")
    t.check(state == "RUNNING", f"the job was {state} while nobody read its output: the task "
            "did not wait for its reader")


def test_a_batch_steps_output_file_is_exact():
    d = t.workdir()
    path, want = blob(d)
    script = os.path.join(d, "script.sh")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\nhpcq run -n 1 -- cat {path}\n")
    os.chmod(script, 0o755)
    out = os.path.join(d, "out.txt")
    job = int(t.hpcq("batch", "-n", "1", "-o", out, script, cwd=d).stdout.strip())
    s = t.wait_state(job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=120)
    with open(out, "rb") as f:
        data = f.read()
    t.check(hashlib.sha256(data).hexdigest() == want,
            f"the output file has {len(data)} of {SIZE} bytes, not the same; job {s['state']}")
    t.check(s["state"] == "COMPLETED", f"job {job} {s['state']}: {s.get('reason')}")


def test_a_lost_node_fails_the_run():
    d = t.workdir()
    path, _ = blob(d)
    p = subprocess.Popen([t.HPCQ, "run", "-w", "node2", "-n", "1", "--", "cat", path],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=d)
    try:
        job = t.wait_until("the job running", running_job, timeout=30)
        first = p.stdout.read(1 << 20)  # the stream has begun
        t.check(len(first) == 1 << 20, f"only {len(first)} bytes came")
        # The node is lost: its agent and the job's processes on it.
        pids = t.job_pids(job)
        os.kill(t.agent_pid(2), signal.SIGKILL)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        got, n, err, rc = read_to_end(p)
    finally:
        if p.poll() is None:
            p.kill()
    n += len(first)
    t.check(rc != 0, f"hpcq run exit 0 with {n} of {SIZE} bytes: {err}")
    t.check(err.strip(), "hpcq run said nothing of the loss")


t.main([test_a_slow_reader_gets_every_byte, test_a_batch_steps_output_file_is_exact,
        test_a_lost_node_fails_the_run])
