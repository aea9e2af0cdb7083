#!/usr/bin/env python3
"""hpcq alloc gives its allocation back whatever ends it, as salloc does, and
hpcq run and hpcq batch --wait end as srun and sbatch --wait do (issue 45,
items 5 and 11). A quick command's allocation ends (8 at once: before, half
stayed RUNNING, the release being a signal sent before the job's holders
had started); the command's exit status is recorded (FAILED, its code, as
Slurm records a salloc whose command failed); Ctrl-C while the job waits
cancels it; SIGHUP and SIGTERM after the grant cancel it; --array and -o are
refused; SIGTERM to hpcq run cancels its job; hpcq batch --wait exits with
the job's exit code."""
import json
import os
import re
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2)

ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}


class Command:
    """A command whose stderr is read as it comes."""

    def __init__(self, args):
        self.p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)
        self.err = ""

    def read_until(self, pattern, timeout=30):
        deadline = time.monotonic() + timeout
        while not (match := re.search(pattern, self.err)):
            left = deadline - time.monotonic()
            t.check(left > 0, f"{pattern!r} not on stderr after {timeout}s: {self.err!r}")
            if select.select([self.p.stderr], [], [], left)[0]:
                data = os.read(self.p.stderr.fileno(), 4096)
                t.check(data != b"", f"stderr closed before {pattern!r}: {self.err!r}")
                self.err += data.decode(errors="replace")
        return match

    def wait(self, timeout=30):
        try:
            code = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise t.Failure(f"{self.p.args} did not exit within {timeout}s: {self.err!r}")
        self.err += self.p.stderr.read().decode(errors="replace")
        return code


def alloc(*args):
    """hpcq alloc ARGS, and the id of its job once it says it waits."""
    c = Command([t.HPCQ, "alloc", *args])
    return c, int(c.read_until(r"job (\d+) waits for its allocation").group(1))


def test_quick_allocations_all_end():
    allocs = [alloc("-N", "1", "--", "true") for _ in range(8)]
    for c, job in allocs:
        code = c.wait(timeout=60)
        t.check(code == 0, f"alloc of job {job} exit {code}: {c.err!r}")
    for _, job in allocs:
        s = t.wait_state(job, ENDED, timeout=30)
        t.check(s["state"] == "COMPLETED" and s["exit_code"] == 0,
                f"job {job}: {s['state']} {s['exit_code']} {s['reason']}")


def test_the_commands_exit_status_is_recorded():
    c, job = alloc("-N", "1", "--", "sh", "-c", "exit 3")
    t.check(c.wait() == 3, f"alloc's exit, want the command's 3: {c.err!r}")
    s = t.wait_state(job, ENDED, timeout=30)
    t.check(s["state"] == "FAILED" and s["exit_code"] == 3 and "code 3" in s["reason"],
            f"job {job}: {s['state']} {s['exit_code']} {s['reason']}")


def test_ctrl_c_while_pending_cancels():
    c, job = alloc("--begin", "now+600", "-N", "1", "--", "true")
    t.check(t.status(job)["state"] == "PENDING", "the allocation is not pending")
    c.p.send_signal(signal.SIGINT)
    code = c.wait()
    t.check(code == 128 + signal.SIGINT, f"alloc's exit on SIGINT {code}: {c.err!r}")
    s = t.wait_state(job, ENDED, timeout=30)
    t.check(s["state"] == "CANCELLED", f"job {job} after Ctrl-C: {s['state']} {s['reason']}")


def test_hangup_and_terminate_after_the_grant_release_it():
    for sig in (signal.SIGHUP, signal.SIGTERM):
        c, job = alloc("-N", "1", "--", "sleep", "300")
        c.read_until(rf"job {job} has its allocation")
        t.wait_state(job, "RUNNING")
        c.p.send_signal(sig)
        code = c.wait()
        t.check(code == 128 + sig, f"alloc's exit on {sig.name} {code}: {c.err!r}")
        s = t.wait_state(job, ENDED, timeout=30)
        t.check(s["state"] == "CANCELLED", f"job {job} after {sig.name}: {s['state']}")


def test_options_that_make_no_sense_are_refused():
    for args, named in ((["--array", "1-2"], "--array"), (["-o", "/tmp/x"], "-o/--output"),
                        (["-e", "/tmp/x"], "-e/--error"), (["--wait"], "--wait")):
        r = t.run([t.HPCQ, "alloc", *args, "--", "true"])
        lines = r.stderr.splitlines()
        t.check(r.returncode == 2 and len(lines) == 1 and named in lines[0],
                f"alloc {args}: exit {r.returncode}, stderr {r.stderr!r}")


def test_sigterm_to_hpcq_run_cancels_its_job():
    c = Command([t.HPCQ, "run", "-J", "t0054-run", "-N", "1", "--", "sleep", "300"])

    def running():
        queue = json.loads(t.hpcq("queue", "--json").stdout)
        return next((j["id"] for j in queue
                     if j["name"] == "t0054-run" and j["state"] == "RUNNING"), None)

    job = t.wait_until("hpcq run's job running", running)
    c.p.send_signal(signal.SIGTERM)
    code = c.wait()
    t.check(code == 128 + signal.SIGTERM, f"hpcq run's exit on SIGTERM {code}: {c.err!r}")
    s = t.wait_state(job, ENDED, timeout=30)
    t.check(s["state"] == "CANCELLED", f"job {job} after SIGTERM: {s['state']} {s['reason']}")


def test_batch_wait_exits_with_the_jobs_code():
    d = t.workdir()
    script = os.path.join(d, "exit3.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nexit 3\n")
    os.chmod(script, 0o755)
    r = t.run([t.HPCQ, "batch", "--wait", "-o", "/dev/null", script], cwd=d)
    t.check(r.returncode == 3, f"batch --wait exit {r.returncode}, want 3: {r.stderr!r}")


t.main([test_quick_allocations_all_end, test_the_commands_exit_status_is_recorded,
        test_ctrl_c_while_pending_cancels, test_hangup_and_terminate_after_the_grant_release_it,
        test_options_that_make_no_sense_are_refused, test_sigterm_to_hpcq_run_cancels_its_job,
        test_batch_wait_exits_with_the_jobs_code])
