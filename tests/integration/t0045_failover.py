#!/usr/bin/env python3
"""Leader failover (issue 25): three hpcqd candidates on an etcd of three
members (hpcq start --leaders 3) and four agents. The store answers hpcqd
alone (client certificates), rows hpcqd did not seal are never loaded, and a
leader whose election key is deleted steps down (issue 45). kill -9 of the active
leader while jobs are submitted and running: a standby leads within 10 s, no
acknowledged submission is lost, a running job keeps running and is
adopted, no job runs twice, and the killed candidate, started again, stands
by. A leader frozen past its lease (SIGSTOP: a long pause, a host that
hangs) is replaced, and once it runs again it ends without acting."""
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t
from failover_common import (ENDED, ETCD, active, check_adopted, fail_over_during_submissions,
                             leader_logs, leaders, need_etcd, pid_of, running_job,
                             wait_new_leader)

ETCDCTL = "/usr/bin/etcdctl"
if os.access(ETCD, os.X_OK):
    t.within_cluster(agents=4, fanout=2, topology="pack:1 numa:1 core:2 pu:1",
                     extra=("--leaders", "3", "--node-down-after", "15"))


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
    # (unreachable, or standing by again once hpcq start has restarted it)
    t.check(listed[old]["state"] != "active" and listed[new]["state"] == "active",
            f"hpcq leaders after the kill: {listed}")

    # hpcq start, as a site's supervisor would, starts the killed candidate
    # again, and it stands by.
    path = os.path.join(t.cluster_dir(), "logs", f"hpcqd-{old[len('leader-'):]}.log")

    def stands_by():
        with open(path, errors="replace") as f:
            return len(re.findall(rf"{old} stands by: leader-\d+ leads", f.read())) > 0 and \
                leaders()[old]["state"] == "standby"
    t.wait_until(f"{old} started again and standing by", stands_by, timeout=30)
    t.check(active()[0] != old, f"{old} leads again")
    t.check(" ".join(open(f"/proc/{pid_of(old)}/cmdline").read().split("\0")[:-1]) ==
            " ".join(cmdline), f"{old} was started again with other arguments")


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


def store():
    """The etcd hpcq start runs, as hpcq.toml names it: endpoints, prefix,
    and hpcqd's TLS files."""
    toml = open(os.path.join(t.cluster_dir(), "hpcq.toml")).read()
    value = lambda key: re.search(rf'^{key} = "([^"]*)"', toml, re.M).group(1)
    endpoints = re.findall(r'"([^"]+)"', re.search(r"^etcd_endpoints = \[(.*)\]", toml, re.M).group(1))
    return {"endpoints": endpoints, "prefix": value("etcd_prefix"), "ca": value("etcd_ca"),
            "cert": value("etcd_cert"), "key": value("etcd_key")}


def etcdctl(*args, user=None, certs=True, scheme="https", limit=20):
    s = store()
    # etcdctl retries a refused handshake past its own timeouts: a refusal
    # may show as timeout's 124.
    command = ["timeout", str(limit), ETCDCTL, "--endpoints", ",".join(f"{scheme}://{e}" for e in s["endpoints"]),
               "--dial-timeout", "2s", "--command-timeout", "4s"]
    if certs:
        command += ["--cacert", s["ca"], "--cert", s["cert"], "--key", s["key"]]
    elif scheme == "https":
        command += ["--insecure-skip-tls-verify"]
    return t.run(command + list(args), user=user, env={**os.environ, "ETCDCTL_API": "3"})


