#!/usr/bin/env python3
"""hpcqd's /metrics (issue 24, item 6), scraped over HTTP and read with a real
parser (python3-prometheus-client's): jobs by state and queue, starts and
ends by outcome, the submit, scheduling-cycle and store-commit histograms,
nodes by state, cores allocated and free, overlay messages by type, and
with per_node each node's state, cores, memory, jobs and heartbeat age; every
metric the shipped Grafana dashboard (examples/grafana/hpcq.json) queries is
served. A bad [metrics] listen is refused in one line. 120 connections that
send nothing and a few that send half a request hold up no scrape, and hpcqd
closes them (issue 45, item 12)."""
import json
import os
import re
import select
import socket
import sys
import time
import urllib.parse
import urllib.request

# Debian's Python, which has python3-prometheus-client (.ci/install-deps).
if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
    os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t  # noqa: E402

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(ROOT, "examples", "grafana", "hpcq.json")
CONFIG = "/tmp/hpcq-t0042.toml"
t.metrics_config(CONFIG, 'per_node = true\n\n[[queue]]\nname = "batch"\ndefault = true\n\n'
                 '[[queue]]\nname = "debug"\n')
t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:2 pu:1",
                 extra=("--config", CONFIG))


def url():
    return t.metrics_url(CONFIG)


def scrape(timeout=10):
    """{(name, frozenset(labels)): value} of every sample served."""
    with urllib.request.urlopen(url(), timeout=timeout) as r:
        t.check(r.status == 200, f"GET /metrics: {r.status}")
        text = r.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0)


def total(samples, name, **labels):
    return sum(v for (n, ls), v in samples.items()
               if n == name and all((k, w) in ls for k, w in labels.items()))


def test_jobs_nodes_and_latencies():
    d = t.workdir()
    gate = t.Gate(d)
    done = t.submit("--", "true", cwd=d)
    failed = t.submit("-q", "debug", "--", "false", cwd=d)
    t.wait_state(done, "COMPLETED")
    t.wait_state(failed, "FAILED")
    cancelled = t.submit("--", *gate.command, cwd=d)
    t.wait_state(cancelled, "RUNNING")
    t.hpcq("cancel", str(cancelled))
    t.wait_state(cancelled, "CANCELLED")
    running = t.submit("-n", "2", "--", *gate.command, cwd=d)
    t.wait_state(running, "RUNNING")
    pending = t.submit("-q", "debug", "--begin", "now+3600", "--", "true", cwd=d)
    t.hpcq("drain", "node2", "--reason", "test")
    try:
        # The gauges are counted every second.
        samples = t.wait_until("the gauges of this state", lambda: (
            lambda s: s if value(s, "hpcq_jobs", state="running", queue="batch") == 1
            and value(s, "hpcq_nodes", state="drained") == 1 else None)(scrape()), timeout=10)
        t.check(value(samples, "hpcq_jobs", state="pending", queue="debug") == 1,
                f"pending jobs of debug (job {pending})")
        t.check(value(samples, "hpcq_job_ends_total", outcome="completed", queue="batch") >= 1
                and value(samples, "hpcq_job_ends_total", outcome="failed", queue="debug") == 1
                and value(samples, "hpcq_job_ends_total", outcome="cancelled", queue="batch") == 1,
                f"ends {[(k, v) for k, v in samples.items() if k[0] == 'hpcq_job_ends_total']}")
        t.check(total(samples, "hpcq_job_starts_total") == 4, "starts")
        t.check(value(samples, "hpcq_nodes", state="up") == 1, "up nodes")
        # node1 runs the 2-core job; node2 (drained) is idle.
        t.check(value(samples, "hpcq_cores", state="allocated") == 2
                and value(samples, "hpcq_cores", state="free") == 0
                and value(samples, "hpcq_cores", state="unavailable") == 2,
                f"cores {[(k, v) for k, v in samples.items() if k[0] == 'hpcq_cores']}")
        for histogram, at_least in (("hpcq_submit_seconds", 5),
                                    ("hpcq_scheduling_cycle_seconds", 1),
                                    ("hpcq_store_commit_seconds", 1)):
            count = value(samples, histogram + "_count")
            t.check(count >= at_least, f"{histogram}_count {count}")
            t.check(value(samples, histogram + "_bucket", le="+Inf") == count,
                    f"{histogram}'s +Inf bucket")
        for kind in ("hello", "heartbeat", "job_update"):
            t.check(value(samples, "hpcq_overlay_messages_received_total", type=kind) > 0, kind)
        # [metrics] per_node: each node's own.
        per_node = {k: v for k, v in samples.items() if k[0].startswith("hpcq_node_")}
        t.check(value(samples, "hpcq_node_state", node="node1", state="up") == 1
                and value(samples, "hpcq_node_state", node="node1", state="drained") == 0
                and value(samples, "hpcq_node_state", node="node2", state="drained") == 1
                and value(samples, "hpcq_node_cores", node="node1", state="allocated") == 2
                and value(samples, "hpcq_node_cores", node="node2", state="free") == 2
                and value(samples, "hpcq_node_jobs", node="node1") == 1
                and value(samples, "hpcq_node_jobs", node="node2") == 0
                and value(samples, "hpcq_node_memory_bytes", node="node1", state="free") > 0,
                f"per node {per_node}")
        for node in ("node1", "node2"):
            age = value(samples, "hpcq_node_heartbeat_age_seconds", node=node)
            t.check(0 <= age < 10, f"{node}'s heartbeat age {age}")
    finally:
        gate.open()
        t.hpcq("resume", "node2")
        t.hpcq("cancel", str(pending))


