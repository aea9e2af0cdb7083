#!/usr/bin/env python3
"""Records what a user observes of real Slurm running tests/slurm_corpus, for
the differential test of hpcq's Slurm compatibility layer (issue 47 item 6).

Starts the Slurm 22.05 peer (slurm_peer.slurm_cluster: n1..n4 of 2 CPUs,
partition debug, cluster peerbench, jobs run as root) with accounting, runs
tests/integration/slurm_observe.observe over the whole corpus and writes

  tests/data/slurm_observed.json              the normalised observation
  bench/results/slurm_differential-<date>.json  that and the raw run

Run as root (the peer needs it), on a machine with no other Slurm running:

  sudo python3 bench/slurm_differential.py [--names 01_hello_env 15_exit_code ...]

sacct needs slurmdbd, which the peer's recipe leaves out
(accounting_storage/none): this script starts MariaDB and slurmdbd of its own
(installing them from Debian's archive when missing), points the peer's
slurmctld at them and restarts it, and stops them after.
"""
import argparse
import contextlib
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import slurm_observe  # noqa: E402
from slurm_peer import slurm_cluster  # noqa: E402

CORPUS = os.path.join(ROOT, "tests", "slurm_corpus")
OBSERVED = os.path.join(ROOT, "tests", "data", "slurm_observed.json")
RESULTS = os.path.join(HERE, "results")
DB_PORT = 13306  # MariaDB on loopback for slurmdbd; away from a site's 3306
DBD_PORT = 6819
SLURM_CONF = "/etc/slurm/slurm.conf"
SLURMDBD_CONF = "/etc/slurm/slurmdbd.conf"
# The accounts the corpus charges (#SBATCH -A), as a site has them.
ACCOUNTS = ("physics",)


def _quiet(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, **kw)


def _poll(what, ok, timeout_s, step_s=0.2):
    deadline = time.monotonic() + timeout_s
    while not ok():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(step_s)


def _install_accounting_packages():
    if shutil.which("slurmdbd") and shutil.which("mariadbd"):
        return
    _quiet(["apt-get", "install", "-y", "--no-install-recommends", "slurmdbd",
            "mariadb-server"], env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def _stop_pid_file(path):
    """Stops the daemon this script started whose pid `path` holds."""
    try:
        with open(path) as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, 15)
    except ProcessLookupError:
        return

    def gone():
        try:
            os.kill(pid, 0)
            return False
        except ProcessLookupError:
            return True
    try:
        _poll(f"pid {pid} to exit", gone, 15)
    except SystemExit:
        os.kill(pid, 9)


