#!/usr/bin/env python3
"""Network faults with real network namespaces: node2 runs in its own netns
behind a veth pair. A short partition (link down) leaves its job running; the
job's end during the partition is recorded with its real end time when the
link comes back. A partition longer than node_down_after_ms requeues the
job (--requeue) elsewhere, and the stale copy is killed when node2 rejoins,
so nothing runs twice. node3 reaches the leader through a proxy that delays
every chunk and cuts the connection at random (the kernel here has no netem,
so the faults are made in user space: 5-30 ms per chunk, a cut every 1-2.5 s): no job state change is lost or
duplicated."""
import os
import random
import socket
import sqlite3
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t
from manual_cluster import Cluster, free_port

NS, HOST_IF, NS_IF = "hpcq-t0016", "hq16h", "hq16n"
HOST_IP, NS_IP = "10.77.16.1", "10.77.16.2"


def sh(*args, check=True):
    return subprocess.run(list(args), capture_output=True, text=True, check=check)


def netns_up():
    netns_down()
    sh("ip", "netns", "add", NS)
    sh("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF)
    sh("ip", "link", "set", NS_IF, "netns", NS)
    sh("ip", "addr", "add", f"{HOST_IP}/24", "dev", HOST_IF)
    sh("ip", "link", "set", HOST_IF, "up")
    sh("ip", "netns", "exec", NS, "ip", "addr", "add", f"{NS_IP}/24", "dev", NS_IF)
    sh("ip", "netns", "exec", NS, "ip", "link", "set", NS_IF, "up")
    sh("ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up")


def netns_down():
    sh("ip", "link", "del", HOST_IF, check=False)
    sh("ip", "netns", "del", NS, check=False)


def link(up):
    sh("ip", "netns", "exec", NS, "ip", "link", "set", NS_IF, "up" if up else "down")


class FlakyProxy:
    """TCP proxy: each chunk is delayed 5-30 ms; every 1-2.5 s every
    connection is cut (the client reconnects, as ZeroMQ does)."""

    def __init__(self, target_host, target_port):
        self.target = (target_host, target_port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = self.listener.getsockname()[1]
        self.conns = []
        self.lock = threading.Lock()
        self.running = True
        self.cuts = 0
        threading.Thread(target=self.accept, daemon=True).start()
        threading.Thread(target=self.cutter, daemon=True).start()

    def accept(self):
        while self.running:
            try:
                client, _ = self.listener.accept()
            except OSError:
                continue
            try:
                server = socket.create_connection(self.target)
            except OSError:  # the leader is not listening (yet): the client retries
                client.close()
                continue
            with self.lock:
                self.conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    def pump(self, src, dst):
        rng = random.Random()
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                time.sleep(rng.uniform(0.005, 0.03))
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cutter(self):
        rng = random.Random(16)
        while self.running:
            time.sleep(rng.uniform(1.0, 2.5))
            with self.lock:
                conns, self.conns = self.conns, []
            if conns:
                self.cuts += 1
            for s in conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()
                except OSError:
                    pass

    def stop(self):
        self.running = False
        self.listener.close()


def end_events(state_dir):
    db = sqlite3.connect(f"file:{state_dir}/hpcq.db?mode=ro", uri=True)
    rows = db.execute("SELECT job_id, name FROM job_events WHERE name IN "
                      "('COMPLETED','FAILED','CANCELLED','TIMEOUT','NODE_FAIL','requeue')").fetchall()
    db.close()
    return rows


cluster = None
proxy = None


def test_short_partition_keeps_the_job_and_its_end():
    d = t.workdir()
    # Keep the other nodes out of the way: the job must land on node2.
    for n in ("node1", "node3"):
        t.hpcq("drain", n)
    try:
        gate = t.Gate(d)
        job = t.submit("-o", "p.out", "--", "sh", "-c",
                       f"while [ ! -e {gate.path} ]; do sleep 0.05; done; echo done", cwd=d)
        t.check(t.wait_state(job, "RUNNING")["nodes"] == ["node2"], "on node2")
        link(False)
        cut_at = time.time()
        gate.open()  # the job ends during the partition: its line is written
        out = os.path.join(d, "p.out")
        t.wait_until("the job's end on node2", lambda: os.path.exists(out) and
                     "done" in open(out).read(), timeout=5)
        t.check(cluster.nodes()["node2"]["state"] in ("unresponsive", "up"),
                "down already: the partition was not short")
        t.check(t.status(job)["state"] == "RUNNING", "the leader cannot know yet")
        link(True)
        healed_at = time.time()
        s = t.wait_state(job, "COMPLETED", timeout=20)
        # The end it records is the real one, not when it heard of it.
        t.check(cut_at < s["end_time"] < healed_at,
                f"end {s['end_time'] - cut_at:.1f}s after the cut, healed after "
                f"{healed_at - cut_at:.1f}s")
        cluster.wait_nodes({"node2": "up"})
    finally:
        link(True)
        for n in ("node1", "node3"):
            t.hpcq("resume", n)


def test_long_partition_requeues_and_never_runs_twice():
    d = t.workdir()
    runs = os.path.join(d, "runs.log")
    t.hpcq("drain", "node1")
    t.hpcq("drain", "node3")
    job = t.submit("--requeue", "-o", "/dev/null", "--", "sh", "-c",
                   f"echo $HPCQ_JOB_ID $HPCQ_NODENAME >> {runs}; sleep 30", cwd=d)
    t.check(t.wait_state(job, "RUNNING")["nodes"] == ["node2"], "on node2")
    link(False)
    try:
        t.hpcq("resume", "node1")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and t.status(job)["nodes"] != ["node1"]:
            time.sleep(0.2)
        s = t.status(job)
        t.check(s["nodes"] == ["node1"] and s["requeue_count"] == 1, f"requeued onto node1: {s}")
    finally:
        link(True)
    cluster.wait_nodes({"node2": "up"})
    # The copy that went on in the partition is killed when node2 rejoins.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        left = sh("pgrep", "-f", f"{cluster.dir}/agents/rank-2/jobs/{job}", check=False).stdout
        if not left.split():
            break
        time.sleep(0.2)
    t.check(not left.split(), "the partitioned copy still runs")
    t.hpcq("cancel", str(job))
    t.wait_state(job, "CANCELLED")
    t.hpcq("resume", "node3")


def test_flaky_link_loses_and_duplicates_nothing():
    d = t.workdir()
    runs = os.path.join(d, "runs.log")
    for n in ("node1", "node2"):
        t.hpcq("drain", n)
    try:
        jobs = [t.submit("-o", "/dev/null", "--", "sh", "-c",
                         f"echo $HPCQ_JOB_ID >> {runs}; sleep 0.{i % 5}", cwd=d)
                for i in range(20)]
        for j in jobs:
            s = t.wait_state(j, ["COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED"], timeout=90)
            t.check(s["state"] == "COMPLETED" and s["nodes"] == ["node3"], f"job {j}: {s}")
        ends = [row for row in end_events(cluster.state_dir) if row[0] in jobs]
        per_job = {j: [name for jid, name in ends if jid == j] for j in jobs}
        t.check(all(v == ["COMPLETED"] for v in per_job.values()), f"end events {per_job}")
        started = open(runs).read().split()
        t.check(sorted(map(int, started)) == sorted(jobs), f"ran: {started}")
        t.check(proxy.cuts >= 3, f"the proxy cut the link only {proxy.cuts} times")
    finally:
        for n in ("node1", "node2"):
            t.hpcq("resume", n)


def main():
    global cluster, proxy
    t.ensure_user("hpcqtest")
    netns_up()
    leader_port = free_port(HOST_IP)
    proxy = FlakyProxy(HOST_IP, leader_port)
    # The leader listens on the host end of the veth: reachable from the host
    # (node1, the proxy) and from the namespace (node2).
    cluster = Cluster(f"tcp://{HOST_IP}:{leader_port}", [
        {"name": "node1", "endpoint": f"tcp://127.0.0.1:{free_port()}"},
        {"name": "node2", "endpoint": f"tcp://{NS_IP}:{free_port()}", "netns": NS},
        {"name": "node3", "endpoint": f"tcp://127.0.0.1:{free_port()}",
         "parent_endpoint": f"tcp://127.0.0.1:{proxy.port}"},
    ])
    try:
        cluster.start()
        t.main([test_short_partition_keeps_the_job_and_its_end,
                test_long_partition_requeues_and_never_runs_twice,
                test_flaky_link_loses_and_duplicates_nothing])
    finally:
        cluster.stop()
        proxy.stop()
        netns_down()


main()
