#!/usr/bin/env python3
"""Elastic jobs across the wire (hpcq issue 7): the sample app
(examples/elastic_app) submitted with -N 1-4 --elastic starts on all 4 idle
nodes; a higher-priority rigid 2-node job makes the scheduler shrink it to 2
(the app acknowledges on its resize socket, its parts on the other nodes are
killed without ending it, the rigid job starts there), and it expands back to
4 when the rigid job ends; the app's output shows each node list it saw. An
app that declines keeps its nodes and the rigid job waits. `hpcq resize` works
for the owner and is refused for another user and outside the range. Every
node takes one whole-node task (-c 16 on 16-core nodes), so a job that needs
nodes can only get them by a shrink."""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

CONFIG = "/tmp/hpcq-t0026.toml"
if not os.environ.get("HPCQ_TEST_INSIDE"):
    with open(CONFIG, "w") as f:
        f.write("""
[scheduler]
actions = ["elastic", "allocate"]
plugins = ["fcfs"]

[scheduler.options.elastic]
rescale_gap_s = 2
""")
t.within_cluster(agents=4, fanout=2, topology="pack:2 numa:2 core:4 pu:1",
                 extra=("--config", CONFIG))

APP = t.binary("hpcq-elastic-app", "examples")
WHOLE_NODE = ("-c", "16")


def lines_of(path):
    try:
        with open(path) as f:
            return [l.rstrip("\n") for l in f]
    except FileNotFoundError:
        return []


def wait_for(what, predicate, timeout=40):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise t.Failure(f"timed out waiting for {what}")
        time.sleep(0.1)


def start_app(d, *app_args):
    out = os.path.join(d, "app.out")
    job = t.submit("-N", "1-4", "--elastic", "--priority=-1", *WHOLE_NODE, "-t", "10:00",
                   "--", APP, "--out", out, "--iterations", "1000000", "--step-ms", "20",
                   *app_args, cwd=d)
    s = t.wait_state(job, "RUNNING", timeout=30)
    t.check(len(s["nodes"]) == 4, f"started on {s['nodes']}, not all 4 idle nodes")
    t.check(s["elastic"] and s["min_nodes"] == 1 and s["max_nodes"] == 4, f"range {s}")
    wait_for("the app's first node list", lambda: any(l.startswith("nodes 4:")
                                                       for l in lines_of(out)))
    return job, out


def resize(job, nodes, user=None):
    """hpcq resize, once every node has confirmed its part (a just-started
    job is refused with "has not started on all of its nodes yet") and the
    parts an earlier shrink took away have ended (they end after its answer:
    "parts of an earlier resize are still ending")."""
    transient = ("has not started on all of its nodes", "parts of an earlier resize are still ending")
    deadline = time.monotonic() + 20
    while True:
        p = t.hpcq("resize", str(job), "--nodes", str(nodes), "--json", user=user, rc=None)
        if not any(why in p.stderr for why in transient) or time.monotonic() > deadline:
            return p
        time.sleep(0.1)


def finish(*jobs):
    for j in jobs:
        t.hpcq("cancel", str(j), rc=None)
    for j in jobs:
        t.wait_state(j, {"CANCELLED", "COMPLETED", "FAILED"}, timeout=30)


