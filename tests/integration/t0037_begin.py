#!/usr/bin/env python3
"""--begin (sbatch --begin): a job is not started before its begin time,
says why it waits, keeps its time across a leader restart, and `hpcq update
--begin` moves it (issue 22)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

if not os.environ.get("HPCQ_TEST_INSIDE"):
    t.ensure_user("hpcqtest")
t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:2 pu:1")

ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")


def test_a_job_waits_for_its_begin_time():
    d = t.workdir()
    job = t.submit("--begin", "now+6", "-o", "/dev/null", "--", "true", cwd=d)
    s = t.status(job)
    t.check(s["state"] == "PENDING" and s["reason"] == "begin time not reached", f"{s}")
    # Now as the CLI read it, a little before hpcqd stamped the submission.
    t.check(4 <= s["begin_time"] - s["submit_time"] <= 6, f"begin {s['begin_time']}, "
            f"submitted {s['submit_time']}")
    t.check("begin time not reached" in t.hpcq("queue").stdout, "queue shows why it waits")
    t.check("BeginTime=" in t.hpcq("status", str(job)).stdout, "status shows the begin time")
    s = t.wait_state(job, ENDED, timeout=30)
    t.check(s["state"] == "COMPLETED" and s["start_time"] >= s["begin_time"],
            f"started at {s['start_time']}, begin {s['begin_time']}")


def test_update_moves_it_and_a_restart_keeps_it():
    d = t.workdir()
    job = t.submit("--begin", "now+1h", "-o", "/dev/null", "--", "true", cwd=d)
    begin = t.status(job)["begin_time"]
    t.hpcq("update", str(job), "--begin", "now+2h")
    t.check(t.status(job)["begin_time"] > begin + 3000, "update --begin did not move it later")
    other = t.hpcq("update", str(job), "--begin", "now", user="hpcqtest", rc=1)
    t.check("another user" in other.stderr or "not found" in other.stderr, other.stderr)
    t.restart_leader(t.kill_leader())
    s = t.status(job)
    t.check(s["state"] == "PENDING" and s["reason"] == "begin time not reached", f"{s}")
    t.hpcq("update", str(job), "--begin", "now")
    s = t.wait_state(job, ENDED, timeout=30)
    t.check(s["state"] == "COMPLETED", f"{s}")
    p = t.hpcq("update", str(job), "--begin", "now", rc=1)
    t.check("already ended" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr)
    p = t.hpcq("submit", "--begin", "soon", "--", "true", rc=2)
    t.check(p.stderr.strip() == "hpcq: --begin: bad time 'soon' (want now, now+DURATION or "
            "YYYY-MM-DD[THH:MM[:SS]])", p.stderr)


t.main([test_a_job_waits_for_its_begin_time, test_update_moves_it_and_a_restart_keeps_it])
