"""A cluster laid out by hand, for tests that `hpcq start` cannot express:
agents inside network namespaces, an agent that reaches the leader through
a proxy (its own copy of hpcq.toml names the proxy as rank 0's endpoint),
a leader state directory on a small file system.

Cluster(ranks) takes one dict per agent: name, endpoint (tcp://IP:PORT),
optional netns and parent_endpoint (what this agent's config says rank 0 is).
start() writes keys and configs, starts hpcqd and the agents; stop() ends
them and removes the directory (HPCQ_KEEP=1 keeps it, with the logs). The socket is exported as HPCQ_SOCKET for hpcqtest's helpers."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import hpcqtest as t


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, leader_endpoint, ranks, state_dir=None, topology="pack:1 numa:1 core:2 pu:1",
                 overlay="heartbeat_interval_ms = 500\nnode_unresponsive_after_ms = 1500\n"
                         "node_down_after_ms = 6000\n", decision_log=False):
        self.dir = tempfile.mkdtemp(prefix="hpcq-manual-")
        os.makedirs(f"{self.dir}/keys")
        os.makedirs(f"{self.dir}/logs")
        self.leader_endpoint = leader_endpoint
        self.ranks = ranks
        self.state_dir = state_dir or f"{self.dir}/leader"
        self.topology = topology
        self.overlay = overlay
        self.socket = f"{self.dir}/hpcqd.sock"
        # hpcqd's decision log, for hpcqtest.wait_cycle_showing (None: off).
        self.decisions = f"{self.dir}/decisions.jsonl" if decision_log else None
        self.leader = None
        self.agents = {}

    def _config(self, leader_endpoint):
        names = ["leader"] + [r["name"] for r in self.ranks]
        endpoints = [leader_endpoint] + [r["endpoint"] for r in self.ranks]
        text = (f"[overlay]\nfanout = 16\n{self.overlay}\n"
                f"[leader]\nstate_dir = \"{self.state_dir}\"\nsocket = \"{self.socket}\"\n"
                f"secret_key = \"{self.dir}/keys/rank-0.key\"\n\n"
                f"[agent]\nstate_dir = \"{self.dir}/agents\"\nkill_grace_s = 2\n\n")
        if self.decisions:
            text += f"[scheduler]\ndecision_log = \"{self.decisions}\"\n\n"
        for r, (name, endpoint) in enumerate(zip(names, endpoints)):
            text += (f"[[rank]]\nname = \"{name}\"\nendpoint = \"{endpoint}\"\n"
                     f"public_key = \"{self.public[r]}\"\n")
            if r > 0:
                text += f"topology = \"{self.topology}\"\n"
        return text

    def start(self, agents=None):
        """agents: the ranks whose agents start now (default: all)."""
        self.public = []
        for r in range(len(self.ranks) + 1):
            out = t.run([t.HPCQ, "keygen", f"{self.dir}/keys/rank-{r}.key"], check_rc=0).stdout
            self.public.append(out.split()[-1])
        with open(f"{self.dir}/hpcq.toml", "w") as f:
            f.write(self._config(self.leader_endpoint))
        log = open(f"{self.dir}/logs/hpcqd.log", "a")
        self.leader = subprocess.Popen([t.HPCQD, "--config", f"{self.dir}/hpcq.toml"],
                                       stdout=log, stderr=log)
        started = agents if agents is not None else range(1, len(self.ranks) + 1)
        for r in started:
            self.start_agent(r)
        os.environ["HPCQ_SOCKET"] = self.socket
        self.wait_nodes({self.ranks[r - 1]["name"]: "up" for r in started})

    def restart_leader(self):
        """SIGTERM and start again on the same state (waits until it answers)."""
        self.leader.send_signal(signal.SIGTERM)
        self.leader.wait(timeout=30)
        log = open(f"{self.dir}/logs/hpcqd.log", "a")
        self.leader = subprocess.Popen([t.HPCQD, "--config", f"{self.dir}/hpcq.toml"],
                                       stdout=log, stderr=log)
        self.wait_nodes({r["name"]: "up" for r in self.ranks})

    def start_agent(self, r):
        rank = self.ranks[r - 1]
        config = f"{self.dir}/hpcq.toml"
        if rank.get("parent_endpoint"):
            config = f"{self.dir}/hpcq-rank-{r}.toml"
            with open(config, "w") as f:
                f.write(self._config(rank["parent_endpoint"]))
        cmd = [t.binary("hpcq-agent", "agent"), "--config", config, "--rank", str(r),
               "--secret-key", f"{self.dir}/keys/rank-{r}.key"]
        if rank.get("netns"):
            # Only the network namespace: `ip netns exec` would also remount
            # /sys, hiding the cgroup file systems from the agent.
            cmd = ["nsenter", f"--net=/run/netns/{rank['netns']}", "--", *cmd]
        log = open(f"{self.dir}/logs/agent-{r}.log", "a")
        self.agents[r] = subprocess.Popen(cmd, stdout=log, stderr=log)

    def nodes(self):
        import json
        return {n["name"]: n for n in json.loads(t.hpcq("nodes", "--json").stdout)}

    def wait_nodes(self, want, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            try:
                now = {k: v["state"] for k, v in self.nodes().items()}
            except t.Failure:
                now = {}
            if now and all(now.get(k) == v for k, v in want.items()):
                return now
            if time.monotonic() > deadline:
                raise t.Failure(f"nodes {now}, expected {want}")
            time.sleep(0.1)

    def stop(self):
        t.stop_processes(list(self.agents.values()) + ([self.leader] if self.leader else []))
        if not os.environ.get("HPCQ_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)
