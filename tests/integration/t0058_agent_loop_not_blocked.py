#!/usr/bin/env python3
"""A job whose tasks are slow to start holds no agent's loop (issue 45 item
17). A task opens its output file before it execs, and the job shell says
"tasks started" only once every task has exec'd; a FIFO nobody reads yet
(a stalled file system does the same) holds that open. The agent used to
wait for the shell's word in the launch itself, on its loop, for up to 10 s:
no heartbeat went out, and with hpcq start's node-down (5 s) the node was
declared down under its running job. Now the launch returns at once and the
word is read on the loop: the node stays up, the leader hears STARTED only
once the tasks have started (a checkpoint is refused until then), a cancel
before then still ends the job, and a released job runs to its end."""
import json
import os
import sys
import time
import tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

# hpcq start's own timings: what this test is about.
t.within_cluster(agents=1, fanout=1, topology="pack:1 numa:1 core:2 pu:1")


def node_down_after_s():
    with open(os.path.join(t.cluster_dir(), "hpcq.toml"), "rb") as f:
        return tomllib.load(f)["overlay"]["node_down_after_ms"] / 1000


def node_state():
    return json.loads(t.hpcq("nodes", "--json").stdout)[0]["state"]


def held_job(d, *command):
    """A job whose one task blocks opening its output, a FIFO in `d`, until
    the test opens the FIFO for reading; returns (job id, FIFO path)."""
    fifo = os.path.join(d, "out.fifo")
    os.mkfifo(fifo, 0o666)
    job = t.submit("-n", "1", "-o", fifo, "-e", os.path.join(d, "err"), "--", *command, cwd=d)
    t.wait_state(job, "RUNNING")
    return job, fifo


def test_a_slow_start_keeps_the_node_up():
    d = t.workdir()
    job, fifo = held_job(d, "echo", "hello")
    # Past the node-down time, plus two heartbeats (hpcq start's are 0.5 s)
    # for the leader to have looked: a held loop shows as a down node.
    watch = node_down_after_s() + 1.0
    deadline = time.monotonic() + watch
    refused = None
    while time.monotonic() < deadline:
        state = node_state()
        t.check(state != "down", f"node1 went down while job {job}'s task was starting")
        t.check(t.status(job)["state"] == "RUNNING", f"job {job}: {t.status(job)}")
        if refused is None:
            # The leader has no STARTED yet: what needs started tasks waits.
            p = t.hpcq("checkpoint", str(job), rc=None)
            refused = p.returncode != 0 and "has not started" in p.stderr
            t.check(refused, f"checkpoint of a job still starting: rc {p.returncode}, "
                             f"{p.stdout}{p.stderr}")
        time.sleep(0.1)
    # Released: the task opens its output, execs and ends; what it wrote
    # stays in the FIFO for as long as this end is open.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        s = t.wait_state(job, ("COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED"))
        out = os.read(reader, 4096)
    finally:
        os.close(reader)
    t.check(s["state"] == "COMPLETED", f"job {job}: {s}")
    t.check(out == b"hello\n", f"output {out!r}")
    t.check(node_state() == "up", f"node1 is {node_state()}")


def test_a_cancel_before_the_tasks_started_ends_the_job():
    d = t.workdir()
    job, fifo = held_job(d, "sleep", "1000")
    t.hpcq("cancel", str(job))
    # SIGKILL of the job shell ends its PID namespace, the task blocked in
    # its open too: nothing opens the FIFO's writing end again.
    s = t.wait_state(job, ("COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED"))
    t.check(s["state"] == "CANCELLED", f"job {job}: {s}")
    t.wait_until(f"job {job}'s cgroups gone", lambda: not t.job_pids(job))
    t.check(node_state() == "up", f"node1 is {node_state()}")


t.main([test_a_slow_start_keeps_the_node_up, test_a_cancel_before_the_tasks_started_ends_the_job])