def test_the_store_answers_hpcqd_only():
    """Issue 45: a local user reached the store from its ports in `ps` and read
    other users' jobs, wrote a job of uid 0 and deleted the leader's key. Now
    etcd asks for a client certificate of the cluster's own CA, which only
    root can read, and what hpcqd writes is sealed."""
    need_etcd()
    if not os.access(ETCDCTL, os.X_OK):
        raise t.Skip(f"{ETCDCTL} is not installed (Debian: etcd-client)")
    t.ensure_user()
    job = t.submit("-o", "/dev/null", "--", "true")
    t.wait_state(job, ENDED)
    prefix = store()["prefix"]
    tries = [("https", ("get", "--prefix", prefix + "jobs/")),
             ("https", ("put", prefix + "jobs/x", "v")), ("https", ("del", prefix + "leader")),
             ("https", ("lease", "list")), ("http", ("get", "--prefix", prefix + "jobs/"))]
    for scheme, args in tries:
        p = etcdctl(*args, user="hpcqtest", certs=False, scheme=scheme, limit=6)
        t.check(p.returncode != 0, f"a user ran etcdctl {' '.join(args)} over {scheme}: "
                f"{p.stdout[:200]}")
    for path in store()["key"], store()["ca"].replace("ca.pem", "ca.key"):
        t.check(os.stat(path).st_mode & 0o077 == 0, f"{path} is readable by others")
        t.check(t.run(["cat", path], user="hpcqtest").returncode != 0, f"a user read {path}")
    # hpcqd's own certificate reaches it, and finds the rows sealed.
    p = etcdctl("get", "--prefix", prefix + "jobs/", "--print-value-only")
    t.check(p.returncode == 0, f"etcdctl with hpcqd's certificate: {p.stderr}")
    rows = [line for line in p.stdout.splitlines() if line]
    t.check(rows and all(r.startswith("hpcq-seal1:") for r in rows),
            f"unsealed job rows: {[r[:40] for r in rows]}")


def test_rows_hpcqd_did_not_seal_are_never_loaded():
    """A writer of the store without hpcqd's secret: a job's row copied to
    another id and an unsealed row. The leader that loads them next (after a
    kill -9 of the active one) refuses both, says so, and runs neither."""
    need_etcd()
    prefix = store()["prefix"]
    job = t.submit("-o", "/dev/null", "--", "true")
    t.wait_state(job, ENDED)
    row = etcdctl("get", prefix + f"jobs/{job:020d}", "--print-value-only")
    t.check(row.returncode == 0 and row.stdout.startswith("hpcq-seal1:"), f"job {job}'s row: {row}")
    value = row.stdout.rstrip("\n")
    forged = {900001: value, 900002: value.split(":", 2)[2]}
    for id, v in forged.items():
        t.check(etcdctl("put", prefix + f"jobs/{id:020d}", "--", v).returncode == 0, "put")
    old, _ = active()
    os.kill(pid_of(old), signal.SIGKILL)
    wait_new_leader(old, time.monotonic(), timeout=20)
    new = active()[0]
    log = open(os.path.join(t.cluster_dir(), "logs", f"hpcqd-{new[len('leader-'):]}.log"),
               errors="replace").read()
    for id in forged:
        t.check(f"store row {prefix}jobs/{id:020d} refused" in log,
                f"{new} did not refuse job {id}'s row")
        t.check(t.hpcq("status", str(id), rc=None).returncode != 0, f"job {id} was loaded")
    for id in forged:
        etcdctl("del", prefix + f"jobs/{id:020d}")


def test_a_leader_whose_key_is_deleted_steps_down():
    """Issue 45: the leader went on with the overlay and every agent after its
    election key was deleted, while another loaded the state: nothing ran for
    55 s. It ends at once now (within a renewal, lease_s / 3), and the next
    leader serves."""
    need_etcd()
    old, _ = active()
    pid = pid_of(old)
    since = time.monotonic()
    t.check(etcdctl("del", store()["prefix"] + "leader").returncode == 0, "etcdctl del")
    t.wait_until(f"{old} ending", lambda: not os.path.exists(f"/proc/{pid}") or
                 open(f"/proc/{pid}/stat").read().split()[2] == "Z", timeout=10)
    print(f"{old} ended {time.monotonic() - since:.1f} s after its key was deleted", flush=True)
    path = [p for p in leader_logs() if p.endswith(f"hpcqd-{old[len('leader-'):]}.log")][0]
    # A standby may win the key before the leader's next check: then it reads
    # "is another's" rather than "is gone". Either says why.
    said = open(path, errors="replace").read()
    t.check(re.search(r"no longer (the leader|leads).*leader is (gone|another's)", said),
            f"{old} did not say why it ended")
    wait_new_leader(old, time.monotonic(), timeout=20)
    submitted = t.submit("-o", "/dev/null", "--", "true")
    s = t.wait_state(submitted, ENDED, timeout=60)
    t.check(s["state"] == "COMPLETED", f"job {submitted} ended {s['state']}")


t.main([test_kill_the_active_leader_during_submissions,
        test_a_leader_frozen_past_its_lease_ends_without_acting,
        test_the_store_answers_hpcqd_only,
        test_rows_hpcqd_did_not_seal_are_never_loaded,
        test_a_leader_whose_key_is_deleted_steps_down])
