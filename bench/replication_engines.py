#!/usr/bin/env python3
"""Issue 25, item 1: the replicated-state engines, measured side by side.

On loopback, in one run, against the same disk:

  sqlite    the single-leader baseline: SQLite in WAL mode with
            synchronous=FULL (as lib/store opens hpcq.db), one row per
            transaction (one acknowledged submit) and 100 rows per commit (as
            group commit batches them), 1 and 8 writer threads. The writers
            take turns through one mutex, as they do through hpcq's one writer
            thread (without it SQLite's busy handler sleeps and the figure
            measures the sleeps);
  etcd      etcd 3.4, 3 members on 127.0.0.1, driven through the v3 JSON
            gateway (HTTP keep-alive, one connection per client): puts of
            1 KiB values, and the same put inside a Txn that first compares
            the election key won with /v3/election/campaign (its create
            revision and its lease): the shape every hpcqd write would take;
  dqlite    dqlite 1.11 (libraft 0.15 underneath), 3 nodes. dqlite 1.11 has no
            C client, so it is driven through Debian's go-dqlite 1.11 tools:
            `dqlite-demo` (a node with an HTTP key/value API; a PUT is one
            INSERT OR REPLACE through the Go client to the leader), with the
            same HTTP client as etcd; and `dqlite-benchmark --workload kvwrite`
            (Canonical's tool: Go workers in the leader's process, no HTTP;
            only the writes made once all 3 nodes are voters count);
  failover  kill -9 of the engine's leader while one client writes through
            the cluster, giving up on a write after a deadline (10 s, then
            1 s) and sending the next one to the next member: the time from
            the kill until a live member names a new leader, and until the
            first acknowledged put that began after the kill; and whether
            every acknowledged put can be read back. The killed member is
            restarted, and caught up, between kills.

Every engine runs with its defaults (etcd: heartbeat 100 ms, election 1 s;
dqlite: heartbeat 500 ms, election 3 s). The three members share this
machine's cores and disk with the client, so each line also carries the CPU
the client and the members used.

Usage: bench/replication_engines.py [--reps 3] [--seconds 5] [--kills 5]
           [--deadlines 10,1] [--tmp /var/tmp] [--skip-etcd] [--skip-dqlite]
           [--skip-failover] [--label TEXT]
Needs: Debian 12 with etcd-server and go-dqlite installed (python3 only from
Debian). Root is not needed. Run on an idle machine; never two benchmarks at
once. Prints one JSON line per measurement (round, commit, host, load when it
began) and a summary table (min / median over the rounds; failover: median /
max over the kills); appends the lines to bench/results/replication_engines.jsonl.
Every process it starts dies with it (PR_SET_PDEATHSIG) and is killed, and its
temporary directory removed, on exit, failure, Ctrl-C or SIGTERM; only a
complete run appends its lines.
"""
import argparse
import base64
import ctypes
import http.client
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VALUE = (base64.b64encode(os.urandom(768)).decode())  # 1,024 ASCII bytes
VALUE_B64 = base64.b64encode(VALUE.encode()).decode()
CLK_TCK = os.sysconf("SC_CLK_TCK")

from throughput import commit, host  # noqa: E402  the same provenance as throughput.py's lines


def version(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "absent"
    return out.splitlines()[0].strip() if out else "unknown"


def dpkg_version(package):
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package],
                         capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else "absent"


def b64(s):
    return base64.b64encode(s.encode()).decode()


def percentile(sorted_values, q):
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


# ---------------------------------------------------------------- processes

_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    # PR_SET_PDEATHSIG: a member outlives no kill -9 of this script. Children
    # are started from the main thread only (the signal follows the thread).
    _libc.prctl(1, signal.SIGKILL, 0, 0, 0)


class Owned:
    """Every process and directory this run starts; close() kills and removes them all."""

    def __init__(self):
        self.procs = []
        self.dirs = []

    def mkdtemp(self, parent, prefix):
        d = tempfile.mkdtemp(prefix=prefix, dir=parent)
        self.dirs.append(d)
        return d

    def spawn(self, argv, log_path):
        assert threading.current_thread() is threading.main_thread()
        log = open(log_path, "ab")
        p = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                             start_new_session=True, preexec_fn=_die_with_parent)
        log.close()
        self.procs.append(p)
        return p

    @staticmethod
    def kill(p, sig=signal.SIGKILL):
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()

    def close(self):
        for p in reversed(self.procs):
            self.kill(p)
        self.procs.clear()
        for d in reversed(self.dirs):
            shutil.rmtree(d, ignore_errors=True)
        self.dirs.clear()


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError):
            pass
    return total / CLK_TCK


