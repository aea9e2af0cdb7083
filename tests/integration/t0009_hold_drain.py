#!/usr/bin/env python3
"""hold/release keep a pending job from starting and let it go again (its
owner or root only); drain/resume keep a node from getting new work while its
running jobs go on (root only). t0008 checks that a drain outlives a leader
restart."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:2 pu:1")


def nodes():
    return {n["name"]: n for n in json.loads(t.hpcq("nodes", "--json").stdout)}


def test_hold_and_release():
    t.ensure_user("hpcqtest")
    d = t.workdir()
    # Fill both nodes so that the next job has to wait.
    blockers = [t.submit("-n", "2", "--", "sleep", "300", cwd=d) for _ in range(2)]
    for b in blockers:
        t.wait_state(b, "RUNNING")
    job = t.submit("-n", "1", "--", "true", cwd=d)
    t.hpcq("hold", str(job))
    s = t.status(job)
    t.check(s["held"] and s["state"] == "PENDING" and "held" in s["reason"], f"held job {s}")
    p = t.hpcq("release", str(job), user="hpcqtest", rc=1)
    t.check("belongs to another user" in p.stderr, p.stderr)
    t.hpcq("cancel", str(blockers[0]))
    t.wait_state(blockers[0], "CANCELLED")
    # Cores are free: a job submitted after the held one starts and ends, so
    # the scheduler has run with room, and the held job must still wait.
    barrier = t.submit("-n", "1", "--", "true", cwd=d)
    t.wait_state(barrier, "COMPLETED")
    t.check(t.status(job)["state"] == "PENDING", "a held job started")
    t.hpcq("release", str(job))
    t.wait_state(job, "COMPLETED")
    p = t.hpcq("hold", str(job), rc=1)
    t.check("only pending jobs" in p.stderr, p.stderr)
    t.hpcq("cancel", str(blockers[1]))
    t.wait_state(blockers[1], "CANCELLED")


def test_drain_and_resume():
    t.ensure_user("hpcqtest")
    d = t.workdir()
    running = t.submit("-n", "1", "--", "sleep", "300", cwd=d)
    s = t.wait_state(running, "RUNNING")
    t.check(s["nodes"] == ["node1"], f"first job on {s['nodes']}")
    p = t.hpcq("drain", "node1", user="hpcqtest", rc=1)
    t.check("only root" in p.stderr, p.stderr)
    t.hpcq("drain", "node1", "--reason", "bad DIMM")
    n = nodes()["node1"]
    t.check(n["state"] == "draining" and n["reason"] == "bad DIMM", f"node1 {n}")
    t.check(t.status(running)["state"] == "RUNNING", "the running job goes on")
    job = t.submit("-n", "1", "--", "true", cwd=d)
    t.check(t.wait_state(job, "COMPLETED")["nodes"] == ["node2"], "new work avoids node1")
    t.hpcq("cancel", str(running))
    t.wait_state(running, "CANCELLED")
    t.check(nodes()["node1"]["state"] == "drained", "drained once idle")
    t.hpcq("drain", "nosuchnode", rc=1)
    t.hpcq("resume", "node1")
    t.check(nodes()["node1"]["state"] == "up", "resumed")
    job = t.submit("-n", "1", "--", "true", cwd=d)
    t.check(t.wait_state(job, "COMPLETED")["nodes"] == ["node1"], "node1 gets work again")
    # Node lists, as scontrol update nodename=node[1-2] takes them.
    t.hpcq("drain", "node[1-2]", "--reason", "rack maintenance")
    t.check({n["state"] for n in nodes().values()} == {"drained"}, f"nodes {nodes()}")
    p = t.hpcq("drain", "node[2-", rc=2)
    t.check(p.stderr.startswith("hpcq: bad node list 'node[2-'") and p.stderr.count("\n") == 1,
            p.stderr)
    t.hpcq("resume", "node[1-2]")
    t.check({n["state"] for n in nodes().values()} == {"up"}, f"nodes {nodes()}")


@t.needs_checkpoint
def test_nodes_report_checkpoint_capability():
    # CRIU is installed with the project (.ci/install-criu): each agent ran
    # `criu check` at start and said so in its Hello.
    for name, n in nodes().items():
        t.check(n["checkpoint"] is True and n["checkpoint_reason"] == "",
                f"{name}: checkpoint {n['checkpoint']} ({n['checkpoint_reason']})")


t.main([test_hold_and_release, test_drain_and_resume, test_nodes_report_checkpoint_capability])
