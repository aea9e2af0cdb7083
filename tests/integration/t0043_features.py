#!/usr/bin/env python3
"""Node features and -C/--constraint, --ntasks-per-node and licenses (-L,
[licenses]) (issue 24, item 3).
`hpcq start --features` gives node1-2 "a100,ib" and node3 "v100"; hpcq nodes
shows them; a job with -C runs only on nodes with those features ('&' all,
'|' any), waits for such a node when they are busy rather than run
elsewhere, and one that no node could ever satisfy is refused at submit;
--ntasks-per-node sets the tasks of each node; a step takes no -C. With
[licenses] matlab = 2, a third job asking for one waits until one of the
two holders ends; unknown licenses and more than there are are refused.
`hpcq start --gres` gives node2 nvme:2 and node3 nvme:1,fpga:1: a job
asking nvme:2 runs only on node2 and holds both there, so a second one
waits (beside a free core) until the first ends; unknown names, more than
any node has and gpu are refused at submit, and bad --gres at start."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

LOG = t.decision_log("t0043")
CONFIG = "/tmp/hpcq-t0043.toml"
if not os.environ.get("HPCQ_TEST_INSIDE"):
    with open(CONFIG, "w") as f:
        f.write(f'[scheduler]\ndecision_log = "{LOG}"\n\n[licenses]\nmatlab = 2\n')
t.within_cluster(agents=3, fanout=3, topology="pack:1 numa:1 core:2 pu:1",
                 extra=("--features", "node[1-2]=a100,ib", "--features", "node3=v100",
                        "--gres", "node2=nvme:2", "--gres", "node3=nvme:1,fpga",
                        "--config", CONFIG))


def nodes_of(job):
    return sorted(a["node"] for a in t.status(job)["allocation"])


def test_nodes_show_their_features():
    nodes = {n["name"]: n["features"] for n in json.loads(t.hpcq("nodes", "--json").stdout)}
    t.check(nodes == {"node1": ["a100", "ib"], "node2": ["a100", "ib"], "node3": ["v100"]},
            f"features {nodes}")
    t.check("a100,ib" in t.hpcq("nodes").stdout, "hpcq nodes' FEATURES column")


def test_a_constraint_picks_the_nodes():
    d = t.workdir()
    gate = t.Gate(d)
    try:
        v100 = t.submit("-C", "v100", "--", *gate.command, cwd=d)
        both = t.submit("-N", "2", "-C", "a100&ib", "--", *gate.command, cwd=d)
        for job in (v100, both):
            t.wait_state(job, "RUNNING")
        t.check(nodes_of(v100) == ["node3"], f"-C v100 ran on {nodes_of(v100)}")
        t.check(nodes_of(both) == ["node1", "node2"], f"-C a100&ib ran on {nodes_of(both)}")
        s = t.status(both)
        t.check(s["constraint"] == "a100&ib", f"status {s['constraint']!r}")
        t.check("Features=a100&ib" in t.hpcq("status", str(both)).stdout, "status text")
    finally:
        gate.open()
    for job in (v100, both):
        t.wait_state(job, "COMPLETED")
    either = t.submit("-N", "3", "-C", "v100|a100", "--", "true", cwd=d)
    t.wait_state(either, "COMPLETED")
    t.check(nodes_of(either) == ["node1", "node2", "node3"], f"-C v100|a100: {nodes_of(either)}")


def test_a_constrained_job_waits_for_its_nodes():
    d = t.workdir()
    gate = t.Gate(d)
    busy = t.submit("-w", "node3", "-n", "2", "--", *gate.command, cwd=d)
    t.wait_state(busy, "RUNNING")
    try:
        waiting = t.submit("-C", "v100", "--", "true", cwd=d)
        # node1 and node2 are free, but have no v100: a cycle looked at it
        # and left it waiting.
        t.wait_cycle_showing(LOG, waiting)
        t.check(t.status(waiting)["state"] == "PENDING", f"job {t.status(waiting)}")
    finally:
        gate.open()
    t.wait_state(waiting, "COMPLETED")
    t.check(nodes_of(waiting) == ["node3"], f"ran on {nodes_of(waiting)}")


def test_constraints_no_node_meets_are_refused():
    for args, says in ((["-C", "h100"], "-C/--constraint 'h100': no node has those features"),
                       (["-N", "3", "-C", "a100"], "--nodes: 3 nodes, -C/--constraint 'a100' leaves 2"),
                       (["-C", "a100&"], "-C/--constraint 'a100&': an empty feature name"),
                       (["-C", "[a|b]"], "brackets")):
        p = t.hpcq("submit", *args, "--", "true", rc=None)
        t.check(p.returncode != 0 and says in p.stderr and p.stderr.count("\n") == 1,
                f"{args}: {p.returncode} {p.stderr!r}")


def test_ntasks_per_node():
    d = t.workdir()
    job = t.submit("-N", "2", "--ntasks-per-node", "2", "-C", "a100", "-o", "out", "--", "sh", "-c",
                   'echo "$HPCQ_NODENAME $HPCQ_NTASKS $HPCQ_NTASKS_PER_NODE"', cwd=d)
    s = t.wait_state(job, ("COMPLETED", "FAILED"))
    t.check(s["state"] == "COMPLETED", f"job {s}")
    t.check(sorted((a["node"], a["ntasks"]) for a in s["allocation"]) ==
            [("node1", 2), ("node2", 2)], f"allocation {s['allocation']}")
    with open(os.path.join(d, "out")) as f:
        lines = sorted(f.read().splitlines())
    t.check(lines == ["node1 4 2"] * 2 + ["node2 4 2"] * 2, f"tasks saw {lines}")


def test_a_step_takes_no_constraint():
    r = t.run([t.HPCQ, "alloc", "-N", "1", "--", "hpcq", "run", "-C", "a100", "--", "true"])
    t.check(r.returncode != 0 and "a step runs on its job's nodes" in r.stderr, f"{r}")


def test_licenses_are_counted():
    d = t.workdir()
    gates = [t.Gate(d, f"gate{i}") for i in range(3)]
    jobs = [t.submit("-L", "matlab", "--", *g.command, cwd=d) for g in gates]
    try:
        for job in jobs[:2]:
            t.wait_state(job, "RUNNING")
        t.wait_cycle_showing(LOG, jobs[2])
        t.check(t.status(jobs[2])["state"] == "PENDING", f"a third holder: {t.status(jobs[2])}")
        t.check(t.status(jobs[0])["licenses"] == {"matlab": 1}, "status licenses")
        t.check("Licenses=matlab:1" in t.hpcq("status", str(jobs[0])).stdout, "status text")
        gates[0].open()
        t.wait_state(jobs[0], "COMPLETED")
        t.wait_state(jobs[2], "RUNNING")
    finally:
        for g in gates:
            g.open()
    for job in jobs:
        t.wait_state(job, "COMPLETED")
    for args, says in ((["-L", "fluent"], "unknown license 'fluent' (known: matlab)"),
                       (["-L", "matlab:3"], "3 of license 'matlab', the cluster has 2"),
                       (["-L", "matlab:0"], "bad count '0'"),
                       (["-L", "matlab,matlab"], "'matlab' given twice")):
        p = t.hpcq("submit", *args, "--", "true", rc=None)
        t.check(p.returncode != 0 and says in p.stderr and p.stderr.count("\n") == 1,
                f"{args}: {p.returncode} {p.stderr!r}")


def test_bad_features_are_refused():
    for features, says in (("node1", "want NODELIST=FEATURE"), ("node9=x", "no node 'node9'"),
                           ("node1=a b", "bad feature name 'a b'")):
        p = t.run([t.HPCQ, "start", "--agents", "2", "--features", features, "--", "true"])
        t.check(p.returncode == 2 and says in p.stderr and p.stderr.count("\n") == 1,
                f"{features}: {p.returncode} {p.stderr!r}")


def test_nodes_show_their_gres():
    nodes = {n["name"]: (n["gres"], n["free_gres"])
             for n in json.loads(t.hpcq("nodes", "--json").stdout)}
    t.check(nodes == {"node1": ({}, {}), "node2": ({"nvme": 2}, {"nvme": 2}),
                      "node3": ({"fpga": 1, "nvme": 1}, {"fpga": 1, "nvme": 1})},
            f"gres {nodes}")
    t.check("fpga:1/1,nvme:1/1" in t.hpcq("nodes").stdout, "hpcq nodes' GRES column")


def test_gres_are_held_per_node():
    d = t.workdir()
    gates = [t.Gate(d, f"gres{i}") for i in range(2)]
    jobs = [t.submit("--gres", "nvme:2", "--", *gates[0].command, cwd=d)]
    try:
        t.wait_state(jobs[0], "RUNNING")
        t.check(nodes_of(jobs[0]) == ["node2"], f"--gres nvme:2 ran on {nodes_of(jobs[0])}")
        free = {n["name"]: n["free_gres"] for n in json.loads(t.hpcq("nodes", "--json").stdout)}
        t.check(free["node2"] == {"nvme": 0}, f"free while held: {free}")
        one = t.submit("--gres", "nvme", "--", "true", cwd=d)  # node3's
        t.wait_state(one, "COMPLETED")
        t.check(nodes_of(one) == ["node3"], f"--gres nvme ran on {nodes_of(one)}")
        jobs.append(t.submit("--gres", "nvme:2", "--", *gates[1].command, cwd=d))
        # node2 has a free core, but no free nvme: a cycle left it waiting.
        t.wait_cycle_showing(LOG, jobs[1])
        t.check(t.status(jobs[1])["state"] == "PENDING", f"a second holder: {t.status(jobs[1])}")
        t.check(t.status(jobs[0])["gres"] == {"nvme": 2}, "status gres")
        t.check("Gres=nvme:2" in t.hpcq("status", str(jobs[0])).stdout, "status text")
        gates[0].open()
        t.wait_state(jobs[0], "COMPLETED")
        t.wait_state(jobs[1], "RUNNING")
        t.check(nodes_of(jobs[1]) == ["node2"], f"the second ran on {nodes_of(jobs[1])}")
    finally:
        for g in gates:
            g.open()
    t.wait_state(jobs[1], "COMPLETED")
    free = {n["name"]: n["free_gres"] for n in json.loads(t.hpcq("nodes", "--json").stdout)}
    t.check(free["node2"] == {"nvme": 2}, f"free after the ends: {free}")


def test_gres_no_node_holds_are_refused():
    for args, says in ((["--gres", "tape"], "--gres: unknown generic resource 'tape' (known: fpga, nvme)"),
                       (["--gres", "nvme:3"], "--gres: nvme:3: no node the job may run on has that many (the most: 2)"),
                       (["--gres", "nvme,fpga", "-C", "a100"], "--gres: fpga:1: no node the job may run on has that many (the most: 0)"),
                       (["-N", "3", "--gres", "nvme"], "--nodes: 3 nodes, --gres leaves 2"),
                       (["--gres", "gpu:1"], "GPUs are not gres here: ask with --gpus-per-node"),
                       (["--gres", "nvme:0"], "bad count '0'")):
        p = t.hpcq("submit", *args, "--", "true", rc=None)
        t.check(p.returncode != 0 and says in p.stderr and p.stderr.count("\n") == 1,
                f"{args}: {p.returncode} {p.stderr!r}")
    for gres, says in (("node1", "want NODELIST=NAME"), ("node9=x", "no node 'node9'"),
                       ("node1=gpu:2", "GPUs are not gres here"),
                       ("node1=nvme:x", "bad count 'x'")):
        p = t.run([t.HPCQ, "start", "--agents", "2", "--gres", gres, "--", "true"])
        t.check(p.returncode == 2 and says in p.stderr and p.stderr.count("\n") == 1,
                f"{gres}: {p.returncode} {p.stderr!r}")


def test_the_decision_log_replays_identically():
    """What hpcqd resolved for each job (its nodes from -C, -w and -x, its
    licenses and gres) is in the decision log, so `hpcq simulate --replay`
    decides as hpcqd did for this file's jobs."""
    p = t.run([t.HPCQ, "simulate", "--replay", LOG])
    t.check(p.returncode == 0 and ": identical" in p.stdout and " 0 starts" not in p.stdout,
            f"replay: {p.returncode} {p.stdout} {p.stderr}")


