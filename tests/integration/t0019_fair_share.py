#!/usr/bin/env python3
"""Multifactor priority with fair-share in hpcqd: a user who has used the
cluster waits behind one who has not, although they submitted first; job
ends charge usage to the job's account."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

CONFIG = "/tmp/hpcq-t0019.toml"
if not os.environ.get("HPCQ_TEST_INSIDE"):
    t.ensure_user("hpcqtest")
    t.ensure_user("hpcqother")
    with open(CONFIG, "w") as f:
        f.write("""
[scheduler]
actions = ["allocate"]
plugins = ["priority"]
queue_depth = 1

[scheduler.options.priority]
weight_age = 0
weight_fairshare = 10000

[[account]]
name = "physics"

[[account]]
name = "chem"

[[user]]
name = "hpcqtest"
account = "physics"

[[user]]
name = "hpcqother"
account = "chem"
""")
t.within_cluster(agents=1, fanout=2, topology="pack:1 numa:1 core:1 pu:1",
                 extra=("--config", CONFIG))


def test_the_heavy_user_waits():
    d = t.workdir()
    used = t.submit("--", "sleep", "2", user="hpcqtest", cwd=d)
    t.wait_state(used, "COMPLETED", user="hpcqtest")
    blocker = t.submit("--", "sleep", "2", cwd=d)
    t.wait_state(blocker, "RUNNING")
    heavy = t.submit("--", "true", user="hpcqtest", cwd=d)
    time.sleep(0.2)
    light = t.submit("--", "true", user="hpcqother", cwd=d)
    a = t.wait_state(heavy, "COMPLETED", user="hpcqtest")
    b = t.wait_state(light, "COMPLETED", user="hpcqother")
    t.check(b["start_time"] <= a["start_time"],
            f"the user without usage starts first: light {b['start_time']}, heavy {a['start_time']}")
    t.check(a["account"] == "physics" and b["account"] == "chem", f"{a['account']} {b['account']}")


t.main([test_the_heavy_user_waits])
