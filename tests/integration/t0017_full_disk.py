#!/usr/bin/env python3
"""A full disk under the leader's state: submissions are refused with a clear
one-line error (never acknowledged and then lost), the daemon keeps running
and answering, and once there is room again everything works; every job that
was acknowledged is still there after a restart."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t
from manual_cluster import Cluster, free_port

MOUNT = "/tmp/hpcq-t0017-state"


def test_full_disk():
    d = t.workdir()
    acknowledged, refused = [], []
    for i in range(3000):
        p = subprocess.run([t.HPCQ, "submit", "-o", "/dev/null", "-t", "1",
                            "--", "sh", "-c", "x" * 2000], capture_output=True, text=True, cwd=d)
        if p.returncode == 0:
            acknowledged.append(int(p.stdout))
        else:
            refused.append(p.stderr.strip())
            if len(refused) >= 5:
                break
    t.check(refused, f"the 2 MiB state file system never filled ({len(acknowledged)} jobs)")
    for message in refused:
        t.check(len(message.splitlines()) == 1 and "could not be stored" in message and
                "disk is full" in message and "not reachable" not in message, message)
    t.check(subprocess.run([t.HPCQ, "nodes"], capture_output=True).returncode == 0,
            "hpcqd stopped answering")
    subprocess.run(["mount", "-o", "remount,size=64m", MOUNT], check=True)
    job = t.submit("-o", "/dev/null", "--", "true", cwd=d)
    t.wait_state(job, "COMPLETED", timeout=60)
    CLUSTER.restart_leader()
    for j in acknowledged:
        t.status(j)  # every acknowledged job survived
    print(f"{len(acknowledged)} acknowledged before the disk filled; refusals: {refused[0]}")


def main():
    os.makedirs(MOUNT, exist_ok=True)
    subprocess.run(["umount", MOUNT], capture_output=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", MOUNT], check=True)
    global CLUSTER
    cluster = CLUSTER = Cluster(f"tcp://127.0.0.1:{free_port()}",
                      [{"name": "node1", "endpoint": f"tcp://127.0.0.1:{free_port()}"}],
                      state_dir=f"{MOUNT}/leader")
    try:
        cluster.start()
        t.main([test_full_disk])
    finally:
        cluster.stop()
        subprocess.run(["umount", MOUNT], capture_output=True)


main()
