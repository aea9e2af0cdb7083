#!/usr/bin/env python3
"""An elastic cluster's edges (hpcq issue 7, DESIGN.md "a node configured but
absent is simply down"): a rank in the config whose agent never started is
shown down ("has not joined") once node_down_after_ms has passed since the
leader started, and gets no work; when its agent starts later it joins and a
job that needs it runs."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t
from manual_cluster import Cluster, free_port


def test_absent_rank_is_down_then_joins():
    nodes = CLUSTER.nodes()
    t.check(nodes["node1"]["state"] == "up", f"nodes {nodes}")
    now = CLUSTER.wait_nodes({"node1": "up", "node2": "down"}, timeout=20)
    node2 = CLUSTER.nodes()["node2"]
    t.check("has not joined" in node2.get("reason", ""), f"node2 {node2}")
    d = t.workdir()
    job = t.submit("-N", "2", "--", "true", cwd=d)
    t.wait_cycle_showing(CLUSTER.decisions, job)
    t.check(t.status(job)["state"] == "PENDING", "a 2-node job ran with one node up")
    CLUSTER.start_agent(2)
    CLUSTER.wait_nodes({"node1": "up", "node2": "up"}, timeout=20)
    s = t.wait_state(job, "COMPLETED", timeout=30)
    t.check(sorted(s["nodes"]) == ["node1", "node2"], f"ran on {s['nodes']} ({now})")


def main():
    global CLUSTER
    cluster = CLUSTER = Cluster(f"tcp://127.0.0.1:{free_port()}",
                                [{"name": "node1", "endpoint": f"tcp://127.0.0.1:{free_port()}"},
                                 {"name": "node2", "endpoint": f"tcp://127.0.0.1:{free_port()}"}],
                                decision_log=True)
    try:
        cluster.start(agents=[1])
        t.main([test_absent_rank_is_down_then_joins])
    finally:
        cluster.stop()


main()
