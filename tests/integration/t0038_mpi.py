#!/usr/bin/env python3
"""MPI across nodes (issue 23): MPICH programs started by hpcq form one
world over the job's nodes through the job shells' PMI-1 servers, whose
fences the agents and the leader carry; a failing rank, MPI_Abort and a
cancel end every rank on every node. Compiled here with Debian's MPICH
(mpicc.mpich), on 4 emulated nodes of 4 cores."""
import collections
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=4, fanout=2, topology="pack:1 numa:1 core:4 pu:1")

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "mpi",
                      "mpi_ring.c")
_built = {}


def mpich_program():
    """mpi_ring.c built with MPICH, in a directory every job can read."""
    if "mpich" not in _built:
        if shutil.which("mpicc.mpich") is None:
            raise t.Skip("needs MPICH (Debian's mpich and libmpich-dev: mpicc.mpich)")
        d = t.workdir()
        program = os.path.join(d, "mpi_ring")
        subprocess.run(["mpicc.mpich", "-O2", "-o", program, SOURCE], check=True)
        _built["mpich"] = (d, program)
    return _built["mpich"]


def ranks_of(text):
    """rank -> (node, cpus) from the ranks' lines."""
    found = {}
    for m in re.finditer(r"^rank (\d+) of (\d+) on (\S+) cpus (\S+)$", text, re.M):
        found[int(m.group(1))] = (m.group(3), m.group(4))
    return found


def test_mpich_ranks_form_one_world_across_four_nodes():
    d, program = mpich_program()
    job = t.submit("-N", "4", "-n", "16", "-o", "out-%j", "--", program, cwd=d)
    s = t.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=120)
    with open(os.path.join(d, f"out-{job}")) as f:
        out = f.read()
    t.check(s["state"] == "COMPLETED", f"job {s}\n{out}")
    t.check("world 16 sum 120 expected 120 ring ok" in out, f"output:\n{out}")
    ranks = ranks_of(out)
    t.check(sorted(ranks) == list(range(16)), f"ranks {sorted(ranks)}")
    per_node = collections.Counter(node for node, _ in ranks.values())
    t.check(sorted(per_node.values()) == [4, 4, 4, 4] and len(per_node) == 4, f"nodes {per_node}")
    # Block layout: ranks 0-3 on the first node, so the ring crosses nodes.
    t.check(len({ranks[r][0] for r in range(4)}) == 1 and ranks[3][0] != ranks[4][0],
            f"layout {ranks}")
    # Each rank bound to one CPU (its core, folded onto this host's CPUs).
    t.check(all(re.fullmatch(r"\d+", cpus) for _, cpus in ranks.values()), f"binding {ranks}")


def test_hpcq_run_forwards_the_output_of_an_mpi_world():
    d, program = mpich_program()
    p = t.hpcq("run", "-N", "2", "-n", "4", "--", program, cwd=d)
    t.check("world 4 sum 6 expected 6 ring ok" in p.stdout, f"stdout:\n{p.stdout}\n{p.stderr}")
    t.check(len(ranks_of(p.stdout)) == 4, f"stdout:\n{p.stdout}")


def test_a_failing_rank_fails_the_job_naming_it_and_ends_the_others():
    d, program = mpich_program()
    job = t.submit("-N", "2", "-n", "4", "-o", "out-%j", "--", program, "fail", "3", "5", cwd=d)
    s = t.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=120)
    t.check(s["state"] == "FAILED" and s["exit_code"] == 5, f"job {s}")
    t.check("task 3: exited with code 5" in s["reason"], f"reason {s['reason']}")
    t.check(not t.job_pids(job), "processes left")


def test_mpi_abort_ends_the_job_with_its_code():
    d, program = mpich_program()
    job = t.submit("-N", "2", "-n", "4", "-o", "out-%j", "--", program, "abort", "2", "9", cwd=d)
    s = t.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=120)
    t.check(s["state"] == "FAILED" and s["exit_code"] == 9, f"job {s}")
    t.check("task 2: called MPI_Abort (PMI abort) with code 9" in s["reason"],
            f"reason {s['reason']}")


def test_cancel_ends_every_rank_on_every_node():
    d, program = mpich_program()
    job = t.submit("-N", "2", "-n", "4", "-o", "out-%j", "--", program, "sleep", "300", cwd=d)
    t.wait_state(job, "RUNNING")
    out = os.path.join(d, f"out-{job}")
    t.wait_until("every rank past MPI_Init", lambda: os.path.exists(out) and "world 4" in open(out).read(),
                 timeout=60)
    t.check(len(t.job_pids(job)) >= 4, "the ranks are not in the job's cgroups")
    t.hpcq("cancel", str(job))
    s = t.wait_state(job, ("CANCELLED", "FAILED", "COMPLETED"))
    t.check(s["state"] == "CANCELLED", f"job {s}")
    t.wait_until("no rank left", lambda: not t.job_pids(job), timeout=15)


if __name__ == "__main__":
    t.main([
        test_mpich_ranks_form_one_world_across_four_nodes,
        test_hpcq_run_forwards_the_output_of_an_mpi_world,
        test_a_failing_rank_fails_the_job_naming_it_and_ends_the_others,
        test_mpi_abort_ends_the_job_with_its_code,
        test_cancel_ends_every_rank_on_every_node,
    ])
