#!/usr/bin/env python3
"""A cycle on an event is shown the first queue_depth pending jobs; every
full_cycle_interval_s a full cycle is shown full_queue_depth, so a job that
queue_depth leaves unseen behind jobs that cannot start (here over their
queue's limit) still starts, within about that interval."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

CONFIG = "/tmp/hpcq-t0049.toml"
LOG = t.decision_log("t0049")
if not os.environ.get("HPCQ_TEST_INSIDE"):
    with open(CONFIG, "w") as f:
        f.write(f"""
[scheduler]
plugins = ["fcfs", "limits"]
queue_depth = 1
full_queue_depth = 10
full_cycle_interval_s = 1
decision_log = "{LOG}"

[[queue]]
name = "batch"
default = true

[[queue]]
name = "one"
max_running_jobs = 1
""")
t.within_cluster(agents=1, fanout=2, topology="pack:1 numa:1 core:2 pu:1",
                 extra=("--config", CONFIG))


def cycles_showing(job):
    with open(LOG) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return [e["queue"] for e in lines if e.get("type") == "cycle" and job in e.get("queue", [])]


def test_a_full_cycle_sees_past_queue_depth():
    d = t.workdir()
    gate = t.Gate(d)
    running = t.submit("-q", "one", "--", *gate.command, cwd=d)
    t.wait_state(running, "RUNNING")
    over_limit = t.submit("-q", "one", "--", "true", cwd=d)
    t.wait_cycle_showing(LOG, over_limit)
    behind = t.submit("--", "true", cwd=d)
    t.wait_state(behind, "COMPLETED", timeout=30)
    # A cycle on an event (this submission) is shown the queue's head alone:
    # only a full cycle, shown both in queue order, saw the job behind it.
    shown = cycles_showing(behind)
    t.check(shown and all(q[:2] == [over_limit, behind] for q in shown),
            f"the cycles that saw job {behind}: {shown}")
    t.check(t.status(over_limit)["state"] == "PENDING", "the queue's limit still holds")
    gate.open()
    t.wait_state(over_limit, "COMPLETED", timeout=30)
    t.wait_state(running, "COMPLETED")


t.main([test_a_full_cycle_sees_past_queue_depth])