def idle_cpu(pids, seconds=2.0):
    """CPU seconds per second that the members use with no client (heartbeats, timers)."""
    c0 = cpu_seconds(pids)
    time.sleep(seconds)
    return round((cpu_seconds(pids) - c0) / seconds, 3)


def free_ports(n, taken):
    ports = []
    while len(ports) < n:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port not in taken and port not in ports:
            ports.append(port)
    taken.update(ports)
    return ports


def wait_for(what, check, timeout=60, every=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
        except Exception:  # a member still starting refuses or resets
            value = None
        if value:
            return value
        time.sleep(every)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


class Http:
    """One keep-alive HTTP/1.1 connection to 127.0.0.1:port."""

    def __init__(self, port, timeout=10.0):
        self.port = port
        self.timeout = timeout
        self.conn = None

    def request(self, method, path, body=b"", content_type="application/json"):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            self.conn.request(method, path, body=body, headers={"Content-Type": content_type})
            r = self.conn.getresponse()
            return r.status, r.read()
        except Exception:
            self.close()
            raise

    def post_json(self, path, obj):
        status, data = self.request("POST", path, json.dumps(obj).encode())
        if status != 200:
            raise RuntimeError(f"POST {path} on :{self.port}: HTTP {status} {data[:200]!r}")
        return json.loads(data)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


# ---------------------------------------------------------------- load

def drive(clients, seconds, warmup, make_op, server_pids=()):
    """Runs `clients` threads, each calling its op back to back; op(i) returns
    the number of writes it got acknowledged. Counts the ops that complete in
    [warmup, warmup + seconds] and their latencies."""
    ops = [make_op(c) for c in range(clients)]
    lat = [[] for _ in range(clients)]
    acked = [0] * clients
    errors = [0] * clients
    first_error = []
    t_begin = time.perf_counter() + warmup
    t_end = t_begin + seconds

    def run(c):
        op, i = ops[c], 0
        while True:
            t0 = time.perf_counter()
            if t0 >= t_end:
                return
            try:
                n = op(i)
            except Exception as e:  # counted, and the first one kept
                n = 0
                if not first_error:
                    first_error.append(f"{type(e).__name__}: {e}"[:200])
            t1 = time.perf_counter()
            i += 1
            if t_begin <= t1 < t_end:
                if n:
                    acked[c] += n
                    lat[c].append(t1 - t0)
                else:
                    errors[c] += 1

    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    # CPU over the counted window only: this process (client, and SQLite
    # itself for the baseline) and the members.
    time.sleep(max(0.0, t_begin - time.perf_counter()))
    cpu0, srv0 = time.process_time(), cpu_seconds(server_pids)
    time.sleep(max(0.0, t_end - time.perf_counter()))
    cpu, srv = time.process_time() - cpu0, cpu_seconds(server_pids) - srv0
    for t in threads:
        t.join()
    every = sorted(x for per in lat for x in per)
    total = sum(acked)
    out = dict(clients=clients, seconds=seconds, acked=total, commits=len(every),
               errors=sum(errors), per_second=round(total / seconds, 1),
               p50_ms=round(percentile(every, 0.50) * 1e3, 3) if every else None,
               p99_ms=round(percentile(every, 0.99) * 1e3, 3) if every else None,
               client_cpu_s=round(cpu, 2), server_cpu_s=round(srv, 2))
    if first_error:
        out["first_error"] = first_error[0]
    return out


# ---------------------------------------------------------------- SQLite

def fsync_probe(base, seconds):
    """What one durable commit costs on this disk at the least: a 4 KiB append + fdatasync."""
    path = os.path.join(base, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    block, lat = os.urandom(4096), []
    try:
        t_end = time.perf_counter() + min(seconds, 2)
        while time.perf_counter() < t_end:
            t0 = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            lat.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        os.unlink(path)
    lat.sort()
    return dict(clients=1, acked=len(lat), per_second=round(len(lat) / min(seconds, 2), 1),
                p50_ms=round(percentile(lat, 0.5) * 1e3, 3),
                p99_ms=round(percentile(lat, 0.99) * 1e3, 3), errors=0)


def sqlite_writes(base, clients, batch, seconds, warmup):
    path = os.path.join(base, f"sqlite-{clients}-{batch}.db")
    setup = sqlite3.connect(path, isolation_level=None)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY, spec TEXT NOT NULL)")
    setup.close()
    turn = threading.Lock()  # hpcq's one writer thread: commits take turns
    conns = []

    def make(_):
        con = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
        con.execute("PRAGMA synchronous=FULL")
        conns.append(con)
        rows = [(VALUE,)] * batch

        def op(_i):
            with turn:
                con.execute("BEGIN IMMEDIATE")
                con.executemany("INSERT INTO jobs (spec) VALUES (?)", rows)
                con.execute("COMMIT")
            return batch
        return op

    try:
        return dict(drive(clients, seconds, warmup, make), batch=batch)
    finally:
        for con in conns:
            con.close()
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(path + suffix)
            except FileNotFoundError:
                pass


# ---------------------------------------------------------------- the clusters

class Members:
    """What both engines' three-member clusters share: each member's process
    in self.members[i]["proc"], started and killed through `owned`."""

    def alive(self):
        return [i for i, m in enumerate(self.members) if m["proc"] and m["proc"].poll() is None]

    def pids(self):
        return [self.members[i]["proc"].pid for i in self.alive()]

    def kill(self, i):
        self.owned.kill(self.members[i]["proc"])

    def close(self):
        # The data is thrown away: no graceful stop needed.
        for m in self.members:
            if m["proc"]:
                self.owned.kill(m["proc"])


# ---------------------------------------------------------------- etcd

class EtcdCluster(Members):
    """Three etcd members on 127.0.0.1, each with its own data dir under base."""

    def __init__(self, owned, base, taken, n=3):
        self.owned, self.base = owned, base
        ports = free_ports(2 * n, taken)
        self.members = [dict(name=f"m{i}", client=ports[2 * i], peer=ports[2 * i + 1],
                             dir=os.path.join(base, f"m{i}"), proc=None) for i in range(n)]
        self.initial = ",".join(f"{m['name']}=http://127.0.0.1:{m['peer']}" for m in self.members)
        self.token = os.path.basename(base)

    def start(self, i):
        m = self.members[i]
        argv = ["etcd", "--name", m["name"], "--data-dir", m["dir"],
                "--listen-client-urls", f"http://127.0.0.1:{m['client']}",
                "--advertise-client-urls", f"http://127.0.0.1:{m['client']}",
                "--listen-peer-urls", f"http://127.0.0.1:{m['peer']}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{m['peer']}",
                "--initial-cluster", self.initial, "--initial-cluster-state", "new",
                "--initial-cluster-token", self.token, "--logger", "zap", "--log-level", "warn"]
        m["proc"] = self.owned.spawn(argv, os.path.join(self.base, f"{m['name']}.log"))

    def start_all(self):
        for i in range(len(self.members)):
            self.start(i)
        for i in range(len(self.members)):
            self.wait_healthy(i)
        return self.leader()

    def port(self, i):
        return self.members[i]["client"]

    def wait_healthy(self, i, timeout=60):
        def healthy():
            status, data = Http(self.port(i), timeout=2).request("GET", "/health")
            return status == 200 and json.loads(data).get("health") == "true"
        wait_for(f"etcd member {i} healthy", healthy, timeout)

    def status(self, i):
        return Http(self.port(i), timeout=2).post_json("/v3/maintenance/status", {})

    def leader_now(self):
        """The member all live members name as leader, or None."""
        status = {i: self.status(i) for i in self.alive()}
        ids = {st["header"]["member_id"]: i for i, st in status.items()}
        leaders = {st.get("leader") for st in status.values()}
        if len(leaders) == 1 and leaders <= ids.keys():
            return ids[leaders.pop()]
        return None

    def leader(self, timeout=30):
        return wait_for("an etcd leader", lambda: (lambda i: None if i is None else i + 1)(
            self.leader_now()), timeout) - 1

    def restart(self, i):
        self.start(i)  # the data dir is there: the initial-cluster flags are ignored
        self.wait_healthy(i)

    def settle(self):
        """Waits until the members agree on the raft index (the restarted one has caught up)."""
        def agree():
            status = [self.status(i) for i in self.alive()]
            idx = [st.get("raft_index", st.get("raftIndex")) for st in status]
            return len(set(idx)) == 1 and len(idx) == len(self.members)
        wait_for("etcd members to agree on the raft index", agree, 60, 0.2)


def etcd_put_op(port, prefix):
    def make(c):
        h = Http(port)

        def op(i):
            h.post_json("/v3/kv/put", {"key": b64(f"{prefix}/{c}/{i}"), "value": VALUE_B64})
            return 1
        return op
    return make


def etcd_campaign(port, name, ttl=120):
    """Wins the election `name` under a fresh lease: what hpcqd would do on start."""
    h = Http(port)
    lease = h.post_json("/v3/lease/grant", {"TTL": ttl})["ID"]
    won = h.post_json("/v3/election/campaign", {"name": b64(name), "lease": lease,
                                                "value": b64("hpcqd-bench")})["leader"]
    return lease, won


def etcd_txn_op(port, prefix, lease, won, batch=1):
    # Every write: "the election key still exists as I created it, under my
    # lease" -> put. A deposed or expired leader's write fails as a whole.
    compare = [{"target": "CREATE", "key": won["key"], "create_revision": won["rev"],
                "result": "EQUAL"},
               {"target": "LEASE", "key": won["key"], "lease": lease, "result": "EQUAL"}]

    def make(c):
        h = Http(port)

        def op(i):
            r = h.post_json("/v3/kv/txn", {"compare": compare, "success": [
                {"request_put": {"key": b64(f"{prefix}/{c}/{i}/{j}"), "value": VALUE_B64}}
                for j in range(batch)]})
            if not r.get("succeeded"):
                raise RuntimeError("txn compare failed: leadership lost")
            return batch
        return op
    return make


# ---------------------------------------------------------------- dqlite

class DqliteCluster(Members):
    """Three dqlite-demo nodes (go-dqlite's app: node 0 bootstraps, 1 and 2 join)."""

    def __init__(self, owned, base, taken, n=3):
        self.owned, self.base = owned, base
        ports = free_ports(2 * n, taken)
        self.members = [dict(api=ports[2 * i], db=f"127.0.0.1:{ports[2 * i + 1]}", proc=None)
                        for i in range(n)]

    def start(self, i):
        m = self.members[i]
        argv = ["dqlite-demo", "--api", f"127.0.0.1:{m['api']}", "--db", m["db"],
                "--dir", self.base]
        if i > 0:
            argv += ["--join", self.members[0]["db"]]
        m["proc"] = self.owned.spawn(argv, os.path.join(self.base, f"n{i}.log"))
        # The API listens once the node is Ready (joined, its role assumed).
        wait_for(f"dqlite-demo {i} API", lambda: Http(m["api"], timeout=5).request(
            "GET", "/probe")[0] == 200, 90)

    def start_all(self):
        for i in range(len(self.members)):
            self.start(i)
        self.wait_voters()
        return self.leader()

    def port(self, i):
        return self.members[i]["api"]

    def shell(self, command):
        servers = ",".join(self.members[i]["db"] for i in self.alive())
        return subprocess.run(["dqlite", "-s", servers, "demo", command], capture_output=True,
                              text=True, timeout=10).stdout

    def wait_voters(self, timeout=90):
        n = len(self.members)
        wait_for(f"{n} dqlite voters", lambda: self.shell(".cluster").lower().count("|voter") == n,
                 timeout, 0.5)

    def leader_now(self):
        """The live node that a live node names as leader, or None."""
        out = self.shell(".leader").strip()
        for i in self.alive():
            if out == self.members[i]["db"]:
                return i
        return None

    def leader(self, timeout=30):
        return wait_for("a dqlite leader", lambda: (lambda i: None if i is None else i + 1)(
            self.leader_now()), timeout, 0.2) - 1

    def restart(self, i):
        self.start(i)  # its dir holds info.yaml: it comes back as the same node

    def settle(self):
        self.wait_voters()


def dqlite_put_op(port, prefix, busy):
    # dqlite 1.11 takes one write transaction at a time and answers a second
    # connection's with SQLITE_BUSY ("database is locked"); go-dqlite 1.11 does
    # not retry it, so the client does, after 1 ms, as SQLite's busy handler
    # would. busy[0] counts those retries; the latency includes them.
    def make(c):
        h = Http(port)

        def op(i):
            while True:
                status, body = h.request("PUT", f"/{prefix}-{c}-{i}", VALUE.encode(),
                                         "text/plain")
                if status == 200 and body.strip() == b"done":
                    return 1
                if status == 200 and b"database is locked" in body:
                    busy[0] += 1
                    time.sleep(0.001)
                    continue
                raise RuntimeError(f"dqlite-demo PUT: HTTP {status} {body[:200]!r}")
        return op
    return make


def dqlite_native(owned, parent, taken, workers, seconds):
    """dqlite-benchmark kvwrite: Go workers inside the bootstrap (leader) node's process.

    Its driver starts the workload once the other two nodes are reachable, but
    they join as spares and become voters a second or two later; until then
    the leader commits alone. So the run is 5 s longer than asked, this polls
    the roles, and only the writes that began once all 3 were voters count."""
    base = owned.mkdtemp(parent, "dqlite-bench-")
    dbs = [f"127.0.0.1:{p}" for p in free_ports(3, taken)]
    common = ["dqlite-benchmark", "--dir", base, "--value-size", "1024", "--key-size", "32"]
    driver = owned.spawn(common + ["--db", dbs[0], "--driver", "--cluster", ",".join(dbs),
                                   "--workers", str(workers), "--duration", str(seconds + 5),
                                   "--workload", "kvwrite"], os.path.join(base, "n0.log"))
    followers = []
    for i in (1, 2):
        time.sleep(0.5)
        followers.append(owned.spawn(common + ["--db", dbs[i], "--join", dbs[0]],
                                     os.path.join(base, f"n{i}.log")))
    t_voters = None
    while t_voters is None and driver.poll() is None:
        try:
            out = subprocess.run(["dqlite", "-s", ",".join(dbs), "benchmark", ".cluster"],
                                 capture_output=True, text=True, timeout=10).stdout
            if out.lower().count("|voter") == 3:
                t_voters = time.time_ns()
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.1)
    try:
        driver.wait(timeout=seconds + 120)
    except subprocess.TimeoutExpired:
        raise RuntimeError("dqlite-benchmark did not finish")
    for p in followers:
        owned.kill(p)
    if driver.returncode != 0:
        raise RuntimeError(f"dqlite-benchmark driver exited {driver.returncode}")
    if t_voters is None:
        raise RuntimeError("dqlite-benchmark: the 3 nodes were never all voters")
    results = os.path.join(base, dbs[0], "results")
    ok, n_err, t_last = [], 0, t_voters
    for name in os.listdir(results):
        if "-exec-" not in name:
            continue
        with open(os.path.join(results, name)) as f:
            lines = f.read().splitlines()
        at = lines.index("measurements [timestamp in ns] [ms]")
        to = lines.index("errors")
        for x in lines[at + 1:to]:
            if x.strip():
                start, ms = int(x.split()[0]), float(x.split()[1])
                if start >= t_voters:
                    ok.append(ms)
                    t_last = max(t_last, start + int(ms * 1e6))
        n_err += sum(1 for x in lines[to + 1:] if x.strip() and int(x.split()[0]) >= t_voters)
    ok.sort()
    window = (t_last - t_voters) / 1e9
    shutil.rmtree(base, ignore_errors=True)
    return dict(clients=workers, seconds=round(window, 2), acked=len(ok), errors=n_err,
                per_second=round(len(ok) / window, 1) if window > 0 else None,
                p50_ms=round(percentile(ok, 0.5), 3) if ok else None,
                p99_ms=round(percentile(ok, 0.99), 3) if ok else None)


