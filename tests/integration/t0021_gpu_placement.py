#!/usr/bin/env python3
"""GPU and NUMA placement through the whole path (hpcq submit -> hpcqd's
allocator -> Launch -> agent -> job shell): two agents emulate the GPU node of
tests/unit/resource/gpu_node.xml (4 NUMA domains of 4 cores, one GPU in each).
A job with --gpus-per-task gets one GPU per task with the cores of that GPU's
domain, and each task sees only its own GPU in CUDA_VISIBLE_DEVICES; the
nodes show their GPUs and how many are free."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XML = os.path.join(ROOT, "tests", "unit", "resource", "gpu_node.xml")
t.within_cluster(agents=2, fanout=2, topology="xml:" + XML)


def lines_of(path):
    with open(path) as f:
        return sorted(l.split() for l in f.read().splitlines() if l.strip())


def test_nodes_show_their_gpus():
    nodes = json.loads(t.hpcq("nodes", "--json").stdout)
    t.check(all(n["gpus"] == 4 and n["free_gpus"] == 4 for n in nodes), f"nodes {nodes}")


def test_each_task_gets_its_gpu_and_its_cores():
    d = t.workdir()
    job = t.submit("-N", "1", "-n", "2", "-c", "4", "--gpus-per-task", "1", "--", "sh", "-c",
                   "echo $HPCQ_TASK_RANK gpu=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER "
                   "cpus=$HPCQ_CPUS", cwd=d)
    s = t.wait_state(job, "COMPLETED")
    alloc = s["allocation"]
    t.check(len(alloc) == 1 and len(alloc[0]["gpus"]) == 2, f"allocation {alloc}")
    lines = lines_of(s["stdout"])
    t.check(len(lines) == 2, f"output {lines}")
    seen = set()
    for rank, gpu, order, cpus in lines:
        g = int(gpu.split("=")[1])
        seen.add(g)
        t.check(order == "order=PCI_BUS_ID", f"task {rank}: {order}")
        # GPU g sits in NUMA domain g, whose cores are 4g..4g+3.
        t.check(cpus == f"cpus={4 * g}-{4 * g + 3}", f"task {rank}: {gpu} with {cpus}")
    t.check(seen == set(alloc[0]["gpus"]), f"tasks saw GPUs {seen}, allocation {alloc}")


def test_gpus_per_node_and_cyclic_distribution():
    d = t.workdir()
    job = t.submit("-N", "2", "-n", "4", "--gpus-per-node", "2", "-m", "cyclic", "--", "sh", "-c",
                   "echo $HPCQ_TASK_RANK $HPCQ_NODEID gpu=$CUDA_VISIBLE_DEVICES", cwd=d)
    s = t.wait_state(job, "COMPLETED")
    lines = lines_of(s["stdout"])
    t.check(len(lines) == 4, f"output {lines}")
    for rank, node, gpu in lines:
        # Cyclic: ranks alternate between the two nodes.
        t.check(int(rank) % 2 == int(node), f"task {rank} on node index {node}")
        t.check(len(gpu.split("=")[1].split(",")) == 2, f"task {rank}: {gpu}")
    t.check(s["distribution"] == "cyclic", f"status {s['distribution']}")


def test_gpus_held_while_running():
    d = t.workdir()
    job = t.submit("-N", "1", "-n", "1", "--gpus-per-node", "3", "--", "sleep", "300", cwd=d)
    s = t.wait_state(job, "RUNNING")
    node = s["nodes"][0]
    n = {n["name"]: n for n in json.loads(t.hpcq("nodes", "--json").stdout)}[node]
    t.check(n["free_gpus"] == 1, f"{node}: {n}")
    text = t.hpcq("status", str(job)).stdout
    t.check("GPUs=" in text, text)
    t.hpcq("cancel", str(job))
    t.wait_state(job, "CANCELLED")


t.main([test_nodes_show_their_gpus, test_each_task_gets_its_gpu_and_its_cores,
        test_gpus_per_node_and_cyclic_distribution, test_gpus_held_while_running])
