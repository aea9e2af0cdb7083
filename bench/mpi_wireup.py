#!/usr/bin/env python3
"""MPI wire-up time: hpcq's PMI-1 and PMIx against Slurm's srun (issue 23's bench).

From the launch command (`hpcq run -N 4 -n N ./mpi_ring`, `srun -N 4 -n N
--mpi=pmi2 ./mpi_ring`) until every rank is past MPI_Init (the latest
MPI_Init end the program reports, examples/mpi/mpi_ring.c; init_s is the part
from the earliest rank's MPI_Init start, the rest is the launch), for N = 4, 16
and 64 ranks of an MPICH program (Debian's MPICH 4.0, whose PMI-1 client
both serve: hpcq's job shells, Slurm's mpi/pmi2 plugin), and of the same
program built with Open MPI 4.1 launched by hpcq with --mpi pmix (the job
shells' OpenPMIx servers; its ranks run niced, yield while they wait and
keep their shared memory in the job's TMPDIR, as on emulated nodes they
must), on 4 nodes: hpcq
with `hpcq start --agents 4` of 16 emulated cores each, Slurm 22.05 from
Debian (slurmctld + 4 slurmd on loopback, ../shared/peers/slurm) declaring
16 CPUs per node, its steps in cgroups as hpcq's jobs are (proctrack/cgroup,
task/cgroup with ConstrainRAMSpace), N/4 ranks on each node under both,
both clusters up at once; the two take turns launch by launch, alternating which goes first, so
that the host's drift falls on both (stop 40's runs had all of hpcq's
launches, then all of Slurm's). The MPICH program runs twice: with the
transports its UCX picks, and with the same ones under both
(SAME_TRANSPORTS says why).
Neither binds the ranks to CPUs (hpcq: --cpu-bind none; the peer: no
task/affinity, ConstrainCores=no), since 64 ranks share 2 CPUs here. Also the
command's whole wall time. The Open MPI program also runs under Slurm's
mpi/pmix (`srun --mpi=pmix`, PMIx v4), each slurmd in a mount namespace of
its own so that the plugin's per-step client directories, at one path on
every node, do not collide on this one host (slurm_peer.py says how).

Usage: bench/mpi_wireup.py [--runs 3] [--ranks 4,16,64] [--skip-slurm] [--label L]
Run as root on an idle machine; never two benchmarks at once. Appends one JSON
line per launch to bench/results/mpi_wireup.jsonl (ucx_tls: the UCX_TLS it
ran with, where set) and prints a summary.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import throughput  # noqa: E402  (its host())
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
    return program


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


LAUNCH_TIMEOUT_S = 120  # a 64-rank launch takes 2-6 s here


def launch(cmd, ranks, env=None, cwd=None):
    """Runs one MPI launch; returns (wire-up seconds, whole seconds, MPI_Init
    seconds: from the earliest rank's MPI_Init start to the latest end,
    failed attempts). A launch that fails or takes more than LAUNCH_TIMEOUT_S
    is made once more, and the row says so (failed_attempts): Open MPI under
    srun --mpi=pmix failed now and then here (a peer's shared memory segment
    not found, exit 139; or hung), in 3 of 8 invocations of 90 launches on
    2026-11-29."""
    for attempt in range(2):
        t0 = time.time()
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate(timeout=LAUNCH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            # Twice ^C: srun and hpcq run then end the step on every node, so
            # that no rank spins on through the launches that follow.
            for _ in range(2):
                p.send_signal(signal.SIGINT)
                time.sleep(0.5)
            p.communicate(timeout=60)
            print(f"launch failed: {' '.join(cmd)}: no end after {LAUNCH_TIMEOUT_S} s",
                  flush=True)
            continue
        whole = time.time() - t0
        m = re.search(r"^world (\d+) sum \d+ expected \d+ ring (\w+) init_end ([\d.]+) "
                      r"init_seconds ([\d.]+)", out, re.M)
        if p.returncode == 0 and m and int(m.group(1)) == ranks and m.group(2) == "ok":
            return float(m.group(3)) - t0, whole, float(m.group(4)), attempt
        # On stdout, where run_both finds it (hpcq start's stderr ends with
        # the agents' logs).
        print(f"launch failed: {' '.join(cmd)}: exit {p.returncode}\n{out[-2000:]}\n"
              f"{err[-2000:]}", flush=True)
    raise SystemExit(1)


# Open MPI under srun, as under hpcq: niced, yielding while it waits, its
# shared memory in a directory of its node's (Slurm gives a step no TMPDIR
# of its own; in /dev/shm itself the segments' names, host name, job and
# local rank, are the same on every slurmd of this host: 64 ranks crashed).
VADER_DIR = "/dev/shm/hpcq-bench-vader"
OPEN_MPI_UNDER_SRUN = ['nice', '-n', '19', 'sh', '-c',
                       f'd={VADER_DIR}/$SLURMD_NODENAME && mkdir -p "$d" && '
                       'OMPI_MCA_btl_vader_backing_directory="$d" '
                       'OMPI_MCA_mpi_yield_when_idle=1 exec "$0" "$@"']

# MPICH's UCX picks its transports by what each peer can reach. The Slurm
# peer's nodes share this host's PID namespace, so its ranks on different
# nodes reach each other by CMA (process_vm_readv), as on separate machines
# they never could; hpcq's nodes each have a PID namespace of their own, so
# its ranks pair across nodes over TCP, as on separate machines, which cost
# them more CPU in MPI_Init here (by hand, 64 ranks: 0.1-0.3 s more system
# time in all, none more with the transports below). Each MPICH launch is
# therefore made twice under both: with UCX's own choice, and with
# UCX_TLS=self,sysv,tcp, the same transports on both sides.
SAME_TRANSPORTS = "self,sysv,tcp"


def worlds(program, open_mpi_program):
    """Each kind of launch: (hpcq's --mpi, its command, Slurm's --mpi, its
    command, UCX_TLS or None)."""
    return [("pmi1", [program], "pmi2", [program], None),
            ("pmi1", [program], "pmi2", [program], SAME_TRANSPORTS),
            ("pmix", OPEN_MPI_ON_EMULATED_NODES + [open_mpi_program],
             "pmix", OPEN_MPI_UNDER_SRUN + [open_mpi_program], None)]


def inside(program, open_mpi_program, runs, sizes):
    """Runs in the hpcq cluster (hpcq start's command). Each launch of hpcq
    is followed or preceded (alternately, run by run) by the same launch
    under Slurm, whose cluster is up beside it: the two systems take turns
    in one window, so that a change in the host's speed during the
    invocation (this VM's varies by a third over minutes) falls on both."""
    env = dict(os.environ)
    env.pop("HPCQ_JOB_ID", None)
    hpcq = os.environ["HPCQ_BENCH_CLI"]  # the build's, set by run_both
    slurm_env = json.loads(os.environ.get("HPCQ_BENCH_SLURM_ENV") or "null")
    for r in range(runs):
        for n in sizes:
            for hpcq_pmi, hpcq_command, slurm_pmi, slurm_command, tls in worlds(
                    program, open_mpi_program):
                extra = {"UCX_TLS": tls} if tls else {}
                # Unbound, as the Slurm peer's tasks are (ConstrainCores=no, no
                # task/affinity): 64 ranks bound to this host's 2 CPUs would wait
                # on each other's CPU.
                turns = [("hpcq", hpcq_pmi, [hpcq, "run", "-N", str(NODES), "-n", str(n),
                                             "--cpu-bind", "none", "--mpi", hpcq_pmi, "--"] +
                          hpcq_command, dict(env, **extra))]
                if slurm_env:
                    # As many ranks on each node as hpcq puts there: left to itself,
                    # srun -N 4 -n 16 put 13 on the first node and 1 on each other.
                    turns.append(("slurm", slurm_pmi,
                                  ["srun", "-N", str(NODES), "-n", str(n),
                                   f"--ntasks-per-node={n // NODES}", f"--mpi={slurm_pmi}"] +
                                  slurm_command, dict(slurm_env, **extra)))
                    if r % 2:
                        turns.reverse()
                for system, pmi, cmd, cmd_env in turns:
                    wireup, whole, init, failed = launch(cmd, n, env=cmd_env,
                                                         cwd=os.path.dirname(program))
                    row = dict(system=system, pmi=pmi, ranks=n, run=r + 1,
                               wireup_s=round(wireup, 3), whole_s=round(whole, 3), init_s=init,
                               **({"ucx_tls": tls} if tls else {}),
                               **({"failed_attempts": failed} if failed else {}))
                    print(json.dumps(row), flush=True)


def run_both(build, program, open_mpi_program, runs, sizes, slurm_env):
    """hpcq's cluster, with `slurm_env` (None: hpcq alone) for the inside's
    sruns; returns every launch's row."""
    out = subprocess.run(
        [f"{build}/cli/hpcq", "start", "--agents", str(NODES), "--topology",
         f"pack:1 numa:1 core:{CORES} pu:1", "--node-down-after", str(NODE_DOWN_AFTER_S), "--", sys.executable, os.path.abspath(__file__),
         "--inside", "--program", program, "--open-mpi-program", open_mpi_program,
         "--runs", str(runs), "--ranks", ",".join(map(str, sizes))],
        capture_output=True, text=True,
        env=dict(os.environ, HPCQ_BENCH_CLI=f"{build}/cli/hpcq",
                 HPCQ_BENCH_SLURM_ENV=json.dumps(slurm_env)))
    if out.returncode != 0:
        failed = out.stdout[out.stdout.rfind("launch failed:"):] if "launch failed:" in \
            out.stdout else out.stdout[-3000:]
        raise SystemExit(f"the runs failed:\n{failed}\n{out.stderr[-3000:]}")
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]


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
    program = build_program("mpich")
    open_mpi_program = build_program("openmpi")
    when = time.strftime("%Y-%m-%dT%H:%M:%S")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)

    def keep(rows):  # appends the rows, with when, where and what ran
        with open(os.path.join(HERE, "results", "mpi_wireup.jsonl"), "a") as f:
            for r in rows:
                r.update(when=when, commit=git_commit(), host=throughput.host(), nodes=NODES,
                         cores_per_node=CORES, **({"label": a.label} if a.label else {}))
                f.write(json.dumps(r) + "\n")
        return rows
    build = os.path.abspath(a.build)
    try:
        if a.skip_slurm:
            results = keep(run_both(build, program, open_mpi_program, a.runs, sizes, None))
        else:
            # In cgroups as hpcq's ranks are (without, 64 MPICH ranks' MPI_Init
            # took 3% less by hand, taken out of hpcq's).
            with slurm_cluster(node_cpus=CORES, private_pmix_dirs=True, cgroups=True) as (env, _):
                results = run_both(build, program, open_mpi_program, a.runs, sizes, env)
                for r in results:
                    if r["system"] == "slurm":
                        r["peer_cgroups"] = True
                keep(results)
    finally:
        subprocess.run(["rm", "-rf", VADER_DIR, os.path.dirname(program),
                        os.path.dirname(open_mpi_program)])
    kinds = [("MPICH", "pmi1", "pmi2", None),
             (f"MPICH, UCX_TLS={SAME_TRANSPORTS}", "pmi1", "pmi2", SAME_TRANSPORTS),
             ("Open MPI", "pmix", "pmix", None)]
    for n in sizes:
        for name, hpcq_pmi, slurm_pmi, tls in kinds:
            def stats(system, pmi):
                v = [r["wireup_s"] for r in results if r["system"] == system and
                     r["pmi"] == pmi and r["ranks"] == n and r.get("ucx_tls") == tls]
                return (min(v), statistics.median(v)) if v else None
            h, s = stats("hpcq", hpcq_pmi), stats("slurm", slurm_pmi)
            fmt = lambda v: f"{v[0]:.2f} / {v[1]:.2f} s" if v else "-"
            ratio = f", hpcq / Slurm {h[1] / s[1]:.2f}" if h and s else ""
            print(f"{n} ranks, {name}: hpcq {fmt(h)}, Slurm {fmt(s)} (min / median){ratio}")
    for system in ("hpcq", "slurm"):
        again = sum(1 for r in results if r["system"] == system and r.get("failed_attempts"))
        if again:
            print(f"{system}: {again} launches were made again after a failed attempt")

if __name__ == "__main__":
    main()
