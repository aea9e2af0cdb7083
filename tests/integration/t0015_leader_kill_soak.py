#!/usr/bin/env python3
"""Soak: hpcqd is killed with -9 and restarted 20 times while jobs are
submitted, run and end. Every acknowledged job completes, exactly once (each
appends its id to a shared file when it starts), and none is lost."""
import os
import random
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=3, fanout=2, topology="pack:1 numa:1 core:2 pu:1")

KILLS = 20


def wait_answering(timeout=20):
    deadline = time.monotonic() + timeout
    while subprocess.run([t.HPCQ, "nodes"], capture_output=True).returncode != 0:
        if time.monotonic() > deadline:
            raise t.Failure("hpcqd does not answer after a restart")
        time.sleep(0.05)


def test_twenty_leader_kills():
    rng = random.Random(7)
    d = t.workdir()
    runs = os.path.join(d, "runs.log")
    acknowledged = []
    log = open(os.path.join(t.cluster_dir(), "logs", "hpcqd.log"), "a")
    leader = None
    try:
        for kill in range(KILLS):
            for _ in range(8):
                seconds = rng.choice(["0", "0.2", "0.5", "1.5"])
                p = subprocess.run([t.HPCQ, "submit", "-o", "/dev/null", "--", "sh", "-c",
                                    f"echo $HPCQ_JOB_ID >> {runs}; sleep {seconds}"],
                                   capture_output=True, text=True, cwd=d)
                if p.returncode == 0:
                    acknowledged.append(int(p.stdout))
            time.sleep(rng.uniform(0.1, 0.8))
            cmdline = t.kill_leader()
            if leader is not None:
                leader.wait()
            time.sleep(rng.uniform(0, 0.5))
            leader = subprocess.Popen(cmdline, stdout=log, stderr=log)
            wait_answering()
        t.check(len(acknowledged) >= KILLS * 8 * 0.9, f"only {len(acknowledged)} submissions")
        for job in acknowledged:
            s = t.wait_state(job, ["COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT"],
                             timeout=120)
            t.check(s["state"] == "COMPLETED", f"job {job} ended {s['state']}: {s['reason']}")
        with open(runs) as f:
            started = [int(x) for x in f.read().split()]
        twice = sorted({j for j in started if started.count(j) > 1})
        t.check(not twice, f"jobs that ran twice: {twice}")
        t.check(sorted(started) == sorted(acknowledged), "every acknowledged job ran once")
        print(f"{KILLS} leader kills, {len(acknowledged)} jobs, all completed once", flush=True)
    finally:
        # hpcq start stops the hpcqd it started, not this one.
        if leader is not None:
            leader.send_signal(signal.SIGTERM)
            leader.wait(timeout=30)


t.main([test_twenty_leader_kills])
