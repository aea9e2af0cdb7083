#!/usr/bin/env python3
"""The "granularity" plugin in hpcqd (papers/000, Algorithm 1 with policy
scale): a cpu-profile job of 8 ranks is cut over the 4 nodes, one worker of
2 ranks per node; a network-profile job is never split (one node, one
worker); --workers overrides the policy's count; status --json lists each
node's workers with their ranks and cores."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

CONFIG = "/tmp/hpcq-t0023.toml"
if not os.environ.get("HPCQ_TEST_INSIDE"):
    with open(CONFIG, "w") as f:
        f.write("""
[scheduler]
actions = ["allocate"]
plugins = ["fcfs", "granularity"]

[scheduler.options.granularity]
policy = "scale"
""")
t.within_cluster(agents=4, fanout=2, topology="pack:2 numa:2 core:4 pu:1",
                 extra=("--config", CONFIG))


def workers_of(s):
    return {a["node"]: a["workers"] for a in s["allocation"]}


def test_cpu_job_scales_over_the_nodes():
    d = t.workdir()
    job = t.submit("-n", "8", "--profile", "cpu", "--", "sh", "-c", "echo $HPCQ_TASK_RANK", cwd=d)
    s = t.wait_state(job, "COMPLETED")
    workers = workers_of(s)
    t.check(len(workers) == 4, f"on {len(workers)} nodes: {workers}")
    ranks = sorted(r for ws in workers.values() for w in ws for r in w["ranks"])
    t.check(ranks == list(range(8)), f"ranks {ranks}")
    t.check(all(len(ws) == 1 and len(ws[0]["ranks"]) == 2 for ws in workers.values()),
            f"workers {workers}")
    t.check(len({ws[0]["group"] for ws in workers.values()}) == 4, f"groups {workers}")
    t.check(s["profile"] == "cpu", f"profile {s['profile']}")


def test_network_job_is_never_split():
    d = t.workdir()
    job = t.submit("-n", "8", "--profile", "network", "--", "true", cwd=d)
    s = t.wait_state(job, "COMPLETED")
    workers = workers_of(s)
    t.check(len(workers) == 1 and len(list(workers.values())[0]) == 1, f"workers {workers}")


def test_user_workers_override():
    d = t.workdir()
    job = t.submit("-n", "8", "--profile", "memory", "--workers", "2", "--", "true", cwd=d)
    s = t.wait_state(job, "COMPLETED")
    workers = [w for ws in workers_of(s).values() for w in ws]
    t.check(len(workers) == 2 and all(len(w["ranks"]) == 4 for w in workers), f"workers {workers}")


def test_bad_profile():
    p = t.hpcq("submit", "--profile", "gpu", "--", "true", rc=2)
    t.check("--profile: unknown profile 'gpu'" in p.stderr, p.stderr)
    p = t.hpcq("submit", "-n", "2", "--workers", "3", "--profile", "cpu", "--", "true", rc=2)
    t.check("--workers: must be 0..2" in p.stderr, p.stderr)


t.main([test_cpu_job_scales_over_the_nodes, test_network_job_is_never_split,
        test_user_workers_override, test_bad_profile])
