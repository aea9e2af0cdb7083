#!/usr/bin/env python3
"""The gap queue's move to a hole that lasts, in hpcqd with real CRIU
(papers/004, Mode B with migration): a gap job sits on a node a waiting wide
job is promised; another node has an idle core that no reservation needs
before the gap job's end. When the wide job's start comes within the save
deadline the gap job is moved there (checkpointed, restored on that node)
instead of going back to the queue, and counts on from where it was."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

CONFIG = "/tmp/hpcq-t0030.toml"
if not os.environ.get("HPCQ_TEST_INSIDE"):
    with open(CONFIG, "w") as f:
        f.write("""
[scheduler]
actions = ["allocate", "backfill", "gap"]
plugins = ["fcfs"]

[scheduler.options]
"gap.save_deadline_s" = 120

[[queue]]
name = "batch"
default = true

[[queue]]
name = "gap"
migratable = true
""")
t.within_cluster(agents=3, fanout=2, topology="pack:1 numa:1 core:2 pu:1",
                 extra=("--config", CONFIG))


@t.needs_checkpoint
def test_gap_job_moves_to_a_lasting_hole():
    d = t.workdir()
    nodes = sorted(n["name"] for n in json.loads(t.hpcq("nodes", "--json").stdout))
    first_node, gap_node, hole_node = nodes
    # A regular job on one core of the hole's node for long: its other core
    # is a hole that lasts. The one the wide job waits for ends soon.
    long = t.submit("-w", hole_node, "-n", "1", "-t", "30", "--", "sleep", "600", cwd=d)
    first = t.submit("-w", first_node, "-N", "1", "-n", "2", "-t", "1", "--", "sleep", "4",
                     cwd=d)
    t.wait_state(long, "RUNNING")
    t.wait_state(first, "RUNNING")
    gap = t.submit("-q", "gap", "-n", "1", "-t", "20", "-w", gap_node, "-o", "gap-%j.out",
                   "--", "sh", "-c", t.COUNTER, cwd=d)
    s = t.wait_state(gap, "RUNNING")
    t.check(s["nodes"] == [gap_node], f"gap job on {s['nodes']}")
    out = os.path.join(d, f"gap-{gap}.out")
    t.wait_count(out, 5)
    try:
        # Two whole nodes: the first job's when it ends, and the gap job's.
        wide = t.submit("-N", "2", "-n", "4", "-t", "1", "--", "sleep", "1", cwd=d)
        t.wait_until("the gap job moved", lambda: (lambda s: s["state"] == "RUNNING" and
                     s["nodes"] == [hole_node] and s)(t.status(gap)), timeout=60)
        at = t.counts(out)[-1]
        t.wait_count(out, at + 5)
        s = t.status(gap)
        p = s["placements"]
        t.check(len(p) == 2 and p[0]["nodes"] == [gap_node] and p[1]["nodes"] == [hole_node]
                and p[1]["restored_from"], f"placements {p}")
        t.check(s["checkpoints"][-1]["to"] == [hole_node], f"checkpoints {s['checkpoints']}")
        t.check(f"checkpointed to move to {hole_node}" in p[0]["outcome"], f"placements {p}")
        w = t.wait_state(wide, "COMPLETED", timeout=60)
        t.check(sorted(w["nodes"]) == sorted([first_node, gap_node]), f"wide ran on {w['nodes']}")
    finally:
        t.run([t.HPCQ, "cancel", str(gap), str(long)])
    t.wait_state(gap, "CANCELLED")
    t.check_contiguous(out)


t.main([test_gap_job_moves_to_a_lasting_hole])