def test_shrink_for_a_rigid_job_then_expand():
    d = t.workdir()
    job, out = start_app(d)
    rigid = None
    try:
        rigid = t.submit("-N", "2", *WHOLE_NODE, "--", "sleep", "3", cwd=d)
        r = t.wait_state(rigid, {"RUNNING", "COMPLETED"}, timeout=40)
        s = t.status(job)
        t.check(s["state"] == "RUNNING", f"the elastic job is {s['state']}: {s['reason']}")
        t.check(len(s["nodes"]) == 2, f"elastic job on {s['nodes']} after the shrink")
        t.check(not set(s["nodes"]) & set(r["nodes"]), f"shared nodes {s['nodes']} {r['nodes']}")
        first = s["resizes"][0]
        t.check((first["kind"], first["from"], first["to"], first["outcome"], first["by"]) ==
                ("shrink", 4, 2, "acknowledged", "scheduler"), f"resize record {first}")
        t.check(first["nodes"] == s["nodes"], f"record nodes {first['nodes']} vs {s['nodes']}")
        text = lines_of(out)
        t.check("resize shrink 2 acknowledged" in text, f"app output {text}")
        t.check(f"nodes 2: {','.join(s['nodes'])}" in text, f"app output {text}")
        t.wait_state(rigid, "COMPLETED", timeout=30)
        # The nodes come first (the parts start), the record once the app
        # has answered.
        s = wait_for("the expansion back to 4", lambda: (
            lambda s: s if len(s["nodes"]) == 4 and s["resizes"][-1]["kind"] == "expand"
            else None)(t.status(job)))
        last = s["resizes"][-1]
        t.check((last["kind"], last["from"], last["to"], last["outcome"]) ==
                ("expand", 2, 4, "acknowledged"), f"resize record {last}")
        text = wait_for("the app's 4-node list again",
                        lambda: (lambda l: l if "resize expand 4 acknowledged" in l else None)(
                            lines_of(out)))
        seen = [l for l in text if l.startswith("nodes ")]
        t.check(len(seen) == 3 and seen[0].startswith("nodes 4:") and
                seen[1].startswith("nodes 2:") and seen[2].startswith("nodes 4:"),
                f"node lists seen {seen}")
        t.check(s["state"] == "RUNNING", f"the elastic job is {s['state']}")
        for x in (first, last):
            # The resize overhead: the agent's signal to the app's answer, and
            # the leader's ask to the outcome it recorded.
            print(f"     {x['kind']} {x['from']}->{x['to']}: app answered in "
                  f"{x['answer_seconds'] * 1000:.1f} ms, leader ask to outcome "
                  f"{(x['answered'] - x['time']) * 1000:.1f} ms", flush=True)
    finally:
        finish(job, *([rigid] if rigid else []))


def test_decline_is_honoured():
    d = t.workdir()
    job, out = start_app(d, "--decline-shrinks")
    rigid = None
    try:
        rigid = t.submit("-N", "2", *WHOLE_NODE, "--", "sleep", "1", cwd=d)
        wait_for("a declined shrink", lambda: "resize shrink 2 declined" in lines_of(out))
        # Past the rescale gap it is asked again, and declines again.
        wait_for("a second declined shrink",
                 lambda: lines_of(out).count("resize shrink 2 declined") >= 2)
        r = t.status(rigid)
        t.check(r["state"] == "PENDING", f"the rigid job is {r['state']} though the app declined")
        s = t.status(job)
        t.check(len(s["nodes"]) == 4 and s["state"] == "RUNNING", f"elastic job {s}")
        outcomes = {x["outcome"] for x in s["resizes"]}
        t.check(outcomes == {"declined"} and len(s["resizes"]) >= 2, f"resizes {s['resizes']}")
        # The gap bounds how often it is asked: not more than once per 2 s.
        span = s["resizes"][-1]["time"] - s["resizes"][0]["time"]
        t.check(len(s["resizes"]) <= 2 + span / 2, f"asked too often: {s['resizes']}")
        t.hpcq("cancel", str(job))
        t.wait_state(rigid, "COMPLETED", timeout=30)
    finally:
        finish(job, *([rigid] if rigid else []))


def test_hpcq_resize():
    d = t.workdir()
    job, out = start_app(d)
    try:
        p = resize(job, 3)
        t.check(p.returncode == 0 and '"outcome":"acknowledged"' in p.stdout, p.stdout + p.stderr)
        s = t.status(job)
        t.check(len(s["nodes"]) == 3 and s["resizes"][-1]["by"] == "user", f"after resize {s}")
        t.check("resize shrink 3 acknowledged" in lines_of(out), f"app output {lines_of(out)}")
        t.ensure_user()
        p = t.hpcq("resize", str(job), "--nodes", "2", user="hpcqtest", rc=None)
        t.check(p.returncode != 0 and "belongs to another user" in p.stderr, f"{p.returncode} {p.stderr}")
        p = t.hpcq("resize", str(job), "--nodes", "5", rc=None)
        t.check(p.returncode != 0 and "outside" in p.stderr, f"{p.returncode} {p.stderr}")
        t.check(len(t.status(job)["nodes"]) in (3, 4), "a refused resize changed the job")
    finally:
        finish(job)