def test_a_pending_jobs_requests_survive_a_leader_restart():
    """Its -C, -x, -L, --gres and --ntasks-per-node are stored with it: once
    hpcqd is back it still waits for node3, not for any free node."""
    d = t.workdir()
    gate = t.Gate(d)
    busy = t.submit("-w", "node3", "-n", "2", "--", *gate.command, cwd=d)
    t.wait_state(busy, "RUNNING")
    try:
        waiting = t.submit("-C", "v100|a100", "-x", "node1,node2", "-L", "matlab",
                           "--gres", "nvme", "--ntasks-per-node", "1", "--", "true", cwd=d)
        t.wait_cycle_showing(LOG, waiting)
        t.restart_leader(t.kill_leader())
        s = t.status(waiting)
        t.check((s["state"], s["constraint"], s["licenses"], s["gres"]) ==
                ("PENDING", "v100|a100", {"matlab": 1}, {"nvme": 1}), f"after the restart: {s}")
        t.wait_cycle_showing(LOG, waiting)
        t.check(t.status(waiting)["state"] == "PENDING", f"job {t.status(waiting)}")
    finally:
        gate.open()
    t.wait_state(waiting, "COMPLETED")
    t.check(nodes_of(waiting) == ["node3"], f"ran on {nodes_of(waiting)}")


t.main([test_nodes_show_their_gres, test_gres_are_held_per_node,
        test_gres_no_node_holds_are_refused, test_nodes_show_their_features, test_a_constraint_picks_the_nodes,
        test_a_constrained_job_waits_for_its_nodes, test_constraints_no_node_meets_are_refused,
        test_ntasks_per_node, test_a_step_takes_no_constraint, test_licenses_are_counted,
        test_bad_features_are_refused, test_the_decision_log_replays_identically,
        # Last: hpcqd is no longer hpcq start's child after it.
        test_a_pending_jobs_requests_survive_a_leader_restart])
