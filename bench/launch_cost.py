#!/usr/bin/env python3
"""hpcq's CPU per job against the floor (issue 27, goal 4).

The floor: bench/launch_floor.cc (hpcq-launch-floor), the cheapest honest
launch of `true` here: a cgroup per controller hpcq uses, made and removed,
a child in a new PID namespace, waited for. One job after another.

hpcq: `hpcq start --agents 4` (2 cores a node) runs --jobs `true` jobs
submitted through the API by 8 clients (hpcq-submit-load --wait); the CPU
time (user + system, from /proc/PID/stat) that hpcqd and the agents used
meanwhile, and that of the agents' reaped children (the job shells and their
tasks, `true` included), divided by the jobs: leader, agent and shell per
job, and their sum as a multiple of the floor's CPU per job. The client's
own CPU is not counted (the floor has none).

Slurm, the baseline in the same invocation: Slurm 22.05 from Debian's
packages (../shared/peers/slurm, 4 nodes x 2 CPUs, tuned, its steps contained
in cgroups as a site's are: slurm_peer.py's cgroups=True) runs --jobs `true`
jobs as one array (`sbatch --array=1-N --wrap true`, as hpcq runs a batch
job: its step runs the script). Its daemons are started inside a CPU
accounting cgroup of their own, so that everything they start (slurmstepd,
the job scripts, `true`) is counted with them: the cgroup's CPU over the run,
from the submit until squeue is empty (polled every 0.5 s), divided by the
jobs. sbatch and squeue themselves run outside it. Slurm's steps are not
counted by /proc as hpcq's shells are: slurmstepd is not slurmd's child.

Usage: bench/launch_cost.py [--runs 3] [--jobs 500] [--label L] [--skip-slurm]
Run as root on an idle machine; never two benchmarks at once. Appends one JSON
line per run to bench/results/launch_cost.jsonl and prints a table.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager, nullcontext

import throughput  # noqa: E402  (its commit() and host())
from slurm_peer import run_array, slurm_cluster

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TICK = os.sysconf("SC_CLK_TCK")


def daemons(cluster):
    """{pid: role} of this cluster's hpcqd and agents (their --config is in it)."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        name = os.path.basename(argv[0]).decode(errors="replace")
        if name in ("hpcqd", "hpcq-agent") and any(cluster.encode() in a for a in argv):
            out[int(pid)] = "leader" if name == "hpcqd" else "agent"
    return out


def cpu_of(pid):
    """(own, reaped children's) CPU seconds of pid."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) / TICK, (cutime + cstime) / TICK


def inside(build, jobs):
    cluster = os.path.dirname(os.environ["HPCQ_SOCKET"])
    pids = daemons(cluster)
    if list(pids.values()).count("agent") != 4 or "leader" not in pids.values():
        sys.exit(f"launch_cost: found {pids} for cluster {cluster}")
    before = {pid: cpu_of(pid) for pid in pids}
    t0 = time.monotonic()
    subprocess.run([f"{build}/bench/hpcq-submit-load", "-n", str(jobs), "-c", "8", "--wait",
                    "--output", "/dev/null"], check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    spent = dict(leader=0.0, agent=0.0, shell=0.0)
    for pid, role in pids.items():
        own, children = (a - b for a, b in zip(cpu_of(pid), before[pid]))
        spent[role] += own
        if role == "agent":
            spent["shell"] += children
    print(json.dumps(dict(system="hpcq", jobs=jobs, wall_s=round(wall, 3),
                          **{f"{k}_ms_per_job": round(v * 1000 / jobs, 3)
                             for k, v in spent.items()},
                          cpu_ms_per_job=round(sum(spent.values()) * 1000 / jobs, 3))))


def hpcq_run(build, jobs):
    out = subprocess.run(
        [f"{build}/cli/hpcq", "start", "--agents", "4", "--topology", "pack:1 numa:1 core:2 pu:1",
         "--", sys.executable, os.path.abspath(__file__), "--inside", "--build", build,
         "--jobs", str(jobs)], check=True, capture_output=True, text=True).stdout
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def floor_run(build, jobs):
    out = subprocess.run([f"{build}/bench/hpcq-launch-floor", "--jobs", str(jobs)], check=True,
                         capture_output=True, text=True).stdout
    return dict(json.loads(out), system="floor")


class CpuAccounting:
    """A cgroup that counts the CPU of every process started in it: v1's
    cpuacct controller, or v2's cpu.stat (kept in every v2 cgroup)."""

    def __init__(self, name):
        v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
        self.root = "/sys/fs/cgroup" if v2 else "/sys/fs/cgroup/cpuacct"
        self.dir = os.path.join(self.root, name)
        self.v2 = v2
        os.makedirs(self.dir, exist_ok=True)

    def seconds(self):
        if self.v2:
            with open(os.path.join(self.dir, "cpu.stat")) as f:
                return next(int(line.split()[1]) for line in f
                            if line.startswith("usage_usec")) / 1e6
        with open(os.path.join(self.dir, "cpuacct.usage")) as f:
            return int(f.read()) / 1e9

    @contextmanager
    def joined(self):
        """This process in the cgroup meanwhile: what it starts stays there."""
        def move(d):
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        move(self.dir)
        try:
            yield
        finally:
            move(self.root)

    def remove(self):
        try:
            os.rmdir(self.dir)
        except OSError as e:  # a daemon that outlived stop.sh
            print(f"launch_cost: {self.dir} not removed: {e}", file=sys.stderr)