def agent_pid(rank):
    # The oldest match: a job being launched is briefly a clone of its agent.
    out = subprocess.run(["pgrep", "-o", "-f", f"hpcq-agent --config {t.cluster_dir()}/hpcq.toml "
                          f"--rank {rank} "], capture_output=True, text=True).stdout.split()
    t.check(len(out) == 1, f"agent {rank} pids: {out}")
    return int(out[0])


def test_a_declined_expansion_gives_the_nodes_back():
    d = t.workdir()
    job, out = start_app(d, "--decline-expands")
    rigid = None
    try:
        p = resize(job, 2)
        t.check(p.returncode == 0, p.stdout + p.stderr)
        p = resize(job, 4)
        t.check(p.returncode == 1 and '"outcome":"declined"' in p.stdout, p.stdout + p.stderr)
        s = t.status(job)
        t.check(len(s["nodes"]) == 2 and s["state"] == "RUNNING", f"after a declined expand {s}")
        t.check("resize expand 4 declined" in lines_of(out), f"app output {lines_of(out)}")
        # The two nodes were given back: a rigid 2-node job fits on them
        # without shrinking the app.
        rigid = t.submit("-N", "2", *WHOLE_NODE, "--", "sleep", "1", cwd=d)
        r = t.wait_state(rigid, {"RUNNING", "COMPLETED"}, timeout=30)
        t.check(not set(r["nodes"]) & set(s["nodes"]), f"shared {r['nodes']} {s['nodes']}")
        t.check(len(t.status(job)["nodes"]) == 2, "the elastic job changed size")
    finally:
        finish(job, *([rigid] if rigid else []))


def test_drain_shrinks_an_elastic_job_off_the_node():
    d = t.workdir()
    job, out = start_app(d)
    node = t.status(job)["nodes"][-1]
    try:
        t.hpcq("drain", node, "--reason", "maintenance")
        s = wait_for("the shrink off the drained node",
                     lambda: (lambda s: s if node not in s["nodes"] else None)(t.status(job)))
        t.check(len(s["nodes"]) == 3 and s["state"] == "RUNNING", f"after drain {s}")
        last = s["resizes"][-1]
        t.check((last["kind"], last["by"], last["outcome"]) == ("shrink", "drain", "acknowledged"),
                f"record {last}")
        t.check("resize shrink 3 acknowledged" in lines_of(out), f"app output {lines_of(out)}")
    finally:
        t.hpcq("resume", node)
        finish(job)


def test_node_down_shrinks_instead_of_failing():
    d = t.workdir()
    job, out = start_app(d)
    s = t.status(job)
    victim = s["allocation"][-1]
    pid = agent_pid(victim["rank"])
    os.kill(pid, signal.SIGSTOP)  # silent: declared down after node_down_after_ms
    try:
        # The allocation shrinks as the node is declared down; the record
        # comes once the app has answered.
        s = wait_for("the shrink off the dead node and its record",
                     lambda: (lambda s: s if victim["node"] not in s["nodes"] and s["resizes"]
                              else None)(t.status(job)), timeout=30)
        t.check(s["state"] == "RUNNING" and len(s["nodes"]) == 3, f"after node down {s}")
        last = s["resizes"][-1]
        t.check((last["kind"], last["by"]) == ("shrink", "node_down"), f"record {last}")
        wait_for("the app's 3-node list",
                 lambda: any(l.startswith("nodes 3:") for l in lines_of(out)))
    finally:
        os.kill(pid, signal.SIGCONT)
        finish(job)


def test_resize_records_survive_a_leader_restart():
    d = t.workdir()
    job, out = start_app(d)
    try:
        p = resize(job, 3)
        t.check(p.returncode == 0, p.stdout + p.stderr)
        before = t.status(job)["resizes"]
        t.restart_leader(t.kill_leader())
        # Every node says Hello to the new leader (the tests after this one
        # count on all four).
        t.wait_until("every node up after the restart", lambda: all(
            n["state"] == "up" for n in json.loads(t.hpcq("nodes", "--json").stdout)), timeout=30)
        s = t.status(job)
        t.check(s["state"] == "RUNNING", f"after the restart the job is {s['state']}: {s['reason']}")
        t.check(s["resizes"][:len(before)] == before, f"records {s['resizes']} vs {before}")
        # The adopted job can still be resized: the first node's agent kept
        # its socket and the leader its allocation.
        p = resize(job, 2)
        t.check(p.returncode == 0, p.stdout + p.stderr)
        s = t.status(job)
        t.check(len(s["nodes"]) == 2 and s["resizes"][-1]["outcome"] == "acknowledged",
                f"after a resize past the restart {s}")
    finally:
        finish(job)


