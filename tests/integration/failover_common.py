"""What the failover tests share (t0045 on one host, t0046 across network
namespaces): which candidate leads, by its log; a stream of submissions
checked for loss and double runs; a running job checked for adoption. The
cluster's directory (hpcqtest.cluster_dir) holds logs/hpcqd-N.log, one per
candidate, named leader-N."""
import datetime
import json
import os
import re
import subprocess
import threading
import time

import hpcqtest as t

ENDED = ["COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT"]
ETCD = "/usr/bin/etcd"


def need_etcd():
    if not os.access(ETCD, os.X_OK):
        raise t.Skip(f"{ETCD} is not installed (Debian: etcd-server)")


def pid_of(name):
    """The pid of this cluster's hpcqd candidate `name` (leader-N)."""
    out = subprocess.run(["pgrep", "-f", f"hpcqd --config {t.cluster_dir()}/hpcq.toml .*--name {name} "],
                         capture_output=True, text=True).stdout.split()
    t.check(len(out) == 1, f"{name}: pids {out}")
    return int(out[0])


def leader_logs():
    logs = os.path.join(t.cluster_dir(), "logs")
    return sorted(os.path.join(logs, f) for f in os.listdir(logs) if re.match(r"hpcqd-\d+\.log$", f))


def active():
    """The candidate that last logged that it leads: (name, time)."""
    latest = None
    for path in leader_logs():
        with open(path, errors="replace") as f:
            for line in f:
                m = re.match(r"(\S+) info hpcqd: (leader-\d+) leads", line)
                if m and (latest is None or m.group(1) > latest[1]):
                    latest = (m.group(2), m.group(1))
    return latest


def leaders():
    """`hpcq leaders --json` as {name: row}."""
    return {c["name"]: c for c in json.loads(t.hpcq("leaders", "--json").stdout)}


def wait_new_leader(old, since, timeout):
    """Waits until a candidate leads that was elected after `since` (a
    time.monotonic()) and hpcqd answers: another than `old`, or `old`
    itself, which hpcq start restarts at once and may win the next
    election."""
    # The log's clock (local wall time, as spdlog writes it) at `since`.
    began = (datetime.datetime.now() - datetime.timedelta(seconds=time.monotonic() - since))
    began = began.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]

    def led():
        now = active()
        if now is None or (now[0] == old and now[1] <= began):
            return False
        try:
            return subprocess.run([t.HPCQ, "queue"], capture_output=True,
                                  timeout=5).returncode == 0
        except subprocess.TimeoutExpired:
            return False
    t.wait_until(f"a candidate elected after {old} failed leading", led, timeout=timeout)
    return time.monotonic() - since


class Submitter(threading.Thread):
    """Submits short jobs back to back; each appends its id to `runs` when it
    starts. Failed calls (no leader for a moment) are counted, not kept."""

    def __init__(self, d):
        super().__init__(daemon=True)
        self.d = d
        self.runs = os.path.join(d, "runs.log")
        self.acknowledged = []
        self.refused = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            p = subprocess.run([t.HPCQ, "submit", "-o", "/dev/null", "--", "sh", "-c",
                                f"echo $HPCQ_JOB_ID >> {self.runs}; sleep 0.3"],
                               capture_output=True, text=True, cwd=self.d)
            if p.returncode == 0:
                self.acknowledged.append(int(p.stdout))
            else:
                self.refused += 1
                time.sleep(0.05)

    def finish(self):
        self.stop.set()
        self.join(timeout=60)
        for job in self.acknowledged:
            s = t.wait_state(job, ENDED, timeout=120)
            t.check(s["state"] == "COMPLETED", f"job {job} ended {s['state']}: {s['reason']}")
        with open(self.runs) as f:
            started = [int(x) for x in f.read().split()]
        twice = sorted({j for j in started if started.count(j) > 1})
        t.check(not twice, f"jobs that ran twice: {twice}")
        lost = sorted(set(self.acknowledged) - set(started))
        t.check(not lost, f"acknowledged jobs that never ran: {lost}")


def running_job(d, name):
    """A job that runs until its gate opens, and its processes (host PIDs)."""
    gate = t.Gate(d, name)
    job = t.submit("-o", "/dev/null", "--", *gate.command)
    t.wait_until(f"job {job} running", lambda: t.status(job)["state"] == "RUNNING" and
                 t.job_pids(job))
    # Its shell and sh, not the passing `sleep`s: in two looks 0.3 s apart.
    first = t.job_pids(job)
    time.sleep(0.3)
    return job, gate, first & t.job_pids(job)


def check_adopted(job, gate, pids, start_before):
    s = t.status(job)
    t.check(s["state"] == "RUNNING", f"job {job} is {s['state']} after the failover")
    t.check(s["start_time"] == start_before, f"job {job} started again: {s['start_time']}")
    t.check(set(pids) <= set(t.job_pids(job)), f"job {job}'s processes {pids} are gone")
    gate.open()
    s = t.wait_state(job, ENDED, timeout=60)
    t.check(s["state"] == "COMPLETED", f"job {job} ended {s['state']}: {s['reason']}")


def fail_over_during_submissions(name, fail, how):
    """A job runs and short jobs are submitted back to back while
    `fail(old)` makes the active candidate `old` fail: another candidate
    leads and answers within 10 s and takes submissions; every acknowledged
    job ran exactly once and the running job was adopted. Returns (old,
    new)."""
    d = t.workdir()
    job, gate, pids = running_job(d, name)
    start_before = t.status(job)["start_time"]
    submitter = Submitter(d)
    submitter.start()
    try:
        t.wait_until("some submissions", lambda: len(submitter.acknowledged) >= 5)
        old, _ = active()
        since = time.monotonic()
        fail(old)
        took = wait_new_leader(old, since, timeout=10)
        new = active()[0]
        print(f"{new} leads {took:.1f} s after {how} {old}", flush=True)
        before = len(submitter.acknowledged)
        t.wait_until("submissions to the new leader",
                     lambda: len(submitter.acknowledged) >= before + 5, timeout=30)
    except BaseException:
        # A submitter left running would fill the queue for the tests that
        # follow.
        submitter.stop.set()
        submitter.join(timeout=60)
        raise
    submitter.finish()
    check_adopted(job, gate, pids, start_before)
    return old, new