@contextlib.contextmanager
def accounting_daemons():
    """MariaDB (private data directory, loopback port) and slurmdbd for the
    peer; yields the slurm.conf lines that point slurmctld at them."""
    _install_accounting_packages()
    work = tempfile.mkdtemp(prefix="hpcq-slurmdbd-")
    data, sock = os.path.join(work, "db"), os.path.join(work, "db.sock")
    db_pid, dbd_pid = os.path.join(work, "mariadb.pid"), os.path.join(work, "slurmdbd.pid")
    _quiet(["mariadb-install-db", "--user=root", f"--datadir={data}",
            "--auth-root-authentication-method=socket", "--skip-test-db"])
    db = subprocess.Popen(["mariadbd", "--no-defaults", "--user=root", f"--datadir={data}",
                           f"--socket={sock}", f"--pid-file={db_pid}", "--bind-address=127.0.0.1",
                           f"--port={DB_PORT}", "--innodb-buffer-pool-size=64M",
                           f"--log-error={work}/mariadb.log"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sql = lambda q: subprocess.run(["mariadb", f"--socket={sock}", "-u", "root", "-e", q],
                                   capture_output=True, text=True)
    try:
        _poll("MariaDB", lambda: sql("select 1").returncode == 0, 60)
        sql("CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'peer';"
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';")
        with open(SLURMDBD_CONF, "w") as f:
            f.write(f"""# Written by {__file__} for the differential run; removed after.
AuthType=auth/munge
DbdHost=localhost
DbdPort={DBD_PORT}
SlurmUser=root
LogFile={work}/slurmdbd.log
PidFile={dbd_pid}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={DB_PORT}
StorageUser=slurm
StoragePass=peer
StorageLoc=slurm_acct_db
""")
        os.chmod(SLURMDBD_CONF, 0o600)
        yield (f"AccountingStorageType=accounting_storage/slurmdbd\n"
               f"AccountingStorageHost=localhost\nAccountingStoragePort={DBD_PORT}\n")
    finally:
        _stop_pid_file(dbd_pid)
        db.terminate()
        try:
            db.wait(30)
        except subprocess.TimeoutExpired:
            db.kill()
            db.wait()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(SLURMDBD_CONF)
        shutil.rmtree(work, ignore_errors=True)


def enable_accounting(env, lines, cluster):
    """Replaces the peer's AccountingStorage* lines with `lines`, starts
    slurmdbd (the peer's munged is up by now), registers the cluster and the
    corpus's accounts, and restarts the peer's slurmctld (AccountingStorageType
    needs a restart, not a reconfigure), keeping the pid file its stop.sh
    reads; waits for the nodes to come back."""
    with open(SLURM_CONF) as f:
        kept = [l for l in f.read().splitlines(True) if not l.startswith("AccountingStorage")]
    with open(SLURM_CONF, "w") as f:
        f.writelines(kept)
        f.write(lines)
    _quiet(["/usr/sbin/slurmdbd"], env=env)
    sacctmgr = lambda *a: subprocess.run(["sacctmgr", "-i", *a], env=env,
                                         capture_output=True, text=True)
    _poll("slurmdbd", lambda: sacctmgr("show", "cluster").returncode == 0, 60)
    sacctmgr("add", "cluster", cluster)
    for account in ACCOUNTS:
        sacctmgr("add", "account", account, f"cluster={cluster}")
        sacctmgr("add", "user", "root", f"account={account}", f"cluster={cluster}")
    # The peer's state directory outlives it (PEER_ROOT), and its slurmctld -i
    # recovers the jobs an earlier run left: cancel them and start clean (-c),
    # so that the corpus finds 4 idle nodes.
    squeue = lambda: subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True,
                                    text=True).stdout.split()
    if squeue():
        subprocess.run(["scancel", *squeue()], env=env, capture_output=True)
        _poll("the earlier run's jobs to end", lambda: not squeue(), 60)
    pid_file = os.path.join(env.get("PEER_ROOT", "/tmp/hpcq-peers/slurm"), "run",
                            "slurmctld.pid")
    _stop_pid_file(pid_file)
    _quiet(["/usr/sbin/slurmctld", "-c"], env=env)
    ping = lambda: "UP" in subprocess.run(["scontrol", "ping"], env=env, capture_output=True,
                                          text=True).stdout
    _poll("slurmctld", ping, 60)
    _quiet(["scontrol", "reconfigure"], env=env)

    def idle():
        out = subprocess.run(["sinfo", "-h", "-t", "idle", "-o", "%D"], env=env,
                             capture_output=True, text=True).stdout.split()
        return sum(int(n) for n in out) >= 4
    _poll("4 idle nodes", idle, 120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names", nargs="*", help="corpus entries to run (default all)")
    parser.add_argument("--out", default=OBSERVED, help="the normalised observation")
    parser.add_argument("--raw", help="the raw run (default bench/results/...-<date>.json)")
    parser.add_argument("--workdir", help="run the entries here and keep their files "
                        "(default a temporary directory, removed after)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the Slurm peer starts daemons as root")
    t0 = time.monotonic()
    with accounting_daemons() as accounting_conf, slurm_cluster() as (env, _peer):
        env = dict(env, SLURM_CONF=SLURM_CONF)
        enable_accounting(env, accounting_conf, "peerbench")
        started = time.monotonic() - t0
        workdir = args.workdir or tempfile.mkdtemp(prefix="hpcq-slurm-corpus-")
        os.makedirs(workdir, exist_ok=True)
        raw = {}
        try:
            result = slurm_observe.observe(CORPUS, env, workdir, names=args.names, raw=raw)
        finally:
            if not args.workdir:
                shutil.rmtree(workdir, ignore_errors=True)
        observed = time.monotonic() - t0 - started
    total = time.monotonic() - t0
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, sort_keys=True, indent=1)
        f.write("\n")
    raw_path = args.raw or os.path.join(
        RESULTS, f"slurm_differential-{datetime.date.today().isoformat()}.json")
    with open(raw_path, "w") as f:
        json.dump({"system": "slurm 22.05 peer", "seconds": {
            "start": round(started, 1), "observe": round(observed, 1), "total": round(total, 1)},
            "raw": raw, "observed": result}, f, sort_keys=True, indent=1)
        f.write("\n")
    print(f"{len(result)} entries; peer start {started:.0f}s, corpus "
          f"{observed:.0f}s, total {total:.0f}s; wrote {args.out} and {raw_path}")
    amiss = [f"{name}: {'never ended' if 'ended' in r else r['unexpected']}"
             for name, r in sorted(result.items()) if "ended" in r or "unexpected" in r]
    if amiss:
        raise SystemExit("entries that did not do what they say:\n  " + "\n  ".join(amiss))


if __name__ == "__main__":
    main()