def test_an_app_that_never_answers_times_out():
    d = t.workdir()
    job, out = start_app(d, "--ignore-resizes")
    try:
        start = time.monotonic()
        p = resize(job, 2)
        took = time.monotonic() - start
        t.check(p.returncode == 1 and '"outcome":"timed_out"' in p.stdout,
                f"{p.returncode} {p.stdout} {p.stderr}")
        t.check(25 < took < 45, f"answered after {took:.1f}s, not at [leader] resize_timeout_ms (30 s)")
        s = t.status(job)
        t.check(len(s["nodes"]) == 4 and s["state"] == "RUNNING", f"a timed-out shrink changed {s}")
        t.check(s["resizes"][-1]["outcome"] == "timed_out", f"record {s['resizes'][-1]}")
        t.check("resize shrink 2 ignored" in lines_of(out), f"app output {lines_of(out)}")
        # The agent put the node list back: the job still has 4 nodes.
        nodelist = [l for l in lines_of(out) if l.startswith("nodes ")]
        t.check(nodelist == [nodelist[0]], f"node lists {nodelist}")
    finally:
        finish(job)


def test_a_program_that_never_connected_gets_no_signal():
    """A resize notice signals only the process that opened the resize
    socket: a plain `sleep` (SIGUSR1 would kill it) runs on, and its
    expansion, unanswered, times out and keeps the new node."""
    d = t.workdir()
    gate = t.Gate(d)
    holder = t.submit("-N", "3", *WHOLE_NODE, "--", *gate.command, cwd=d)
    t.wait_state(holder, "RUNNING", timeout=30)
    job = t.submit("-N", "1-2", "--elastic", *WHOLE_NODE, "-t", "10:00", "--", "sleep", "300",
                   cwd=d)
    try:
        s = t.wait_state(job, "RUNNING", timeout=30)
        t.check(len(s["nodes"]) == 1, f"started on {s['nodes']} beside a 3-node job")
        gate.open()
        t.wait_state(holder, "COMPLETED", timeout=30)
        p = resize(job, 2)
        t.check(p.returncode == 1 and '"outcome":"timed_out"' in p.stdout,
                f"{p.returncode} {p.stdout} {p.stderr}")
        s = t.status(job)
        t.check(s["state"] == "RUNNING" and len(s["nodes"]) == 2,
                f"after an unanswered expansion: {s['state']} {s['nodes']} {s['reason']}")
    finally:
        gate.open()
        finish(job)


def test_range_errors_and_moldable():
    p = t.hpcq("submit", "-N", "4-2", "--", "true", rc=None)
    t.check(p.returncode != 0 and "MIN > MAX" in p.stderr, p.stderr)
    p = t.hpcq("submit", "-N", "0-2", "--", "true", rc=None)
    t.check(p.returncode != 0 and "MIN and MAX >= 1" in p.stderr, p.stderr)
    p = t.hpcq("submit", "--elastic", "--", "true", rc=None)
    t.check(p.returncode != 0 and "needs a node range" in p.stderr, p.stderr)
    # Moldable: a range without --elastic gets its size at start, then is
    # never resized (resize refused).
    d = t.workdir()
    job = t.submit("-N", "1-4", *WHOLE_NODE, "--", "sleep", "30", cwd=d)
    try:
        s = t.wait_state(job, "RUNNING", timeout=30)
        t.check(len(s["nodes"]) == 4 and not s["elastic"], f"moldable job {s}")
        p = t.hpcq("resize", str(job), "--nodes", "2", rc=None)
        t.check(p.returncode != 0 and "not elastic" in p.stderr, p.stderr)
    finally:
        finish(job)


t.main([test_shrink_for_a_rigid_job_then_expand, test_decline_is_honoured, test_hpcq_resize,
        test_a_declined_expansion_gives_the_nodes_back,
        test_drain_shrinks_an_elastic_job_off_the_node, test_node_down_shrinks_instead_of_failing,
        test_resize_records_survive_a_leader_restart, test_an_app_that_never_answers_times_out,
        test_a_program_that_never_connected_gets_no_signal, test_range_errors_and_moldable])
