#!/usr/bin/env python3
"""A 2-node, 4-task job on a 4-agent tree (fan-out 2: depth 2, so ranks 3 and 4
are reached through rank 1): every task sees the job environment, no core is
given twice, and each task is pinned to the host CPUs its logical cores map to
(logical core i of the agent of rank r -> host CPU (i + r) mod ncpus, so that
emulated nodes spread over the host), as `hpcq status --json` reports."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=4, fanout=2)

JOB = """#!/bin/bash
#HPCQ -N 2
#HPCQ --ntasks=4
#HPCQ -J envcheck
#HPCQ -o out-%x-%j-%u-%N.txt
cpus=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
mems=$(awk '/^Mems_allowed_list/ {print $2}' /proc/self/status)
hostfile=$(tr '\\n ' ';_' < "$HPCQ_HOSTFILE")
echo "rank=$HPCQ_TASK_RANK node=$HPCQ_NODENAME nnodes=$HPCQ_NNODES ntasks=$HPCQ_NTASKS nodelist=$HPCQ_NODELIST jobid=$HPCQ_JOB_ID logical=$HPCQ_CPUS allowed=$cpus mems=$mems hostfile=$hostfile"
"""


def test_multinode_job_environment_and_pinning():
    d = t.workdir()
    with open(os.path.join(d, "job.sh"), "w") as f:
        f.write(JOB)
    job_id = t.submit("job.sh", cwd=d)
    t.hpcq("wait", str(job_id))
    s = t.status(job_id)
    t.check(s["state"] == "COMPLETED", f"state {s['state']}")
    t.check(len(s["nodes"]) == 2 and len(s["allocation"]) == 2, f"nodes {s['nodes']}")
    # sbatch's %x (name), %u (user) and %N (first node) too (issue 47 item 5).
    t.check(s["stdout"] == os.path.join(d, f"out-envcheck-{job_id}-root-{s['nodes'][0]}.txt"),
            f"stdout {s['stdout']}")
    lines = [l for l in open(s["stdout"]).read().splitlines() if l.startswith("rank=")]
    t.check(len(lines) == 4, f"expected 4 task lines, got {lines}")
    tasks = {}
    for line in lines:
        fields = dict(kv.split("=", 1) for kv in line.split(" "))
        tasks[int(fields["rank"])] = fields
    t.check(sorted(tasks) == [0, 1, 2, 3], f"ranks {sorted(tasks)}")
    ncpus = len(os.sched_getaffinity(0))
    alloc = {a["node"]: a for a in s["allocation"]}
    rank_of = {n["name"]: n["rank"] for n in json.loads(t.hpcq("nodes", "--json").stdout)}
    used = {}
    for rank, f in tasks.items():
        t.check(f["jobid"] == str(job_id), f"HPCQ_JOB_ID {f['jobid']}")
        t.check(f["nnodes"] == "2" and f["ntasks"] == "4", f"HPCQ_NNODES/NTASKS {f}")
        # Hostlist form ("node[1-2]"), which `hpcq hostnames` expands in order.
        t.check(t.hpcq("hostnames", f["nodelist"]).stdout.split() == s["nodes"],
                f"HPCQ_NODELIST {f['nodelist']}, nodes {s['nodes']}")
        t.check(f["hostfile"] == "".join(f"{n}_slots=2;" for n in s["nodes"]),
                f"hostfile {f['hostfile']}")
        node = f["node"]
        t.check(node in alloc, f"task {rank} ran on {node}, not in {list(alloc)}")
        logical = t.parse_list(f["logical"])
        t.check(len(logical) == 1, f"task {rank}: one core per task, got {logical}")
        t.check(logical <= set(alloc[node]["cores"]),
                f"task {rank}: cores {logical} not in allocation {alloc[node]['cores']}")
        for c in logical:
            t.check((node, c) not in used, f"core {c} of {node} given to tasks {used.get((node, c))} and {rank}")
            used[(node, c)] = rank
        mapped = {(c + rank_of[node]) % ncpus for c in logical}
        t.check(t.parse_list(f["allowed"]) == mapped,
                f"task {rank}: Cpus_allowed_list {f['allowed']} != mapped allocation {mapped}")
        shown = dict(zip(alloc[node]["cores"], alloc[node]["host_cpus"]))
        t.check({shown[c] for c in logical} == mapped,
                f"status host_cpus {alloc[node]['host_cpus']} of cores {alloc[node]['cores']}")
        t.check(t.parse_list(f["mems"]) == {0}, f"task {rank}: Mems_allowed_list {f['mems']}")
    # Tasks are dealt block-wise: ranks 0-1 on the first node, 2-3 on the second.
    t.check(tasks[0]["node"] == tasks[1]["node"] == s["nodes"][0], "block distribution")
    t.check(tasks[2]["node"] == tasks[3]["node"] == s["nodes"][1], "block distribution")


def test_exit_code_is_reported():
    d = t.workdir()
    job_id = t.submit("-J", "fails", "--", "sh", "-c", "exit 3", cwd=d)
    p = t.hpcq("wait", str(job_id), rc=1)
    s = t.status(job_id)
    t.check(s["state"] == "FAILED" and s["exit_code"] == 3, f"{s['state']} exit {s['exit_code']}")
    t.check("FAILED" in p.stderr, f"wait's message: {p.stderr}")


def test_job_on_every_node_crosses_the_relay():
    # With fan-out 2, nodes 3 and 4 hang below node 1: their Launch and their
    # reports travel through its agent.
    d = t.workdir()
    job_id = t.submit("-N", "4", "-n", "8", "-o", "all.out", "--", "sh", "-c",
                      'echo "$HPCQ_NODENAME $HPCQ_TASK_RANK"', cwd=d)
    t.hpcq("wait", str(job_id))
    s = t.status(job_id)
    t.check(sorted(s["nodes"]) == ["node1", "node2", "node3", "node4"], f"nodes {s['nodes']}")
    lines = sorted(open(os.path.join(d, "all.out")).read().split("\n")[:-1])
    t.check(len(lines) == 8, f"output {lines}")
    t.check({l.split()[0] for l in lines} == {"node1", "node2", "node3", "node4"}, f"output {lines}")


def test_queue_and_nodes_json():
    nodes = json.loads(t.hpcq("nodes", "--json").stdout)
    t.check(len(nodes) == 4, f"{len(nodes)} nodes")
    for n in nodes:
        t.check(n["state"] == "up" and n["cores"] == 16 and n["numa"] == 4, f"node {n}")
    queue = json.loads(t.hpcq("queue", "--json", "--all").stdout)
    t.check(isinstance(queue, list), "queue --json is an array")
    t.check("JOBID" in t.hpcq("queue").stdout, "queue table header")


t.main([test_multinode_job_environment_and_pinning, test_exit_code_is_reported,
        test_job_on_every_node_crosses_the_relay, test_queue_and_nodes_json])
