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
def slurm_cluster():
    """Installs (if needed), configures and starts the peer from a scratch
    copy of its recipe; yields its environment and that copy (its bench.py
    writes its results there); stops it and removes the copy after."""
    work = tempfile.mkdtemp(prefix="hpcq-bench-slurm-")
    peer = os.path.join(work, "slurm")
    shutil.copytree(PEERS, peer)
    env = dict(os.environ,
               SLURM_EXTRA_CONF="SchedulerParameters=batch_sched_delay=0,sched_min_interval=0")
    run = lambda s: subprocess.run(["bash", os.path.join(peer, s)], check=True, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("install.sh")
    run("configure.sh")
    run("start.sh")
    try:
        yield env, peer
    finally:
        run("stop.sh")
        shutil.rmtree(work, ignore_errors=True)
