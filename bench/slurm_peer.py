"""Slurm 22.05 from Debian's packages on loopback, for the benchmarks that
compare hpcq with it: slurmctld and 4 slurmd of 2 CPUs each, the recipe in
../shared/peers/slurm, with the tuned scheduling profile (no batch delay).

    with slurm_cluster() as (env, peer):
        subprocess.run(["srun", "true"], env=env, cwd=peer)
"""
import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(os.path.dirname(HERE), "..", "shared", "peers", "slurm")
CGROUP_ROOT = "/sys/fs/cgroup"  # cgroup v1: one hierarchy per controller


@contextlib.contextmanager
def slurm_cluster(node_cpus=None, private_pmix_dirs=False, cgroups=False):
    """Installs (if needed), configures and starts the peer from a scratch
    copy of its recipe; yields its environment and that copy (its bench.py
    writes its results there); stops it and removes the copy after.
    `node_cpus`: the CPUs each node declares (default the recipe's 2); more
    than the host has is accepted (SlurmdParameters=config_overrides), as
    hpcq's emulated nodes declare theirs.
    `private_pmix_dirs`: for srun --mpi=pmix. Its plugin makes each step's
    client directory at the same path on every node (mpi.conf's
    PMIxCliTmpDirBase, "spmix_appdir_<uid>_<job>.<step>"), so slurmds that
    share a host collide ("pmixp_mkdir: File exists") and the step fails.
    Each slurmd then runs in a mount namespace of its own in which that base
    is a directory of its node's.
    `cgroups`: contain the steps as a site's Slurm does and hpcq does:
    proctrack/cgroup (freezer) and task/cgroup with ConstrainRAMSpace (memory),
    not cores (the nodes declare more CPUs than the host has). Debian's Slurm
    names each slurmd's cgroups after its node (/slurm_n1/uid_U/job_J/...),
    so four on one host do not collide; they are removed after."""
    work = tempfile.mkdtemp(prefix="hpcq-bench-slurm-")
    peer = os.path.join(work, "slurm")
    shutil.copytree(PEERS, peer)
    mpi_conf = "/etc/slurm/mpi.conf"
    if private_pmix_dirs:
        base = os.path.join(work, "pmix")
        os.makedirs(base)
        with open(mpi_conf, "w") as f:
            f.write(f"PMIxCliTmpDirBase={base}\n")
        start = os.path.join(peer, "start.sh")
        with open(start) as f:
            text = f.read()
        plain = '/usr/sbin/slurmd -N "n$i"'
        if plain not in text:
            raise SystemExit(f"{start}: no '{plain}' line to run in a namespace")
        with open(start, "w") as f:
            f.write(text.replace(plain, (
                f'mkdir -p {base}-n$i && unshare -m --propagation private '
                f'sh -c "mount --bind {base}-n$i {base} && exec {plain}"')))
    # MaxArraySize: Slurm's default of 1001 refuses throughput.py's 2,000-element array.
    extra = "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0\nMaxArraySize=100001"
    if node_cpus:
        extra += "\nSlurmdParameters=config_overrides"
    cgroup_conf = "/etc/slurm/cgroup.conf"
    if cgroups:
        extra += "\nProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup"
        with open(cgroup_conf, "w") as f:
            f.write("CgroupPlugin=cgroup/v1\nConstrainRAMSpace=yes\nConstrainCores=no\n")
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
        if private_pmix_dirs and os.path.exists(mpi_conf):
            os.unlink(mpi_conf)
        if cgroups:
            os.unlink(cgroup_conf)
            for top in glob.glob(f"{CGROUP_ROOT}/*/slurm_n*"):
                for d, _, _ in os.walk(top, topdown=False):  # deepest first
                    try:
                        os.rmdir(d)
                    except OSError:
                        pass
        shutil.rmtree(work, ignore_errors=True)


def run_array(env, jobs, poll_s, at_start=lambda: None):
    """Waits for an empty queue, then runs `jobs` `true` jobs as one array
    (sbatch --array=1-N --wrap true) and waits, polling squeue every poll_s,
    until the queue is empty again. `at_start` is called just before the
    submit. Returns (seconds the submit took, seconds to the empty queue)."""
    squeue = lambda: subprocess.run(["squeue", "-h", "-o", "%i"], env=env, check=True,
                                    capture_output=True, text=True).stdout.split()
    while squeue():
        time.sleep(poll_s)
    at_start()
    t0 = time.monotonic()
    subprocess.run(["sbatch", "-Q", "-o", "/dev/null", "-e", "/dev/null", "-n1",
                    f"--array=1-{jobs}", "--wrap", "true"], env=env, check=True,
                   stdout=subprocess.DEVNULL, cwd=tempfile.gettempdir())
    t1 = time.monotonic()
    while squeue():
        time.sleep(poll_s)
    return t1 - t0, time.monotonic() - t0
