#!/usr/bin/env python3
"""MPI edges found with real applications (issue 45 item 11).

A daemon step that mpirun started through hpcq-rsh ends at about the time
the batch script does (mpirun does not wait for its daemons' processes):
the job's end gives its steps a grace before SIGKILL, so such a step keeps
its own end and its CPU time. Before, the job's end killed it at once and
it was recorded CANCELLED with no CPU time (3 of 11 jobs in the issue, 1 of
6 here). Compiled here with Debian's Open MPI (mpicc.openmpi), on 2
emulated nodes of 4 cores."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:4 pu:1")

HERE = os.path.dirname(os.path.abspath(__file__))
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
def batch(d, script):
    """Submits `script` as a 2-node, 4-task batch job; its job id."""
    path = os.path.join(d, f"job-{time.monotonic_ns()}.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n#HPCQ -N 2 -n 4 -t 5:00\n" + script)
    os.chmod(path, 0o755)
    return int(t.hpcq("batch", "-o", "out-%j", path, cwd=d).stdout.strip())


def check_steps_kept_their_end_and_cpu(jobs, d):
    for job in jobs:
        s = t.wait_state(job, ENDED, timeout=180)
        with open(os.path.join(d, f"out-{job}")) as f:
            out = f.read()
        t.check(s["state"] == "COMPLETED", f"job {job}: {s['state']} {s['reason']}\n{out}")
        t.check(s["steps"], f"job {job}: no steps")
        for step in s["steps"]:
            t.check(step["state"] == "COMPLETED" and step["total_cpu_s"] > 0,
                    f"job {job} step {step['id']} on {step['nodes']}: {step['state']} "
                    f"({step.get('reason', '')}), {step['total_cpu_s']} s CPU\n{s['steps']}")
        steps_cpu = sum(step["total_cpu_s"] for step in s["steps"])
        t.check(s["total_cpu_s"] >= steps_cpu - 1e-6,
                f"job {job}: {s['total_cpu_s']} s CPU, its steps {steps_cpu}")


def test_a_step_that_ends_as_its_job_does_keeps_its_end_and_cpu_time():
    """As an MPI daemon does when mpirun leaves without waiting for it: the
    step still runs its last moments (here it spends some CPU, ignoring
    SIGTERM) when the script, and so the job, ends."""
    d = t.workdir()
    marker = os.path.join(d, "step-started")
    # Half a second of work, SIGTERM ignored: well within the grace
    # (hpcq start's kill_grace_s, 2 s).
    job = batch(d, f"hpcq-rsh node2 'trap \"\" TERM; touch {marker}; "
                   "end=$(($(date +%s%N) + 500000000)); "
                   "while [ $(date +%s%N) -lt $end ]; do :; done' &\n"
                   f"while [ ! -e {marker} ]; do sleep 0.05; done\n")
    check_steps_kept_their_end_and_cpu([job], d)


def test_open_mpi_daemon_steps_keep_their_end_and_cpu_time():
    """The issue's jobs: mpirun through hpcq-rsh, the job ending as mpirun
    does; every orted step COMPLETED with its CPU time (3 of 11 lost it)."""
    d, app = t.build_mpi_program(os.path.join(HERE, "..", "..", "examples", "mpi", "mpi_ring.c"), "openmpi")
    jobs = [batch(d, "mpirun --allow-run-as-root --mca plm_rsh_agent hpcq-rsh "
                     f"--hostfile \"$HPCQ_HOSTFILE\" {app}\n") for _ in range(6)]
    check_steps_kept_their_end_and_cpu(jobs, d)


if __name__ == "__main__":
    t.main([test_a_step_that_ends_as_its_job_does_keeps_its_end_and_cpu_time,
            test_open_mpi_daemon_steps_keep_their_end_and_cpu_time])
