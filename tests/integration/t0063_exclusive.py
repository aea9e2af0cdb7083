#!/usr/bin/env python3
"""--exclusive: whole nodes (issue 47, item 5).
Two nodes of 4 cores. With a 1-core job running on node1, an `--exclusive
-n 1` job does not start there: it takes node2 whole (its status shows all
4 cores there, and its one task is bound to all of them). While it runs, a
plain 1-core job starts on node1, not on node2; one only node2 may take
(-w node2) and a second --exclusive job (no idle node left) wait until the
whole node is given back. --exclusive with --oversubscribe is refused at
submit."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

LOG = t.decision_log("t0063")
CONFIG = "/tmp/hpcq-t0063.toml"
if not os.environ.get("HPCQ_TEST_INSIDE"):
    with open(CONFIG, "w") as f:
        f.write(f'[scheduler]\ndecision_log = "{LOG}"\n')
t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:4 pu:1",
                 extra=("--config", CONFIG))


def nodes_of(job):
    return sorted(a["node"] for a in t.status(job)["allocation"])


def test_an_exclusive_job_takes_a_whole_idle_node():
    d = t.workdir()
    gate = t.Gate(d)
    cpus = os.path.join(d, "cpus")
    jobs = []
    try:
        small = t.submit("-w", "node1", "--", *gate.command, cwd=d)
        jobs.append(small)
        t.wait_state(small, "RUNNING")

        whole = t.submit("--exclusive", "-n", "1", "--", "sh", "-c",
                         f'echo "$HPCQ_CPUS" > {cpus}.tmp && mv {cpus}.tmp {cpus}; '
                         + gate.command[2], cwd=d)
        jobs.append(whole)
        t.wait_state(whole, "RUNNING")
        alloc = t.status(whole)["allocation"]
        t.check([a["node"] for a in alloc] == ["node2"],
                f"the --exclusive job runs on {[a['node'] for a in alloc]}, not on idle node2 "
                "alone (node1 has a job)")
        t.check(alloc[0]["cores"] == [0, 1, 2, 3], f"node2's cores given: {alloc[0]['cores']}")
        t.wait_until(f"job {whole} wrote its task's cores", lambda: os.path.exists(cpus))
        with open(cpus) as f:
            bound = f.read().strip()
        t.check(bound == "0-3", f"the one task is bound to cores {bound!r}, not all four")

        plain = t.submit("--", *gate.command, cwd=d)
        jobs.append(plain)
        t.wait_state(plain, "RUNNING")
        t.check(nodes_of(plain) == ["node1"], f"a plain job ran on {nodes_of(plain)}")

        pinned = t.submit("-w", "node2", "--", "true", cwd=d)
        second = t.submit("--exclusive", "--", "true", cwd=d)
        jobs += [pinned, second]
        for job in (pinned, second):
            t.wait_cycle_showing(LOG, job)
            state = t.status(job)["state"]
            t.check(state == "PENDING", f"job {job} is {state} while node2 is held whole")
        t.check(t.status(whole)["state"] == "RUNNING", "the --exclusive job still runs")
    finally:
        gate.open()
    for job in jobs:
        t.wait_state(job, "COMPLETED")
    t.check(nodes_of(pinned) == ["node2"], f"-w node2 ran on {nodes_of(pinned)}")


def test_exclusive_and_oversubscribe_are_refused():
    p = t.hpcq("submit", "--exclusive", "--oversubscribe", "--", "true", rc=None,
               cwd=t.workdir())
    t.check(p.returncode != 0, f"accepted: {p.stdout.strip()}")
    t.check("--exclusive and --oversubscribe" in p.stderr,
            f"the refusal does not name both: {p.stderr.strip()!r}")
    t.check(len(p.stderr.strip().splitlines()) == 1, f"not one line: {p.stderr!r}")


t.main([test_an_exclusive_job_takes_a_whole_idle_node, test_exclusive_and_oversubscribe_are_refused])