@contextmanager
def slurm_peer():
    """(env, CpuAccounting) of a running contained Slurm peer whose daemons
    were started in the accounting cgroup."""
    acct = CpuAccounting("hpcq-bench-slurm")
    try:
        with ExitStack() as stack:
            with acct.joined():  # only while the daemons start
                env, _ = stack.enter_context(slurm_cluster(cgroups=True))
            yield env, acct
    finally:
        acct.remove()


def slurm_run(peer, jobs):
    env, acct = peer
    before = []
    _, wall = run_array(env, jobs, poll_s=0.5, at_start=lambda: before.append(acct.seconds()))
    spent = acct.seconds() - before[0]
    return dict(system="slurm", jobs=jobs, wall_s=round(wall, 3),
                cpu_ms_per_job=round(spent * 1000 / jobs, 3))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--label", default="")
    ap.add_argument("--skip-slurm", action="store_true")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    if a.inside:
        return inside(build, a.jobs)
    commit = throughput.commit()
    host = throughput.host()
    results = []
    with (nullcontext() if a.skip_slurm else slurm_peer()) as peer:
        measures = [lambda: floor_run(build, a.jobs), lambda: hpcq_run(build, a.jobs)]
        if peer:
            measures.append(lambda: slurm_run(peer, a.jobs))
        for r in range(1, a.runs + 1):
            for measure in measures:
                load = round(os.getloadavg()[0], 2)
                line = dict(measure(), run=r, load=load, commit=commit, host=host,
                            when=time.strftime("%Y-%m-%dT%H:%M:%S"),
                            **({"label": a.label} if a.label else {}))
                print(json.dumps(line), flush=True)
                results.append(line)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "launch_cost.jsonl"), "a") as f:
        for line in results:
            f.write(json.dumps(line) + "\n")

    def cell(system, key):
        v = [x[key] for x in results if x["system"] == system]
        return f"{min(v):.2f} / {statistics.median(v):.2f}"
    floor = statistics.median(x["cpu_ms_per_job"] for x in results if x["system"] == "floor")
    hpcq = statistics.median(x["cpu_ms_per_job"] for x in results if x["system"] == "hpcq")
    print(f"| CPU ms per job ({a.runs} runs: min / median) | |\n|---|---|")
    print(f"| floor | {cell('floor', 'cpu_ms_per_job')} |")
    for part in ("leader", "agent", "shell"):
        print(f"| hpcq {part} | {cell('hpcq', part + '_ms_per_job')} |")
    print(f"| hpcq in all | {cell('hpcq', 'cpu_ms_per_job')} ({hpcq / floor:.1f}x the floor) |")
    if not a.skip_slurm:
        slurm = statistics.median(x["cpu_ms_per_job"] for x in results if x["system"] == "slurm")
        print(f"| Slurm 22.05, contained: daemons, steps and tasks | "
              f"{cell('slurm', 'cpu_ms_per_job')} ({slurm / hpcq:.1f}x hpcq's) |")


if __name__ == "__main__":
    main()