# ---------------------------------------------------------------- failover

class Writer(threading.Thread):
    """One client writing back to back through the cluster: on an error it
    moves to the next member. Keeps (start, end, key) of every acknowledged put."""

    def __init__(self, ports, first, put, prefix, deadline):
        super().__init__(daemon=True)
        self.prefix = prefix  # a fresh one per kill: an earlier kill's keys prove nothing
        self.conns = [Http(p, timeout=deadline) for p in ports]
        self.at = first
        self.put = put  # put(http, key) -> raises unless acknowledged
        self.acks = []
        self.errors = 0
        self.stop = threading.Event()

    def run(self):
        i = 0
        while not self.stop.is_set():
            key = f"{self.prefix}-{i}"
            i += 1
            t0 = time.perf_counter()
            try:
                self.put(self.conns[self.at], key)
                self.acks.append((t0, time.perf_counter(), key))
            except Exception:
                self.errors += 1
                self.conns[self.at].close()
                self.at = (self.at + 1) % len(self.conns)
                time.sleep(0.02)  # a refused connect would otherwise spin

    def first_ack_after(self, t):
        """End of the first acknowledged put that began at or after t."""
        first = None
        for start, end, _ in reversed(self.acks):
            if start < t:
                break
            first = end
        return first


def failover(engine, cluster, kills, put, exists, deadline):
    """kill -9 of the leader, `kills` times; the client gives up on a write
    after `deadline` seconds and sends the next one to the next member."""
    out = []
    ports = [cluster.port(i) for i in range(len(cluster.members))]
    for k in range(1, kills + 1):
        leader = cluster.leader()
        w = Writer(ports, leader, put, f"d{deadline:g}-kill{k}", deadline)
        w.start()
        time.sleep(1.0)
        acked_before = len(w.acks)
        t_kill = time.perf_counter()
        cluster.kill(leader)
        first = t_leader = None
        while time.perf_counter() < t_kill + 60 and (first is None or t_leader is None):
            first = first or w.first_ack_after(t_kill)
            if t_leader is None:
                try:
                    if cluster.leader_now() not in (None, leader):
                        t_leader = time.perf_counter()
                except Exception:  # no member answers yet
                    pass
            time.sleep(0.05)
        time.sleep(1.0)
        w.stop.set()
        w.join(30)
        before = [end for _, end, _ in w.acks if end < t_kill]
        reader = Http(cluster.port(cluster.alive()[0]))
        lost = [key for _, _, key in w.acks if not exists(reader, key)]
        reader.close()
        value = dict(engine=engine, deadline_s=deadline, kill=k, killed=leader,
                     recovery_s=round(first - t_kill, 3) if first else None,
                     new_leader_s=round(t_leader - t_kill, 3) if t_leader else None,
                     ack_gap_s=round(first - before[-1], 3) if first and before else None,
                     acked=len(w.acks), acked_before_kill=acked_before,
                     errors=w.errors, lost=len(lost))
        cluster.restart(leader)
        cluster.settle()
        out.append(value)
    return out


