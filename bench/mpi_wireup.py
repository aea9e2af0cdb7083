#!/usr/bin/env python3
"""MPI wire-up time: hpcq's PMI-1 and PMIx against Slurm's srun (issue 23's bench).

From the launch command (`hpcq run -N 4 -n N ./mpi_ring`, `srun -N 4 -n N
--mpi=pmi2 ./mpi_ring`) until every rank is past MPI_Init (the latest
MPI_Init end the program reports, examples/mpi/mpi_ring.c), for N = 4, 16
and 64 ranks of an MPICH program (Debian's MPICH 4.0, whose PMI-1 client
both serve: hpcq's job shells, Slurm's mpi/pmi2 plugin), and of the same
program built with Open MPI 4.1 launched by hpcq with --mpi pmix (the job
shells' OpenPMIx servers; its ranks run niced, yield while they wait and
keep their shared memory in the job's TMPDIR, as on emulated nodes they
must), on 4 nodes: hpcq
with `hpcq start --agents 4` of 16 emulated cores each, Slurm 22.05 from
Debian (slurmctld + 4 slurmd on loopback, ../shared/peers/slurm) declaring
16 CPUs per node, in the same session, on this host's CPUs; neither binds
the ranks to CPUs (hpcq: --cpu-bind none; the peer: TaskPlugin=task/none),
since 64 ranks share 2 CPUs here. Also the
command's whole wall time. The Open MPI program also runs under Slurm's
mpi/pmix (`srun --mpi=pmix`, PMIx v4), each slurmd in a mount namespace of
its own so that the plugin's per-step client directories, at one path on
every node, do not collide on this one host (slurm_peer.py says how).

Usage: bench/mpi_wireup.py [--runs 3] [--ranks 4,16,64] [--skip-slurm] [--label L]
Run as root on an idle machine; never two benchmarks at once. Appends one JSON
line per launch to bench/results/mpi_wireup.jsonl and prints a summary table.
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from slurm_peer import slurm_cluster

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SOURCE = os.path.join(ROOT, "examples", "mpi", "mpi_ring.c")
NODES = 4
CORES = 16


def build_program(mpi):
    d = tempfile.mkdtemp(prefix="hpcq-bench-mpi-")
    os.chmod(d, 0o755)
    program = os.path.join(d, "mpi_ring")
    subprocess.run([f"mpicc.{mpi}", "-O2", "-o", program, SOURCE], check=True)
    return d, program


# 64 Open MPI ranks on 2 CPUs wait in MPI_Init's fences polling (usleep(100)
# and sched_yield in a loop), which keeps both CPUs busy in the kernel for
# the 20-30 s their wire-up takes here: the agents' heartbeats (every 0.5 s)
# came late enough that hpcq start's 5 s made nodes down in a launch of
# three. The hpcq cluster here declares a node down after 60 s instead (as
# Slurm's peer, whose SlurmdTimeout is 300 s, never does in these runs).
NODE_DOWN_AFTER_S = 60

# Open MPI on emulated nodes (tests/integration/t0038_mpi.py says why), and
# niced: 64 ranks that poll (yielding or not) on 2 CPUs starve the agents past
# their heartbeat timeout.
OPEN_MPI_ON_EMULATED_NODES = ['nice', '-n', '19', 'sh', '-c',
                              'OMPI_MCA_btl_vader_backing_directory="$TMPDIR" '
                              'OMPI_MCA_mpi_yield_when_idle=1 exec "$0" "$@"']


def launch(cmd, ranks, env=None, cwd=None):
    """Runs one MPI launch; returns (wire-up seconds, whole seconds)."""
    t0 = time.time()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    whole = time.time() - t0
    m = re.search(r"^world (\d+) sum \d+ expected \d+ ring (\w+) init_end ([\d.]+)", p.stdout, re.M)
    if p.returncode != 0 or not m or int(m.group(1)) != ranks or m.group(2) != "ok":
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return float(m.group(3)) - t0, whole


def inside(program, open_mpi_program, runs, sizes):
    env = dict(os.environ)
    env.pop("HPCQ_JOB_ID", None)
    hpcq = os.environ["HPCQ_BENCH_CLI"]  # the build's, set by hpcq_runs
    worlds = [("pmi1", [program])]
    if open_mpi_program:
        worlds.append(("pmix", OPEN_MPI_ON_EMULATED_NODES + [open_mpi_program]))
    for r in range(runs):
        for n in sizes:
            for pmi, command in worlds:
                # Unbound, as the Slurm peer's tasks are (TaskPlugin=task/none): 64
                # ranks bound to this host's 2 CPUs would wait on each other's CPU.
                wireup, whole = launch([hpcq, "run", "-N", str(NODES), "-n", str(n), "--cpu-bind",
                                        "none", "--mpi", pmi, "--"] + command,
                                       n, env=env, cwd=os.path.dirname(program))
                print(json.dumps(dict(system="hpcq", pmi=pmi, ranks=n, run=r + 1,
                                      wireup_s=round(wireup, 3), whole_s=round(whole, 3))),
                      flush=True)


def hpcq_runs(build, program, open_mpi_program, runs, sizes):
    out = subprocess.run(
        [f"{build}/cli/hpcq", "start", "--agents", str(NODES), "--topology",
         f"pack:1 numa:1 core:{CORES} pu:1", "--node-down-after", str(NODE_DOWN_AFTER_S), "--", sys.executable, os.path.abspath(__file__),
         "--inside", "--program", program, "--open-mpi-program", open_mpi_program or "",
         "--runs", str(runs), "--ranks", ",".join(map(str, sizes))],
        capture_output=True, text=True, env=dict(os.environ, HPCQ_BENCH_CLI=f"{build}/cli/hpcq"))
    if out.returncode != 0:
        raise SystemExit(f"hpcq's runs failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]


# Open MPI under srun, as under hpcq: niced, yielding while it waits, its
# shared memory in a directory of its node's (Slurm gives a step no TMPDIR
# of its own; in /dev/shm itself the segments' names, host name, job and
# local rank, are the same on every slurmd of this host: 64 ranks crashed).
VADER_DIR = "/dev/shm/hpcq-bench-vader"
OPEN_MPI_UNDER_SRUN = ['nice', '-n', '19', 'sh', '-c',
                       f'd={VADER_DIR}/$SLURMD_NODENAME && mkdir -p "$d" && '
                       'OMPI_MCA_btl_vader_backing_directory="$d" '
                       'OMPI_MCA_mpi_yield_when_idle=1 exec "$0" "$@"']


def slurm_runs(program, open_mpi_program, runs, sizes):
    out = []
    worlds = [("pmi2", [program])]
    if open_mpi_program:
        worlds.append(("pmix", OPEN_MPI_UNDER_SRUN + [open_mpi_program]))
    with slurm_cluster(node_cpus=CORES, private_pmix_dirs=True) as (env, peer):
        for r in range(runs):
            for n in sizes:
                for pmi, command in worlds:
                    wireup, whole = launch(["srun", "-N", str(NODES), "-n", str(n),
                                            f"--mpi={pmi}"] + command, n, env=env,
                                           cwd=os.path.dirname(program))
                    out.append(dict(system="slurm", pmi=pmi, ranks=n, run=r + 1,
                                    wireup_s=round(wireup, 3), whole_s=round(whole, 3)))
    subprocess.run(["rm", "-rf", VADER_DIR])
    return out


def git_commit():
    return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ranks", default="4,16,64")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--skip-slurm", action="store_true")
    ap.add_argument("--label", default="")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--program", help=argparse.SUPPRESS)
    ap.add_argument("--open-mpi-program", help=argparse.SUPPRESS)
    a = ap.parse_args()
    sizes = [int(x) for x in a.ranks.split(",")]
    if a.inside:
        return inside(a.program, a.open_mpi_program, a.runs, sizes)
    _, program = build_program("mpich")
    _, open_mpi_program = build_program("openmpi")
    when = time.strftime("%Y-%m-%dT%H:%M:%S")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)

    def keep(rows):  # each system's rows as soon as they are in
        with open(os.path.join(HERE, "results", "mpi_wireup.jsonl"), "a") as f:
            for r in rows:
                r.update(when=when, commit=git_commit(), host=socket.gethostname(), nodes=NODES,
                         cores_per_node=CORES, **({"label": a.label} if a.label else {}))
                f.write(json.dumps(r) + "\n")
        return rows
    results = keep(hpcq_runs(os.path.abspath(a.build), program, open_mpi_program, a.runs, sizes))
    if not a.skip_slurm:
        results += keep(slurm_runs(program, open_mpi_program, a.runs, sizes))
    print("| ranks | hpcq PMI-1 (MPICH) min / median s | Slurm pmi2 (MPICH) min / median s | "
          "hpcq / Slurm (median) | hpcq PMIx (Open MPI) min / median s | "
          "Slurm pmix (Open MPI) min / median s | hpcq / Slurm (median) |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        def stats(system, pmi):
            v = [r["wireup_s"] for r in results
                 if r["system"] == system and r["pmi"] == pmi and r["ranks"] == n]
            return (min(v), statistics.median(v)) if v else None
        h, s = stats("hpcq", "pmi1"), stats("slurm", "pmi2")
        x, y = stats("hpcq", "pmix"), stats("slurm", "pmix")
        fmt = lambda v: f"{v[0]:.2f} / {v[1]:.2f}" if v else "-"
        ratio = lambda a, b: f"{a[1] / b[1]:.2f}" if a and b else "-"
        print(f"| {n} | {fmt(h)} | {fmt(s)} | {ratio(h, s)} | {fmt(x)} | {fmt(y)} | "
              f"{ratio(x, y)} |")


if __name__ == "__main__":
    main()
