#!/usr/bin/env python3
"""hpcqd killed with -9 and restarted on the same state directory: a job that
was running keeps running (same processes) and is adopted again, a job that
ended while the leader was away is recorded with its real end and exit code,
and nothing runs twice."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2)


def test_running_jobs_survive_a_leader_kill9():
    d = t.workdir()
    long_job = t.submit("-N", "2", "-n", "2", "--", "sleep", "300", cwd=d)
    # It ends once told to (the file "go"), after the kill: a fixed sleep
    # could run out before the kill on a loaded machine.
    short_job = t.submit("-o", "short.out", "--", "sh", "-c",
                         f"while [ ! -e {d}/go ]; do sleep 0.05; done; echo done; exit 4", cwd=d)
    t.wait_state(long_job, "RUNNING")
    t.wait_state(short_job, "RUNNING")
    # RUNNING is the leader's word at dispatch; each node starts its part a
    # moment later: its task (one sleep per node) is what to wait for. The
    # job's cgroups also hold each node's shell, so two PIDs could be the
    # shells alone, before either sleep is forked.
    def sleeps(pids):
        names = []
        for pid in pids:
            try:
                with open(f"/proc/{pid}/comm") as f:
                    names.append(f.read().strip())
            except OSError:
                pass
        return names.count("sleep")
    before = t.wait_until("the long job's task on both nodes",
                          lambda: (lambda p: p if sleeps(p) >= 2 else None)(t.job_pids(long_job)))

    t.hpcq("drain", "node2", "--reason", "maintenance")
    cmdline = t.kill_leader()
    killed_at = time.time()
    open(os.path.join(d, "go"), "w").close()
    # While the leader is away the short job ends on its agent. (RUNNING comes
    # once its task is forked: the task may not have opened its output yet.)
    out = os.path.join(d, "short.out")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (os.path.exists(out) and "done" in open(out).read()):
        time.sleep(0.05)
    # Its end is with the agent once the agent has reported it, into the
    # journal it keeps until the leader acknowledges it (the agent reaps it
    # and removes its cgroups first, and stamps the end's time after).
    def journaled():
        return any(short_job in t.journaled_ends(rank) for rank in (1, 2))
    while time.monotonic() < deadline and not journaled():
        time.sleep(0.05)
    t.check(journaled(), "the short job did not end")
    log = open(os.path.join(t.cluster_dir(), "logs", "hpcqd.log"), "a")
    leader = subprocess.Popen(cmdline, stdout=log, stderr=log)
    restarted_at = time.time()
    try:
        deadline = time.monotonic() + 20
        while t.run([t.HPCQ, "queue"]).returncode != 0:
            t.check(time.monotonic() < deadline and leader.poll() is None, "hpcqd did not restart")
            time.sleep(0.05)
        s = t.wait_state(short_job, ["COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED", "TIMEOUT"])
        t.check(s["state"] == "FAILED" and s["exit_code"] == 4, f"short job {s['state']} {s['exit_code']}")
        t.check(killed_at < s["end_time"] < restarted_at,
                f"end time {s['end_time']} not between the kill and the restart")
        s = t.status(long_job)
        t.check(s["state"] == "RUNNING", f"long job {s['state']}: {s['reason']}")
        t.check(t.job_pids(long_job) == before, "the long job's processes changed")
        nodes = {n["name"]: n for n in __import__("json").loads(t.hpcq("nodes", "--json").stdout)}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not all(n["state"] in ("up", "draining") for n in nodes.values()):
            time.sleep(0.1)
            nodes = {n["name"]: n for n in __import__("json").loads(t.hpcq("nodes", "--json").stdout)}
        # Its cores are held again: 16 - 1 on each node.
        t.check(all(n["free_cores"] == 15 for n in nodes.values()), f"nodes {nodes}")
        t.check(nodes["node2"]["state"] == "draining", f"the drain was forgotten: {nodes['node2']}")
        t.hpcq("resume", "node2")
        t.hpcq("cancel", str(long_job))
        t.wait_state(long_job, "CANCELLED")
        t.check(not t.job_pids(long_job), "cancelled job still has processes")
        # The restarted leader schedules new work as before.
        t.hpcq("wait", str(t.submit("-N", "2", "--", "true", cwd=d)))
    finally:
        leader.terminate()
        leader.wait(timeout=20)


t.main([test_running_jobs_survive_a_leader_kill9])