def etcd_failover_put(prefix):
    def put(h, key):
        h.post_json("/v3/kv/put", {"key": b64(f"{prefix}/{key}"), "value": VALUE_B64})

    def exists(h, key):
        r = h.post_json("/v3/kv/range", {"key": b64(f"{prefix}/{key}"),
                                                  "serializable": False})
        return r.get("count") == "1" and r["kvs"][0]["value"] == VALUE_B64
    return put, exists


def dqlite_failover_put(prefix):
    def put(h, key):
        status, body = h.request("PUT", f"/{prefix}-{key}", VALUE.encode(), "text/plain")
        if status != 200 or body.strip() != b"done":
            raise RuntimeError(body[:200])

    def exists(h, key):
        status, body = h.request("GET", f"/{prefix}-{key}")
        return status == 200 and body.strip() == VALUE.encode()
    return put, exists


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3, help="rounds of every throughput measurement")
    ap.add_argument("--seconds", type=int, default=5, help="length of one throughput measurement")
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--kills", type=int, default=5, help="leader kills per engine and deadline")
    ap.add_argument("--deadlines", default="10,1", type=lambda t: [float(x) for x in t.split(",")],
                    help="the failover client's per-write deadlines, seconds (comma-separated)")
    ap.add_argument("--tmp", default="/var/tmp", help="where the data dirs go (a real disk)")
    ap.add_argument("--skip-etcd", action="store_true")
    ap.add_argument("--skip-dqlite", action="store_true")
    ap.add_argument("--skip-failover", action="store_true")
    ap.add_argument("--label", default="",
                    help="kept in each result line: what was measured (e.g. a commit)")
    a = ap.parse_args()
    if a.reps < 1 or a.seconds < 1:
        ap.error("--reps and --seconds must be at least 1")
    need = ([] if a.skip_etcd else ["etcd"]) + ([] if a.skip_dqlite else
                                               ["dqlite", "dqlite-demo", "dqlite-benchmark"])
    missing = [t for t in need if not shutil.which(t)]
    if missing:
        raise SystemExit(f"replication_engines.py: {', '.join(missing)} not on PATH "
                         "(apt-get install etcd-server go-dqlite, or --skip-etcd/--skip-dqlite)")
    fs = subprocess.run(["stat", "-f", "-c", "%T", a.tmp], capture_output=True,
                        text=True).stdout.strip()
    if fs in ("tmpfs", "ramfs"):
        raise SystemExit(f"replication_engines.py: --tmp {a.tmp} is {fs}: "
                         "fsync costs nothing there")

    # SIGTERM and SIGHUP unwind like Ctrl-C, through the finally below; SIGINT
    # too when started in the background (where a shell leaves it ignored).
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, lambda signum, _frame: sys.exit(128 + signum))
    signal.signal(signal.SIGINT, signal.default_int_handler)

    tree, machine = commit(), host()
    versions = dict(sqlite=sqlite3.sqlite_version, etcd=dpkg_version("etcd-server"),
                    dqlite=dpkg_version("libdqlite0"), go_dqlite=dpkg_version("go-dqlite"),
                    raft=dpkg_version("libraft2"))
    results = []
    owned = Owned()
    taken = set()

    def record(name, round_, measure, **extra):
        began = dict(when=time.strftime("%Y-%m-%dT%H:%M:%S"), load=round(os.getloadavg()[0], 2))
        value = dict(measure(), measurement=name, round=round_, **extra, fs=fs,
                     versions=versions, commit=tree, host=machine, **began)
        if a.label:
            value["label"] = a.label
        print(json.dumps(value), flush=True)
        results.append(value)

    try:
        base = owned.mkdtemp(a.tmp, "hpcq-replication-")
        for r in range(1, a.reps + 1):
            record("fsync_4k", r, lambda: fsync_probe(base, a.seconds))
            for batch in (1, 100):
                for clients in (1, 8):
                    record(f"sqlite_batch{batch}_{clients}", r,
                           lambda: sqlite_writes(base, clients, batch, a.seconds, a.warmup))
            if not a.skip_etcd:
                etcd = EtcdCluster(owned, owned.mkdtemp(base, "etcd-"), taken)
                leader = etcd.start_all()
                port = etcd.port(leader)
                idle = dict(server_idle_cpu_per_s=idle_cpu(etcd.pids()))
                for clients in (1, 8):
                    record(f"etcd_put_{clients}", r, lambda: drive(
                        clients, a.seconds, a.warmup, etcd_put_op(port, f"put{clients}"),
                        etcd.pids()), **idle)
                for batch in (1, 100):
                    for clients in (1, 8):
                        lease, won = etcd_campaign(port, f"hpcq-leader-{batch}-{clients}")
                        record(f"etcd_txn_batch{batch}_{clients}", r, lambda: dict(drive(
                            clients, a.seconds, a.warmup,
                            etcd_txn_op(port, f"txn{batch}-{clients}", lease, won, batch),
                            etcd.pids()), batch=batch), **idle)
                        Http(port).post_json("/v3/lease/revoke", {"ID": lease})
                etcd.close()
            if not a.skip_dqlite:
                dq = DqliteCluster(owned, owned.mkdtemp(base, "dqlite-"), taken)
                leader = dq.start_all()
                port = dq.port(leader)
                idle = dict(server_idle_cpu_per_s=idle_cpu(dq.pids()))
                for clients in (1, 8):
                    busy = [0]
                    record(f"dqlite_demo_put_{clients}", r, lambda: dict(drive(
                        clients, a.seconds, a.warmup, dqlite_put_op(port, f"put{clients}", busy),
                        dq.pids()), busy_retries=busy[0]), **idle)
                dq.close()
                for clients in (1, 8):
                    record(f"dqlite_native_{clients}", r, lambda: dqlite_native(
                        owned, base, taken, clients, a.seconds))
        engines = [(name, cls, put_of) for name, skip, cls, put_of in (
            ("etcd", a.skip_etcd, EtcdCluster, etcd_failover_put),
            ("dqlite", a.skip_dqlite, DqliteCluster, dqlite_failover_put)) if not skip]
        for deadline in ([] if a.skip_failover else a.deadlines):
            for name, cls, put_of in engines:
                cluster = cls(owned, owned.mkdtemp(base, f"{name}-fo-"), taken)
                cluster.start_all()
                put, exists = put_of("fo")
                for v in failover(name, cluster, a.kills, put, exists, deadline):
                    record(f"{name}_failover", 0, lambda: v)
                cluster.close()
    finally:
        owned.close()
    # Only a complete run is kept: an interrupted one leaves no lines behind.
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "replication_engines.jsonl"), "a") as f:
        for v in results:
            f.write(json.dumps(v) + "\n")

    summary(results, a)


