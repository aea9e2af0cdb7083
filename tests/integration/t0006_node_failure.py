#!/usr/bin/env python3
"""Two-level liveness: a node that stops sending heartbeats is first
unresponsive (no new work, its jobs left alone; back at its next heartbeat),
then down, and its jobs are handled: a job without --requeue ends NODE_FAIL,
one with --requeue goes back to the queue and runs again on a node that is up."""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:2 pu:1")


def agent_pid(rank):
    # The oldest match: a job being launched is briefly a clone of its agent.
    out = subprocess.run(["pgrep", "-o", "-f", f"hpcq-agent --config {t.cluster_dir()}/hpcq.toml --rank {rank} "],
                         capture_output=True, text=True).stdout.split()
    t.check(len(out) == 1, f"agent {rank} pids: {out}")
    return int(out[0])


def wait_node(name, state, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        n = {n["name"]: n for n in json.loads(t.hpcq("nodes", "--json").stdout)}[name]
        if n["state"] == state:
            return n
        if time.monotonic() > deadline:
            raise t.Failure(f"{name} is {n['state']}, expected {state}")
        time.sleep(0.05)


def test_unresponsive_node_gets_no_work_and_comes_back():
    d = t.workdir()
    running = t.submit("-n", "1", "--", "sleep", "300", cwd=d)
    t.check(t.wait_state(running, "RUNNING")["nodes"] == ["node1"], "first job on node1")
    pid = agent_pid(1)
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_node("node1", "unresponsive")
        job = t.submit("-n", "1", "--", "true", cwd=d)
        t.check(t.wait_state(job, "COMPLETED")["nodes"] == ["node2"], "new work avoids node1")
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_node("node1", "up")
    t.check(t.status(running)["state"] == "RUNNING", "the job survived the silence")
    t.hpcq("cancel", str(running))
    t.wait_state(running, "CANCELLED")


def test_node_down_fails_or_requeues_jobs():
    d = t.workdir()
    # Each node has 2 cores: these two jobs fill node 1 (jobs go to the first
    # node that fits).
    plain = t.submit("-n", "1", "--", "sleep", "300", cwd=d)
    requeued = t.submit("-n", "1", "--requeue", "--", "sh", "-c", "sleep 2; echo done", cwd=d)
    for job in (plain, requeued):
        s = t.wait_state(job, "RUNNING")
        t.check(s["nodes"] == ["node1"], f"job {job} on {s['nodes']}")
    pid = agent_pid(1)
    os.kill(pid, signal.SIGSTOP)  # a hung node: alive but silent
    try:
        wait_node("node1", "unresponsive")
        t.check(t.status(plain)["state"] == "RUNNING", "an unresponsive node's job is left alone")
        s = t.wait_state(plain, "NODE_FAIL", timeout=30)
        t.check("node1" in s["reason"], f"reason {s['reason']}")
        nodes = {n["name"]: n for n in json.loads(t.hpcq("nodes", "--json").stdout)}
        t.check(nodes["node1"]["state"] == "down", f"node1 is {nodes['node1']['state']}")
        s = t.wait_state(requeued, "COMPLETED", timeout=60)
        t.check(s["requeue_count"] == 1 and s["nodes"] == ["node2"], f"requeued job {s}")
    finally:
        os.kill(pid, signal.SIGCONT)
    # The node comes back; the leader kills what it still ran of the failed jobs.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        nodes = {n["name"]: n for n in json.loads(t.hpcq("nodes", "--json").stdout)}
        if nodes["node1"]["state"] == "up" and nodes["node1"]["free_cores"] == 2:
            break
        time.sleep(0.1)
    t.check(nodes["node1"]["state"] == "up", "node1 rejoined")
    job = t.submit("-N", "2", "-n", "4", "--", "true", cwd=d)
    t.hpcq("wait", str(job))


t.main([test_unresponsive_node_gets_no_work_and_comes_back, test_node_down_fails_or_requeues_jobs])
