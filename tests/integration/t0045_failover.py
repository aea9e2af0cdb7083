#!/usr/bin/env python3
"""Leader failover (issue 25): three hpcqd candidates on an etcd of three
members (hpcq start --leaders 3) and four agents. kill -9 of the active
leader while jobs are submitted and running: a standby leads within 10 s, no
acknowledged submission is lost, a running job keeps running and is
adopted, no job runs twice, and the killed candidate, started again, stands
by. A leader frozen past its lease (SIGSTOP: a long pause, a host that
hangs) is replaced, and once it runs again it ends without acting."""
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t
from failover_common import (ENDED, active, check_adopted, fail_over_during_submissions,
                             leader_logs, leaders, running_job, wait_new_leader)

ETCD = "/usr/bin/etcd"
if os.access(ETCD, os.X_OK):
    t.within_cluster(agents=4, fanout=2, topology="pack:1 numa:1 core:2 pu:1",
                     extra=("--leaders", "3", "--node-down-after", "15"))


def need_etcd():
    if not os.access(ETCD, os.X_OK):
        raise t.Skip(f"{ETCD} is not installed (Debian: etcd-server)")


def pid_of(name):
    out = subprocess.run(["pgrep", "-f", f"hpcqd --config {t.cluster_dir()}/hpcq.toml .*--name {name} "],
                         capture_output=True, text=True).stdout.split()
    t.check(len(out) == 1, f"{name}: pids {out}")
    return int(out[0])


def test_kill_the_active_leader_during_submissions():
    need_etcd()
    cmdline = []

    def kill(old):
        listed = leaders()
        t.check(sorted(listed) == ["leader-1", "leader-2", "leader-3"], f"hpcq leaders: {listed}")
        t.check([n for n, c in listed.items() if c["state"] == "active"] == [old],
                f"hpcq leaders: {listed}, the logs say {old} leads")
        t.check(all(c["state"] == "standby" and c["pid"] == pid_of(n)
                    for n, c in listed.items() if n != old), f"hpcq leaders: {listed}")
        cmdline.extend(open(f"/proc/{pid_of(old)}/cmdline").read().split("\0")[:-1])
        os.kill(pid_of(old), signal.SIGKILL)
    old, new = fail_over_during_submissions("long", kill, "kill -9 of")
    listed = leaders()
    t.check(listed[old]["state"] == "unreachable" and listed[new]["state"] == "active",
            f"hpcq leaders after the kill: {listed}")

    # The killed candidate, started again, stands by.
    path = os.path.join(t.cluster_dir(), "logs", f"hpcqd-{old[len('leader-'):]}.log")
    since = os.path.getsize(path)
    log = open(path, "a")
    again = subprocess.Popen(cmdline, stdout=log, stderr=log)

    def stands_by():
        with open(path, errors="replace") as f:
            f.seek(since)
            return re.search(rf"{old} stands by: leader-\d+ leads", f.read()) is not None
    try:
        t.wait_until(f"{old} standing by", stands_by)
        t.check(active()[0] != old, f"{old} leads again")
        t.check(again.poll() is None, f"{old} exited: {again.returncode}")
    finally:
        again.send_signal(signal.SIGTERM)
        again.wait(timeout=30)


def test_a_leader_frozen_past_its_lease_ends_without_acting():
    need_etcd()
    d = t.workdir()
    job, gate, pids = running_job(d, "frozen")
    start_before = t.status(job)["start_time"]
    old, _ = active()
    pid = pid_of(old)
    os.kill(pid, signal.SIGSTOP)
    try:
        # A standby wins once the frozen leader's lease has run out, at its
        # own address; the agents drop the frozen one's connections, silent
        # to ZeroMQ's heartbeats.
        t.wait_until("a standby winning", lambda: active()[0] != old, timeout=10)
    finally:
        os.kill(pid, signal.SIGCONT)
    # Back, it finds its lease gone (or its first write's guard) and ends
    # at once, having done nothing.
    t.wait_until(f"{old} ending", lambda: not os.path.exists(f"/proc/{pid}") or
                 open(f"/proc/{pid}/stat").read().split()[2] == "Z", timeout=10)
    path = [p for p in leader_logs() if p.endswith(f"hpcqd-{old[len('leader-'):]}.log")][0]
    t.check("no longer the leader" in open(path, errors="replace").read(),
            f"{old} did not say why it ended")
    took = wait_new_leader(old, time.monotonic(), timeout=10)
    print(f"{active()[0]} serves {took:.1f} s after {old} ended", flush=True)
    submitted = t.submit("-o", "/dev/null", "--", "true")
    s = t.wait_state(submitted, ENDED, timeout=60)
    t.check(s["state"] == "COMPLETED", f"job {submitted} ended {s['state']}")
    check_adopted(job, gate, pids, start_before)


t.main([test_kill_the_active_leader_during_submissions,
        test_a_leader_frozen_past_its_lease_ends_without_acting])