def summary(results, a):
    def values(name, field):
        return [v[field] for v in results if v["measurement"] == name and v.get(field) is not None]

    def cell(name, field, digits=0):
        v = values(name, field)
        return f"{min(v):,.{digits}f} / {statistics.median(v):,.{digits}f}" if v else "-"

    rows = [("fsync_4k", "this disk: 4 KiB append + fdatasync")]
    rows += [(f"sqlite_batch1_{c}", f"SQLite WAL+FULL, 1 row/commit, {c} writer(s)")
             for c in (1, 8)]
    rows += [(f"sqlite_batch100_{c}", f"SQLite WAL+FULL, 100 rows/commit, {c} writer(s)")
             for c in (1, 8)]
    rows += [(f"etcd_put_{c}", f"etcd 3.4 x3, put via JSON gateway, {c} client(s)") for c in (1, 8)]
    rows += [(f"etcd_txn_batch1_{c}", f"etcd 3.4 x3, lease-conditional Txn, 1 put, {c} client(s)")
             for c in (1, 8)]
    rows += [(f"etcd_txn_batch100_{c}",
              f"etcd 3.4 x3, lease-conditional Txn, 100 puts, {c} client(s)") for c in (1, 8)]
    rows += [(f"dqlite_demo_put_{c}", f"dqlite 1.11 x3, dqlite-demo HTTP PUT, {c} client(s)")
             for c in (1, 8)]
    rows += [(f"dqlite_native_{c}", f"dqlite 1.11 x3, dqlite-benchmark kvwrite, {c} worker(s)")
             for c in (1, 8)]
    print()
    print(f"| measurement ({a.reps} rounds of {a.seconds} s: min / median) | acked writes/s "
          "| p50 ms | p99 ms | CPU ms per write | errors |")
    print("|---|---|---|---|---|---|")
    for name, text in rows:
        if not values(name, "per_second"):
            continue
        cpu = [1e3 * (v.get("client_cpu_s", 0) + v.get("server_cpu_s", 0)) / v["acked"]
               for v in results if v["measurement"] == name and v.get("acked")
               and "client_cpu_s" in v]
        busy = sum(values(name, "busy_retries"))
        print(f"| {text} | {cell(name, 'per_second')} | {cell(name, 'p50_ms', 2)} | "
              f"{cell(name, 'p99_ms', 2)} | "
              + (f"{statistics.median(cpu):.2f}" if cpu else "-")
              + f" | {sum(values(name, 'errors'))}"
              + (f" (+{busy} busy retries)" if busy else "") + " |")
    fo = [v for v in results if v["measurement"].endswith("_failover")]
    if fo:
        print()
        print("| failover: kill -9 of the leader (median / max over the kills) | client deadline "
              "| new leader named | next acknowledged put | acked puts lost |")
        print("|---|---|---|---|---|")
    for engine in ("etcd", "dqlite"):
        for deadline in sorted({v["deadline_s"] for v in fo if v["engine"] == engine}):
            runs = [v for v in fo if v["engine"] == engine and v["deadline_s"] == deadline]

            def mm(field):
                x = [v[field] for v in runs if v[field] is not None]
                missed = len(runs) - len(x)
                return ((f"{statistics.median(x):.2f} s / {max(x):.2f} s" if x else "never")
                        + (f" ({missed} of {len(runs)} never)" if missed and x else ""))
            print(f"| {engine}, {len(runs)} kills | {deadline:g} s | {mm('new_leader_s')} | "
                  f"{mm('recovery_s')} | {sum(v['lost'] for v in runs)} of "
                  f"{sum(v['acked'] for v in runs)} |")


if __name__ == "__main__":
    main()
