#!/usr/bin/env python3
"""t0002 for the guest of tests/guest/ (cgroup v2): cancel of a running job
and the time limit kill the whole process tree and remove the job's v2
cgroups; a pending job is cancelled. t0002's own tests, except that the
whole-cluster job holding the nodes sleeps instead of polling a gate file:
32 tasks forking a `sleep 0.05` each leave a 2-CPU guest under software
emulation no time for the agents' heartbeats (their nodes went down), which
is a load these machines' CPUs take in their stride."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "integration"))
import hpcqtest as t  # noqa: E402
import t0002_cancel_timeout as t0002  # noqa: E402  (starts the cluster)


def sleeping_holder(d):
    """A job on all 2 x 16 cores that sleeps until cancelled: its id and the
    release (the cancel, then its cgroups gone)."""
    holder = t.submit("-n", "32", "--", "sleep", "1000", cwd=d)

    def release():
        t.hpcq("cancel", str(holder), rc=None)
        t.wait_state(holder, "CANCELLED")
        t.wait_until("the holder's cgroups removed", lambda: not t.job_cgroups(holder))
    return holder, release


t0002.hold_cluster = sleeping_holder
t.main(t0002.TESTS)
