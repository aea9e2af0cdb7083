#!/usr/bin/env python3
"""MPI_Comm_spawn under direct launch (issue 45 item 11).

hpcq's job shells serve a world of the launch's tasks and start no others,
so a spawn request is refused: PMIx_Spawn (Open MPI), PMI-1's "mcmd=spawn"
block and PMI-2's spawn (an MPICH whose device asks PMI). The MPI library
returns the error to the spawn's root only: Open MPI's other ranks wait for
the root inside MPI_Comm_spawn forever, and the root then waits for them in
MPI_Finalize. Before, such a job ran to its time limit, saying nothing of
why. Now the refusal is said on the job's stderr at once, and the world ends
after a grace (kSpawnGraceS, 5 s): the job FAILS, its reason naming the
task and why.

Debian's MPICH 4.0.2 (ch4:ucx) never asks: its MPI_Comm_spawn fails on every
rank before any PMI request, and its world ends by itself; a PMI-1 and a
PMI-2 client written here (pmi_spawn_client.py) send MPICH's spawn request
instead. Compiled here with Debian's MPICH (mpicc.mpich) and Open MPI
(mpicc.openmpi), on 2 emulated nodes of 4 cores."""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:4 pu:1")

HERE = os.path.dirname(os.path.abspath(__file__))
REFUSED = "MPI_Comm_spawn is not supported under direct launch"
TIME_LIMIT_S = 60
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")


def program(mpi):
    """mpi_spawn.c built with mpicc.`mpi`: (its directory, the program)."""
    return t.build_mpi_program(os.path.join(HERE, "mpi_spawn.c"), mpi)


def run_4_ranks(d, *command):
    """`hpcq run` of `command` as 4 ranks on 2 nodes. The job must end
    FAILED well within its time limit (the old hpcq's TIMED OUT, or the
    wait here gave up) and leave no process; returns its status, stdout and
    stderr."""
    start = time.monotonic()
    r = subprocess.run([t.HPCQ, "run", "-N", "2", "-n", "4", "-t", f"{TIME_LIMIT_S}s", "--",
                        *command], capture_output=True, text=True, cwd=d,
                       timeout=TIME_LIMIT_S + 60)
    took = time.monotonic() - start
    said = f"exit {r.returncode} after {took:.1f}s\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    m = re.search(r"^hpcq: job (\d+) \w+", r.stderr, re.M)
    t.check(m is not None, f"no end line: {said}")
    job = int(m.group(1))
    s = t.status(job)
    t.check(s["state"] == "FAILED" and r.returncode != 0,
            f"job {job} {s['state']} ({s['reason']}): {said}")
    t.check(took < TIME_LIMIT_S / 2, f"took {took:.1f}s of its {TIME_LIMIT_S}s limit: {said}")
    t.check(not t.job_pids(job), f"job {job}: processes left")
    return s, r.stdout, r.stderr


def check_refused_and_named(s, stderr):
    """The refusal's line came on the job's stderr as it happened, and the
    job's reason names the spawning task and why."""
    t.check(f"hpcq: task 0: {REFUSED}" in stderr, f"no refusal line:\n{stderr}")
    t.check(re.search(r"task 0: .*" + REFUSED, s["reason"]), f"reason {s['reason']}")


def test_open_mpi_spawn_whose_error_returns_ends_the_world():
    """MPI_ERRORS_RETURN: the root gets MPI_ERR_SPAWN, the other ranks wait
    for it forever; the shell ends the world after the grace."""
    d, path = program("openmpi")
    s, out, err = run_4_ranks(d, path, "return")
    check_refused_and_named(s, err)
    t.check("rank 0 spawn failed" in out, f"stdout:\n{out}")
    t.check("its world was ended" in s["reason"], f"reason {s['reason']}")


def test_open_mpi_spawn_with_fatal_errors_aborts_naming_the_refusal():
    """The default MPI_ERRORS_ARE_FATAL: the root aborts at once, and the
    abort's reason says what it followed."""
    d, path = program("openmpi")
    s, _, err = run_4_ranks(d, path)
    check_refused_and_named(s, err)
    t.check("called MPI_Abort" in s["reason"] and "'s spawn was refused" in s["reason"],
            f"reason {s['reason']}")


def test_debian_mpich_fails_the_spawn_itself_and_ends():
    """No PMI request: every rank gets MPICH's own error ("Error in spawn
    call"), and the job ends by itself, promptly."""
    d, path = program("mpich")
    _, out, _ = run_4_ranks(d, path, "return")
    t.check(len(re.findall(r"^rank \d spawn failed", out, re.M)) == 4, f"stdout:\n{out}")


def check_pmi_spawn_request_refused(wire):
    d = t.workdir()
    client = os.path.join(HERE, "pmi_spawn_client.py")
    s, out, err = run_4_ranks(d, sys.executable, client, wire)
    answer = "cmd=spawn_result rc=-1" if wire == "pmi1" else "cmd=spawn-response rc=-1"
    t.check(f"rank 0 spawn answered {answer}" in out, f"stdout:\n{out}\nstderr:\n{err}")
    check_refused_and_named(s, err)


def test_a_pmi1_spawn_request_is_refused_and_the_world_ends():
    check_pmi_spawn_request_refused("pmi1")


def test_a_pmi2_spawn_request_is_refused_and_the_world_ends():
    check_pmi_spawn_request_refused("pmi2")


def test_a_batch_jobs_stderr_file_gets_the_refusal():
    """Without hpcq run, the line is appended to the job's stderr file (as
    the job's user)."""
    d = t.workdir()
    client = os.path.join(HERE, "pmi_spawn_client.py")
    job = t.submit("-N", "2", "-n", "4", "-t", f"{TIME_LIMIT_S}s", "-o", "out-%j", "-e",
                   "err-%j", "--", sys.executable, client, "pmi1", cwd=d)
    s = t.wait_state(job, ENDED, timeout=TIME_LIMIT_S / 2)
    with open(os.path.join(d, f"err-{job}")) as f:
        err = f.read()
    t.check(s["state"] == "FAILED", f"job {job} {s['state']} ({s['reason']})")
    check_refused_and_named(s, err)


if __name__ == "__main__":
    t.main([test_open_mpi_spawn_whose_error_returns_ends_the_world,
            test_open_mpi_spawn_with_fatal_errors_aborts_naming_the_refusal,
            test_debian_mpich_fails_the_spawn_itself_and_ends,
            test_a_pmi1_spawn_request_is_refused_and_the_world_ends,
            test_a_pmi2_spawn_request_is_refused_and_the_world_ends,
            test_a_batch_jobs_stderr_file_gets_the_refusal])