def test_the_dashboard_queries_only_what_is_served():
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    t.check(len(exprs) >= 6, f"{len(exprs)} queries")
    served = {name for name, _ in scrape()}
    for expr in exprs:
        for name in re.findall(r"\bhpcq_[a-z_]+", expr):
            t.check(name in served, f"the dashboard queries {name}, which is not served")


# hpcqd's limits (daemon/metrics_server.h, docs/admin-guide.md): a connection
# has 5 s to send its request; past 64 open, the oldest still sending is closed.
REQUEST_TIMEOUT = 5


def test_idle_connections_do_not_hold_up_a_scrape():
    address = urllib.parse.urlsplit(url())
    idle = []
    try:
        for i in range(125):
            idle.append(socket.create_connection((address.hostname, address.port), timeout=5))
            if i >= 120:  # half a request: the headers never end
                idle[-1].sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        # Before: civetweb's one worker waited 30 s on each silent
        # connection in turn, and this scrape timed out behind them.
        start = time.monotonic()
        try:
            samples = scrape(timeout=2)
        except OSError as e:
            raise t.Failure(f"a scrape with 125 idle connections open: {e}") from e
        took = time.monotonic() - start
        t.check(took < 2 and value(samples, "hpcq_nodes", state="up") >= 1,
                f"a scrape with 125 idle connections open took {took:.1f}s")
        # All are closed: past the cap at once, the rest at the request timeout.
        opened = time.monotonic()
        deadline = opened + REQUEST_TIMEOUT + 10
        open_ = list(idle)
        while open_ and time.monotonic() < deadline:
            readable, _, _ = select.select(open_, [], [], max(0, deadline - time.monotonic()))
            for s in readable:
                try:
                    got = s.recv(4096)
                except ConnectionResetError:
                    got = b""
                t.check(got == b"", f"an idle connection was answered {got[:80]!r}")
                open_.remove(s)
        t.check(not open_, f"{len(open_)} of 125 idle connections still open "
                f"{time.monotonic() - opened:.0f}s after the scrape")
    finally:
        for s in idle:
            s.close()


def test_a_bad_listen_is_refused():
    d = t.workdir()
    bad = os.path.join(d, "bad.toml")
    with open(bad, "w") as f:
        f.write('[metrics]\nlisten = "9464"\n')
    p = t.run([t.HPCQ, "start", "--config", bad, "--", "true"])
    t.check(p.returncode == 2 and p.stderr.count("\n") == 1 and "metrics.listen" in p.stderr,
            f"{p.returncode} {p.stderr!r}")


t.main([test_jobs_nodes_and_latencies, test_the_dashboard_queries_only_what_is_served,
        test_idle_connections_do_not_hold_up_a_scrape, test_a_bad_listen_is_refused])
