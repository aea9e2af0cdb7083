#!/usr/bin/env python3
"""The overlay heals: in a chain leader <- node1 <- node2 <- node3 (fan-out 1),
kill -9 of node1's agent leaves node2 and node3 up (they detour to the leader
within seconds), a job running on node3 completes and its end is recorded,
new work reaches them; node1 alone is declared down. When node1's agent comes
back it takes its place again and everything still works."""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=3, fanout=1, topology="pack:1 numa:1 core:1 pu:1")


def states():
    return {n["name"]: n["state"] for n in json.loads(t.hpcq("nodes", "--json").stdout)}


def wait_states(want, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        now = states()
        if all(now[k] == v for k, v in want.items()):
            return now
        if time.monotonic() > deadline:
            raise t.Failure(f"nodes {now}, expected {want}")
        time.sleep(0.1)


def check_never_down(*names):
    """The leader never declared these nodes down (node_monitor.cc logs each
    time it does), whatever their state now."""
    said = [line for line in t.leader_log().splitlines()
            if any(f"node {n} (rank " in line and ") is down" in line for n in names)]
    t.check(not said, f"declared down: {said}")


def test_interior_agent_dies_and_returns():
    d = t.workdir()
    wait_states({"node1": "up", "node2": "up", "node3": "up"})
    # One core per node: three jobs, one on each; the one on node3 outlives node1.
    jobs = [t.submit("-n", "1", "-t", "5", "--", "sleep", s, cwd=d) for s in ("60", "60", "6")]
    on = {t.wait_state(j, "RUNNING")["nodes"][0]: j for j in jobs}
    t.check(set(on) == {"node1", "node2", "node3"}, f"placement {on}")
    pid = t.agent_pid(1)
    argv = open(f"/proc/{pid}/cmdline").read().split("\0")[:-1]
    os.kill(pid, signal.SIGKILL)
    # Past node_down_after_ms (5 s) node1 is down. node2's and node3's
    # heartbeats went through node1 and stopped with it: had they not
    # detoured, they would be declared down with it, or a heartbeat (0.5 s)
    # later; the leader's log is read again at the end for any time since.
    wait_states({"node1": "down"}, timeout=30)
    check_never_down("node2", "node3")
    t.check(states() == {"node1": "down", "node2": "up", "node3": "up"}, f"nodes {states()}")
    t.check(t.status(on["node2"])["state"] == "RUNNING", "node2's job goes on")
    s = t.wait_state(on["node3"], "COMPLETED", timeout=20)
    t.check(s["exit_code"] == 0, f"node3's job {s}")
    t.check(t.status(on["node1"])["state"] == "NODE_FAIL", "node1's job failed with it")
    fresh = t.submit("-n", "1", "--", "true", cwd=d)
    t.check(t.wait_state(fresh, "COMPLETED")["nodes"] == ["node3"], "new work reaches node3")
    # node1's agent comes back (same state dir) and takes its place again.
    log = open(os.path.join(t.cluster_dir(), "logs", "agent-1.log"), "a")
    back = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
    try:
        wait_states({"node1": "up", "node2": "up", "node3": "up"})
        # What node1 ran before its agent died was counted lost (NODE_FAIL):
        # the new agent kills it rather than let it run beside a requeue.
        jobs_dir = t.jobs_dir(1) + "/"
        left = subprocess.run(["pgrep", "-f", jobs_dir], capture_output=True, text=True).stdout
        t.check(not left.split(), f"processes of node1's lost job: {left.split()}")
        t.hpcq("cancel", str(on["node2"]))
        t.wait_state(on["node2"], "CANCELLED")
        both = t.submit("-N", "3", "-n", "3", "--", "true", cwd=d)
        t.check(sorted(t.wait_state(both, "COMPLETED")["nodes"]) == ["node1", "node2", "node3"],
                "a job across the mended chain")
        with open(os.path.join(t.cluster_dir(), "logs", "agent-2.log")) as f:
            text = f.read()
        t.check("sending through rank 0 meanwhile" in text and "is back" in text,
                "node2 detoured and came back")
        check_never_down("node2", "node3")
    finally:
        back.send_signal(signal.SIGTERM)
        back.wait(timeout=20)


t.main([test_interior_agent_dies_and_returns])
