#!/usr/bin/env python3
"""Leader failover across hosts (issue 25): three hpcqd candidates, each in
a network namespace of its own with an address and a socket of its own, as
on three hosts (rank 0's `endpoints` in hpcq.toml); etcd's three members
and four agents outside them. The active leader is killed (kill -9), and
later the next one's network is cut, while jobs are submitted and running:
each time a standby leads within 10 s, and the agents find it at its own
address (and with them the hpcq command on their nodes); no acknowledged
submission is lost and none runs twice; a running job keeps running and is
adopted. The cut leader, which reaches neither etcd nor the agents, ends by
itself without acting; started again (its network back), a candidate
stands by."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t
from failover_common import active, fail_over_during_submissions, leaders
from manual_cluster import free_port

ETCD, ETCDCTL = "/usr/bin/etcd", "/usr/bin/etcdctl"
NET = "10.246"  # 10.246.0.0/24: etcd's side; 10.246.N.0/24: candidate N's
PREFIX = "q46"  # namespaces and interfaces (at most 15 characters)
CANDIDATES = 3
AGENTS = 4


def sh(*args, check=True):
    return subprocess.run(list(args), capture_output=True, text=True, check=check)


def namespace(n):
    return f"{PREFIX}-{n}"


def far_end(n):
    return f"{PREFIX}n{n}"


def net_up():
    """A veth pair per namespace: the host's end NET.N.1, the far end NET.N.2.
    The host reaches each namespace directly; a namespace reaches the
    host's addresses (etcd's NET.0.1) through its default route."""
    net_down()
    for n in range(CANDIDATES + 1):
        ns, host_if = namespace(n), f"{PREFIX}h{n}"
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", far_end(n))
        sh("ip", "link", "set", far_end(n), "netns", ns)
        sh("ip", "addr", "add", f"{NET}.{n}.1/24", "dev", host_if)
        sh("ip", "link", "set", host_if, "up")
        link(n, up=True)


def link(n, up):
    ns = namespace(n)
    sh("ip", "-n", ns, "link", "set", far_end(n), "up" if up else "down")
    if up:
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "addr", "replace", f"{NET}.{n}.2/24", "dev", far_end(n))
        sh("ip", "-n", ns, "route", "replace", "default", "via", f"{NET}.{n}.1")


def net_down():
    for n in range(CANDIDATES + 1):
        sh("ip", "link", "del", f"{PREFIX}h{n}", check=False)
        sh("ip", "netns", "del", namespace(n), check=False)


class FailoverCluster:
    """etcd's members on NET.0.1, candidate N (leader-N) at NET.N.2 in its own
    namespace with its own socket, as on its own host; the agents on
    loopback. The command is given every candidate's socket (HPCQ_SOCKET
    PATH:PATH:PATH) and takes the first that answers."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="hpcq-t0046-")
        for sub in ("keys", "logs", "checkpoints"):
            os.makedirs(f"{self.dir}/{sub}")
        self.socket = f"{self.dir}/hpcqd.sock"
        self.etcds, self.candidates, self.agents = [], {}, []

    def start(self):
        clients = [f"http://{NET}.0.1:{free_port(f'{NET}.0.1')}" for _ in range(3)]
        peers = [f"http://{NET}.0.1:{free_port(f'{NET}.0.1')}" for _ in range(3)]
        initial = ",".join(f"etcd-{i}={peers[i]}" for i in range(3))
        for i in range(3):
            log = open(f"{self.dir}/logs/etcd-{i}.log", "a")
            self.etcds.append(subprocess.Popen(
                [ETCD, "--name", f"etcd-{i}", "--data-dir", f"{self.dir}/etcd-{i}",
                 "--listen-client-urls", clients[i], "--advertise-client-urls", clients[i],
                 "--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
                 "--initial-cluster", initial, "--max-txn-ops", "16384",
                 "--max-request-bytes", "67108864"], stdout=log, stderr=log))
        t.wait_until("etcd healthy", lambda: subprocess.run(
            [ETCDCTL, "--endpoints", ",".join(clients), "endpoint", "health"],
            capture_output=True, env=dict(os.environ, ETCDCTL_API="3")).returncode == 0)

        public = [t.run([t.HPCQ, "keygen", f"{self.dir}/keys/rank-{r}.key"], check_rc=0)
                  .stdout.split()[-1] for r in range(AGENTS + 1)]
        self.endpoints = [f"tcp://{NET}.{n}.2:{7000 + n}" for n in range(1, CANDIDATES + 1)]
        etcd_endpoints = ", ".join(f'"{c[len("http://"):]}"' for c in clients)
        text = ("[overlay]\nfanout = 2\nheartbeat_interval_ms = 500\n"
                "node_unresponsive_after_ms = 4500\nnode_down_after_ms = 15000\n\n"
                f"[leader]\nstate_dir = \"{self.dir}/leader\"\nsocket = \"{self.socket}\"\n"
                f"secret_key = \"{self.dir}/keys/rank-0.key\"\nstore = \"etcd\"\n"
                f"etcd_endpoints = [{etcd_endpoints}]\netcd_prefix = \"/t0046/\"\n"
                # Plain etcd on the test's own addresses: the TLS store is
                # t0045's (hpcq start); this test is about the network.
                "etcd_insecure = true\n"
                f"checkpoint_dir = \"{self.dir}/checkpoints\"\n\n"
                f"[agent]\nstate_dir = \"{self.dir}/agents\"\nkill_grace_s = 2\n\n"
                "[[rank]]\nname = \"leader\"\nendpoints = ["
                + ", ".join(f'"{e}"' for e in self.endpoints) + f"]\npublic_key = \"{public[0]}\"\n")
        for r in range(1, AGENTS + 1):
            text += (f"\n[[rank]]\nname = \"node{r}\"\nendpoint = \"tcp://127.0.0.1:{free_port()}\"\n"
                     f"public_key = \"{public[r]}\"\ntopology = \"pack:1 numa:1 core:2 pu:1\"\n")
        self.config = f"{self.dir}/hpcq.toml"
        with open(self.config, "w") as f:
            f.write(text)
        for n in range(1, CANDIDATES + 1):
            self.start_candidate(n)
        for r in range(1, AGENTS + 1):
            log = open(f"{self.dir}/logs/agent-{r}.log", "a")
            self.agents.append(subprocess.Popen(
                [t.AGENT, "--config", self.config, "--rank", str(r), "--secret-key",
                 f"{self.dir}/keys/rank-{r}.key", "--socket", self.node_socket(r)],
                stdout=log, stderr=log))
        os.environ["HPCQ_SOCKET"] = ":".join(self.candidate_socket(n)
                                             for n in range(1, CANDIDATES + 1))
        job = None
        for _ in range(300):  # a leader answers: its first submission
            p = subprocess.run([t.HPCQ, "submit", "-N", str(AGENTS), "-o", "/dev/null", "--", "true"],
                               capture_output=True, text=True)
            if p.returncode == 0:
                job = int(p.stdout)
                break
            time.sleep(0.1)
        t.check(job is not None, "no candidate took a submission")
        s = t.wait_state(job, ["COMPLETED", "FAILED"], timeout=60)
        t.check(s["state"] == "COMPLETED", f"a job on every node: {s['state']} {s['reason']}")

    def candidate_socket(self, n):
        return f"{self.dir}/leader-{n}.sock"

    def node_socket(self, rank):
        """Where the agent of `rank` serves its node's hpcq command."""
        return f"{self.dir}/agents/rank-{rank}.sock"

    def start_candidate(self, n):
        """leader-N in namespace N: only its network namespace (`ip netns
        exec` would also remount /sys)."""
        log = open(f"{self.dir}/logs/hpcqd-{n}.log", "a")
        self.candidates[n] = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{namespace(n)}", "--", t.HPCQD, "--config", self.config,
             "--name", f"leader-{n}", "--state-dir", f"{self.dir}/leader-{n}",
             "--endpoint", self.endpoints[n - 1], "--socket", self.candidate_socket(n)],
            stdout=log, stderr=log)

    def stop(self):
        for group in (self.agents, list(self.candidates.values()), self.etcds):
            t.stop_processes(group)
        if not os.environ.get("HPCQ_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)


def test_kill_the_active_leader_during_submissions():
    def kill(old):
        n = int(old[len("leader-"):])
        cluster.candidates[n].kill()
        cluster.candidates[n].wait()
    old, _ = fail_over_during_submissions("killed", kill, "kill -9 of")
    # Started again, it stands by.
    cluster.start_candidate(int(old[len("leader-"):]))
    t.wait_until(f"{old} standing by",
                 lambda: leaders().get(old, {}).get("state") == "standby", timeout=20)


def test_cut_the_active_leaders_network_during_submissions():
    def cut(old):
        n = int(old[len("leader-"):])
        listed = leaders()
        t.check(listed[old]["state"] == "active" and
                listed[old]["endpoint"] == cluster.endpoints[n - 1], f"hpcq leaders: {listed}")
        link(n, up=False)
    old, new = fail_over_during_submissions("cut", cut, "a cut of the network of")
    n = int(old[len("leader-"):])
    # The agents reached the new leader at its own address: every node is up
    # there, and the command on a node reaches it through its agent.
    nodes = {node["name"]: node["state"] for node in json.loads(t.hpcq("nodes", "--json").stdout)}
    t.check(list(nodes.values()) == ["up"] * AGENTS, f"hpcq nodes: {nodes}")
    p = t.run([t.HPCQ, "leaders", "--json"], env=dict(os.environ, HPCQ_SOCKET=cluster.node_socket(3)))
    t.check(p.returncode == 0, f"hpcq leaders on node3: {p.stderr}")
    states = {c["name"]: c["state"] for c in json.loads(p.stdout)}
    t.check(states.get(new) == "active", f"hpcq leaders on node3: {states}")

    # Cut off from etcd, the old leader ends by itself within about its lease.
    cut_off = cluster.candidates[n]
    try:
        cut_off.wait(timeout=15)
    except subprocess.TimeoutExpired:
        raise t.Failure(f"{old} still runs 15 s after its network was cut")
    with open(f"{cluster.dir}/logs/hpcqd-{n}.log", errors="replace") as f:
        t.check("no longer the leader" in f.read(), f"{old} did not say why it ended")

    # Its network back and started again, it stands by.
    link(n, up=True)
    cluster.start_candidate(n)
    t.wait_until(f"{old} standing by",
                 lambda: leaders().get(old, {}).get("state") == "standby", timeout=20)
    t.check(active()[0] == new, f"{active()[0]} leads, not {new}")


def main():
    global cluster
    for program in ("ip", "nsenter"):
        if shutil.which(program) is None:
            print(f"skip: needs {program} (iproute2, util-linux)")
            sys.exit(77)
    for program in (ETCD, ETCDCTL):
        if not os.access(program, os.X_OK):
            print(f"skip: {program} is not installed (Debian: etcd-server, etcd-client)")
            sys.exit(77)
    net_up()
    cluster = FailoverCluster()
    try:
        cluster.start()
        t.main([test_kill_the_active_leader_during_submissions,
                test_cut_the_active_leaders_network_during_submissions])
    finally:
        cluster.stop()
        net_down()


main()
