"""Slurm 22.05 from Debian's packages on loopback, for the benchmarks that
compare hpcq with it: slurmctld and 4 slurmd of 2 CPUs each, the recipe in
../shared/peers/slurm, with the tuned scheduling profile (no batch delay).

    with slurm_cluster() as (env, peer):
        subprocess.run(["srun", "true"], env=env, cwd=peer)
"""
import contextlib
import os
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(os.path.dirname(HERE), "..", "shared", "peers", "slurm")


@contextlib.contextmanager
def slurm_cluster(node_cpus=None):
    """Installs (if needed), configures and starts the peer from a scratch
    copy of its recipe; yields its environment and that copy (its bench.py
    writes its results there); stops it and removes the copy after.
    `node_cpus`: the CPUs each node declares (default the recipe's 2); more
    than the host has is accepted (SlurmdParameters=config_overrides), as
    hpcq's emulated nodes declare theirs."""
    work = tempfile.mkdtemp(prefix="hpcq-bench-slurm-")
    peer = os.path.join(work, "slurm")
    shutil.copytree(PEERS, peer)
    extra = "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0"
    if node_cpus:
        extra += "\nSlurmdParameters=config_overrides"
    env = dict(os.environ, SLURM_EXTRA_CONF=extra,
               **({"SLURM_NODE_CPUS": str(node_cpus)} if node_cpus else {}))
    run = lambda s: subprocess.run(["bash", os.path.join(peer, s)], check=True, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("install.sh")
    run("configure.sh")
    run("start.sh")
    if node_cpus:  # a node that registered before its overrides applied is drained
        subprocess.run(["scontrol", "update", "nodename=ALL", "state=resume"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield env, peer
    finally:
        run("stop.sh")
        shutil.rmtree(work, ignore_errors=True)
