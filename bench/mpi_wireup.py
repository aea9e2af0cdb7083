#!/usr/bin/env python3
"""MPI wire-up time: hpcq's PMI-1 against Slurm's srun (issue 23's bench).

From the launch command (`hpcq run -N 4 -n N ./mpi_ring`, `srun -N 4 -n N
--mpi=pmi2 ./mpi_ring`) until every rank is past MPI_Init (the latest
MPI_Init end the program reports, examples/mpi/mpi_ring.c), for N = 4, 16
and 64 ranks of an MPICH program (Debian's MPICH 4.0, whose PMI-1 client
both serve: hpcq's job shells, Slurm's mpi/pmi2 plugin), on 4 nodes: hpcq
with `hpcq start --agents 4` of 16 emulated cores each, Slurm 22.05 from
Debian (slurmctld + 4 slurmd on loopback, ../shared/peers/slurm) declaring
16 CPUs per node, in the same session, on this host's CPUs; neither binds
the ranks to CPUs (hpcq: --cpu-bind none; the peer: TaskPlugin=task/none),
since 64 ranks share 2 CPUs here. Also the
command's whole wall time. Slurm's mpi/pmix (Open MPI's direct launch) is
not measured: on slurmds sharing one host its per-step directories collide
(pmixp_mkdir: File exists), and hpcq does not serve PMIx yet.

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


def build_program():
    d = tempfile.mkdtemp(prefix="hpcq-bench-mpi-")
    os.chmod(d, 0o755)
    program = os.path.join(d, "mpi_ring")
    subprocess.run(["mpicc.mpich", "-O2", "-o", program, SOURCE], check=True)
    return d, program


def launch(cmd, ranks, env=None, cwd=None):
    """Runs one MPI launch; returns (wire-up seconds, whole seconds)."""
    t0 = time.time()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    whole = time.time() - t0
    m = re.search(r"^world (\d+) sum \d+ expected \d+ ring (\w+) init_end ([\d.]+)", p.stdout, re.M)
    if p.returncode != 0 or not m or int(m.group(1)) != ranks or m.group(2) != "ok":
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return float(m.group(3)) - t0, whole


def inside(program, runs, sizes):
    env = dict(os.environ)
    env.pop("HPCQ_JOB_ID", None)
    hpcq = os.environ["HPCQ_BENCH_CLI"]  # the build's, set by hpcq_runs
    for r in range(runs):
        for n in sizes:
            # Unbound, as the Slurm peer's tasks are (TaskPlugin=task/none): 64
            # ranks bound to this host's 2 CPUs would wait on each other's CPU.
            wireup, whole = launch([hpcq, "run", "-N", str(NODES), "-n", str(n), "--cpu-bind",
                                    "none", "--", program],
                                   n, env=env, cwd=os.path.dirname(program))
            print(json.dumps(dict(system="hpcq", pmi="pmi1", ranks=n, run=r + 1,
                                  wireup_s=round(wireup, 3), whole_s=round(whole, 3))), flush=True)


def hpcq_runs(build, program, runs, sizes):
    out = subprocess.run(
        [f"{build}/cli/hpcq", "start", "--agents", str(NODES), "--topology",
         f"pack:1 numa:1 core:{CORES} pu:1", "--", sys.executable, os.path.abspath(__file__),
         "--inside", "--program", program, "--runs", str(runs),
         "--ranks", ",".join(map(str, sizes))],
        check=True, capture_output=True, text=True,
        env=dict(os.environ, HPCQ_BENCH_CLI=f"{build}/cli/hpcq")).stdout
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


def slurm_runs(program, runs, sizes):
    out = []
    with slurm_cluster(node_cpus=CORES) as (env, peer):
        for r in range(runs):
            for n in sizes:
                wireup, whole = launch(["srun", "-N", str(NODES), "-n", str(n), "--mpi=pmi2",
                                        program], n, env=env, cwd=os.path.dirname(program))
                out.append(dict(system="slurm", pmi="pmi2", ranks=n, run=r + 1,
                                wireup_s=round(wireup, 3), whole_s=round(whole, 3)))
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
    a = ap.parse_args()
    sizes = [int(x) for x in a.ranks.split(",")]
    if a.inside:
        return inside(a.program, a.runs, sizes)
    _, program = build_program()
    results = hpcq_runs(os.path.abspath(a.build), program, a.runs, sizes)
    if not a.skip_slurm:
        results += slurm_runs(program, a.runs, sizes)
    when = time.strftime("%Y-%m-%dT%H:%M:%S")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "mpi_wireup.jsonl"), "a") as f:
        for r in results:
            r.update(when=when, commit=git_commit(), host=socket.gethostname(), nodes=NODES,
                     cores_per_node=CORES, **({"label": a.label} if a.label else {}))
            f.write(json.dumps(r) + "\n")
    print("| ranks | hpcq PMI-1 wire-up min / median s | Slurm pmi2 min / median s | "
          "hpcq / Slurm (median) |")
    print("|---|---|---|---|")
    for n in sizes:
        def stats(system):
            v = [r["wireup_s"] for r in results if r["system"] == system and r["ranks"] == n]
            return (min(v), statistics.median(v)) if v else None
        h, s = stats("hpcq"), stats("slurm")
        fmt = lambda x: f"{x[0]:.2f} / {x[1]:.2f}" if x else "-"
        print(f"| {n} | {fmt(h)} | {fmt(s)} | {f'{h[1] / s[1]:.2f}' if h and s else '-'} |")


if __name__ == "__main__":
    main()
