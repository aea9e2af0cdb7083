#!/usr/bin/env python3
"""A node that cannot start a job (an error of the node, not of the job: a
cgroup it cannot make, a directory, a process) does not fail the job: the
job is requeued and runs elsewhere, and the node is drained with the reason,
as Slurm drains a node on a launch failure (issue 20, item 8)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:2 pu:1")

CPUSET = "/sys/fs/cgroup/cpuset"


def write(path, value):
    with open(path, "w") as f:
        f.write(value)


def test_a_node_that_cannot_start_a_job_is_drained_and_the_job_runs_elsewhere():
    if not os.path.isdir(os.path.join(CPUSET, "hpcq")):
        raise t.Skip(f"needs the cgroup v1 cpuset hierarchy at {CPUSET}/hpcq")
    d = t.workdir()
    gate = t.Gate(d)
    busy = t.submit("-w", "node2", "-n", "2", "--", *gate.command, cwd=d)
    t.wait_state(busy, "RUNNING")
    # node1 cannot make the next job's cpuset: its cgroup already has a child
    # holding every CPU, so narrowing it to the job's core fails (EBUSY).
    job = busy + 1  # ids are given in order, and nothing else submits here
    instance = os.path.join(CPUSET, "hpcq", t.cgroup_instance(os.path.join(t.cluster_dir(), "agents", "rank-1")))
    job_dir = os.path.join(instance, f"job-{job}")
    blocker = os.path.join(job_dir, "blocker")
    for dir_ in (instance, job_dir, blocker):
        os.makedirs(dir_, exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            with open(os.path.join(CPUSET, name)) as f:
                write(os.path.join(dir_, name), f.read().strip())
    try:
        t.check(t.submit("-n", "1", "-c", "1", "-o", "out-%j", "--", "echo", "ran", cwd=d) == job,
                "job ids not in order")
        node1 = t.wait_until("node1 drained", lambda: next(
            (n for n in json_nodes() if n["name"] == "node1" and n["state"] == "drained"), None))
        t.check(f"job {job}: node error" in node1["reason"], f"node1 {node1}")
        s = t.wait_state(job, "PENDING")
        t.check("requeued: node1: node error" in s["reason"] and "cpuset" in s["reason"], f"job {s}")
    finally:
        os.rmdir(blocker)
        os.rmdir(job_dir)
    gate.open()
    s = t.wait_state(job, ("COMPLETED", "FAILED"))
    t.check(s["state"] == "COMPLETED" and s["exit_code"] == 0, f"job {s}")
    p = s["placements"]
    t.check([x["nodes"] for x in p] == [["node1"], ["node2"]], f"placements {p}")
    with open(os.path.join(d, f"out-{job}")) as f:
        t.check(f.read() == "ran\n", "output")
    t.hpcq("resume", "node1")


def json_nodes():
    import json
    return json.loads(t.hpcq("nodes", "--json").stdout)


t.main([test_a_node_that_cannot_start_a_job_is_drained_and_the_job_runs_elsewhere])
