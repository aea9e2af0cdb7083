#!/usr/bin/env python3
"""A node the leader gives up on stops its jobs first: a --requeue job whose
agent is killed with -9, or frozen with SIGSTOP, is killed on that node by its
job shell once the node's lease has run out (node_down_after_ms less one
heartbeat after the last heartbeat the leader answered), before the leader
declares the node down and runs the job elsewhere. The two runs of the job
never overlap: each run appends "<its token> <time>" to one file every 50 ms,
and the first run's last line comes before the second run's first.
(agent/executor/leader_lease.h; docs/admin-guide.md, "A lost node's jobs".)"""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

# Two cores a node: a job of one task goes to the first node up.
t.within_cluster(agents=3, fanout=3, topology="pack:1 numa:1 core:2 pu:1")

MARKER = ("tok=$(od -An -N4 -tu4 /dev/urandom | tr -d ' '); "
          "while :; do echo \"$tok $(date +%s.%N)\" >> {marks}; sleep 0.05; done")


def node_state(name):
    return {n["name"]: n for n in json.loads(t.hpcq("nodes", "--json").stdout)}[name]["state"]


def runs(marks):
    """Each run's token: (first, last) time it wrote, in order of start."""
    spans = {}
    if not os.path.exists(marks):
        return []
    with open(marks) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 2:
                continue  # a line being written
            tok, at = parts[0], float(parts[1])
            first, last = spans.get(tok, (at, at))
            spans[tok] = (min(first, at), max(last, at))
    return sorted(spans.values())


def requeued_and_writing(job, marks):
    """Waits until the job's second run has written for a second."""
    t.wait_until(f"job {job} requeued and running again",
                 lambda: (lambda s: s["state"] == "RUNNING" and s["requeue_count"] >= 1)(
                     t.status(job)), timeout=60)
    t.wait_until("the second run writing for a second",
                 lambda: len(runs(marks)) >= 2 and runs(marks)[1][1] - runs(marks)[1][0] >= 1.0,
                 timeout=30)


def check_no_overlap(job, marks, lost_at):
    spans = runs(marks)
    t.check(len(spans) == 2, f"job {job}: {len(spans)} runs: {spans}")
    (first_start, first_end), (second_start, second_end) = spans
    print(f"  first run killed {first_end - lost_at:.2f} s after its agent was lost; "
          f"second run began {second_start - first_end:.2f} s after that", flush=True)
    t.check(first_end < second_start,
            f"job {job} ran twice at once: the first run wrote until {first_end:.2f}, "
            f"{first_end - second_start:.2f} s after the second began at {second_start:.2f}")


def test_kill9_of_the_agent():
    d = t.workdir()
    marks = os.path.join(d, "marks")
    job = t.submit("-n", "1", "--requeue", "--", "sh", "-c", MARKER.format(marks=marks), cwd=d)
    t.check(t.wait_state(job, "RUNNING")["nodes"] == ["node1"], "the job runs on node1")
    t.wait_until("the first run writing", lambda: len(runs(marks)) == 1)
    pid = t.agent_pid(1)
    os.kill(pid, signal.SIGKILL)
    lost_at = time.time()
    requeued_and_writing(job, marks)
    check_no_overlap(job, marks, lost_at)
    t.check(node_state("node1") == "down", "node1 is down")
    t.hpcq("cancel", str(job))
    t.wait_state(job, "CANCELLED")


def test_sigstop_of_the_agent():
    d = t.workdir()
    marks = os.path.join(d, "marks")
    job = t.submit("-n", "1", "--requeue", "--", "sh", "-c", MARKER.format(marks=marks), cwd=d)
    s = t.wait_state(job, "RUNNING")
    t.check(len(s["nodes"]) == 1, f"nodes {s['nodes']}")
    node = s["nodes"][0]
    rank = int(node.removeprefix("node"))
    t.wait_until("the first run writing", lambda: len(runs(marks)) == 1)
    pid = t.agent_pid(rank)
    os.kill(pid, signal.SIGSTOP)  # a hung agent: alive, silent, its job shells untouched
    lost_at = time.time()
    try:
        requeued_and_writing(job, marks)
        check_no_overlap(job, marks, lost_at)
    finally:
        os.kill(pid, signal.SIGCONT)
    # Back: the leader takes the node again, and its old run is gone.
    t.wait_until(f"{node} up again", lambda: node_state(node) == "up", timeout=30)
    s = t.status(job)
    t.check(s["state"] == "RUNNING" and s["nodes"] != [node],
            f"job {job} after {node} came back: {s['state']} on {s['nodes']}")
    check_no_overlap(job, marks, lost_at)
    t.hpcq("cancel", str(job))
    t.wait_state(job, "CANCELLED")


t.main([test_kill9_of_the_agent, test_sigstop_of_the_agent])
