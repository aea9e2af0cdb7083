#!/usr/bin/env python3
"""Cancel of a running job and the time limit both kill the whole process
tree: no process of the job survives and its cgroups are removed."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2)

TREE = "sleep 1000 & sleep 1000 & echo pids $$ $(jobs -p | tr '\\n' ' '); wait"


def pids_of(job_id, path, nodes, deadline=30):
    """The job's processes as the host sees them (the job prints its own pids,
    but those are numbers inside its PID namespace): read from its cgroups
    once the job reports that its whole tree is up on each of its `nodes`
    (before, a node's cgroups may still hold the short-lived processes that
    compute the line)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if os.path.exists(path) and open(path).read().count("pids ") == nodes:
            pids = set()
            for d in t.job_cgroups(job_id):
                with open(os.path.join(d, "cgroup.procs")) as f:
                    pids.update(int(p) for p in f.read().split())
            return sorted(pids)
        time.sleep(0.05)
    raise t.Failure(f"no pids line in {path}")


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_cancel_kills_tree_and_removes_cgroups():
    d = t.workdir()
    job_id = t.submit("-N", "2", "-n", "2", "-o", "cancel.out", "--", "bash", "-c", TREE, cwd=d)
    t.wait_state(job_id, "RUNNING")
    pids = pids_of(job_id, os.path.join(d, "cancel.out"), nodes=2)
    # Per node: the job shell, bash and its two sleeps; the file has both nodes' lines.
    t.check(len(pids) >= 4 and all(alive(p) for p in pids), f"tree {pids}")
    t.check(t.job_cgroups(job_id), "the job has cgroups while it runs")
    t.hpcq("cancel", str(job_id))
    s = t.wait_state(job_id, ["CANCELLED", "FAILED", "COMPLETED", "TIMEOUT", "NODE_FAIL"])
    t.check(s["state"] == "CANCELLED", f"state {s['state']}")
    left = [p for p in pids if alive(p)]
    t.check(not left, f"processes left after cancel: {left}")
    t.check(not t.job_cgroups(job_id), f"cgroups left: {t.job_cgroups(job_id)}")
    # A second cancel is refused with a reason.
    p = t.hpcq("cancel", str(job_id), rc=1)
    t.check("already ended" in p.stderr, p.stderr)


def gated_holder(d):
    """A job on all 2 x 16 cores that ends once released: its id and the
    release."""
    gate = t.Gate(d)
    holder = t.submit("-n", "32", "--", *gate.command, cwd=d)

    def release():
        gate.open()
        t.wait_state(holder, "COMPLETED")
    return holder, release


# What test_cancel_pending_job holds the cluster with (the guest's g0002
# puts one that sleeps).
hold_cluster = gated_holder


def test_cancel_pending_job():
    d = t.workdir()
    # All cores taken: a second whole-cluster job waits.
    holder, release = hold_cluster(d)
    t.wait_state(holder, "RUNNING")
    try:
        job_id = t.submit("-n", "32", "--", "true", cwd=d)
        t.check(t.status(job_id)["state"] == "PENDING", "pending")
        t.hpcq("cancel", str(job_id))
        t.check(t.status(job_id)["state"] == "CANCELLED", "cancelled while pending")
    finally:
        release()


def test_time_limit_ends_job_timeout():
    d = t.workdir()
    job_id = t.submit("-t", "0:02", "-o", "timeout.out", "--", "bash", "-c", TREE, cwd=d)
    pids = pids_of(job_id, os.path.join(d, "timeout.out"), nodes=1)
    t.check(len(pids) >= 4, f"tree {pids}")
    s = t.wait_state(job_id, ["TIMEOUT", "FAILED", "COMPLETED", "CANCELLED", "NODE_FAIL"], timeout=60)
    t.check(s["state"] == "TIMEOUT", f"state {s['state']}")
    t.check(not [p for p in pids if alive(p)], "processes left after timeout")
    t.check(not t.job_cgroups(job_id), "cgroups left after timeout")
    t.hpcq("wait", str(job_id), rc=1)


TESTS = [test_cancel_kills_tree_and_removes_cgroups, test_cancel_pending_job,
         test_time_limit_ends_job_timeout]

if __name__ == "__main__":
    t.main(TESTS)
