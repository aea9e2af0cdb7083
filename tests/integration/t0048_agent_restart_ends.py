#!/usr/bin/env python3
"""An agent killed with -9 while the leader has not acknowledged a job's end
reports that end again when it restarts on the same state directory: the end
journal (agent/run_journal.h) is read back, the leader records the job with
its real exit code, and the acknowledged end leaves the journal."""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2)


def test_an_end_outlives_its_agent():
    d = t.workdir()
    gate = t.Gate(d)
    job = t.submit("-w", "node2", "--", "sh", "-c",
                   f"while [ ! -e {gate.path} ]; do sleep 0.05; done; exit 5", cwd=d)
    t.wait_state(job, "RUNNING")
    t.stop_leader()
    gate.open()
    # The end goes to a leader that cannot take it: it stays in node2's journal.
    t.wait_until("the end journaled on node2", lambda: job in t.journaled_ends(2), timeout=30)
    t.restart_agent(2, signal.SIGKILL)
    t.restart_leader(t.kill_leader())
    s = t.wait_state(job, ["COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED"], timeout=60)
    t.check(s["state"] == "FAILED" and s["exit_code"] == 5,
            f"job {job}: {s['state']} exit {s['exit_code']}: {s.get('reason')}")
    t.wait_until("the acknowledged end gone from the journal",
                 lambda: job not in t.journaled_ends(2), timeout=30)


t.main([test_an_end_outlives_its_agent])
