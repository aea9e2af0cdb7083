#!/usr/bin/env python3
"""Periodic checkpoints and restart after a node is lost, with real CRIU, real
agents and a real hpcqd (issue 6):

- a job with --checkpoint-interval is checkpointed while it runs; each good
  periodic checkpoint replaces (prunes) the one before; status --json lists
  its placements;
- its node dies (agent and job processes killed): the job restarts on the
  other node from its last checkpoint, its count going on from there, not
  from zero;
- the target node of a migration dies during the restore: the job is
  requeued from the same checkpoint and restored elsewhere, never lost."""
import atexit
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:2 pu:1")

def node_names():
    return sorted(n["name"] for n in json.loads(t.hpcq("nodes", "--json").stdout))


def node_state(name):
    return {n["name"]: n for n in json.loads(t.hpcq("nodes", "--json").stdout)}[name]["state"]


def agent_cmdline(rank):
    out = subprocess.run(["pgrep", "-o", "-f",
                          f"hpcq-agent --config {t.cluster_dir()}/hpcq.toml --rank {rank} "],
                         capture_output=True, text=True).stdout.split()
    t.check(len(out) == 1, f"agent {rank} pids: {out}")
    pid = int(out[0])
    return pid, open(f"/proc/{pid}/cmdline").read().split("\0")[:-1]


def cgroup_hierarchies():
    """The mount point of every cgroup hierarchy (/proc/self/mounts): each
    v1 controller's, or the one v2 file system."""
    points = []
    for line in open("/proc/self/mounts"):
        fields = line.split()
        if fields[2] in ("cgroup", "cgroup2"):
            points.append(fields[1])
    return points


def instance_cgroups(rank):
    """The cgroup directories of the agent of `rank`'s jobs, in every
    hierarchy (v1 or v2)."""
    tag = os.path.basename(t.cluster_dir()).replace("-", "_")
    dirs = []
    for mount in cgroup_hierarchies():
        base = os.path.join(mount, "hpcq")
        if not os.path.isdir(base):
            continue
        for name in os.listdir(base):
            if tag in name and name.endswith(f"rank_{rank}"):
                for root, subdirs, _ in os.walk(os.path.join(base, name)):
                    dirs.append(root)
    return dirs


def kill_node(rank):
    """The node dies: its agent and every process of its jobs (CRIU's too)."""
    pid, cmdline = agent_cmdline(rank)
    os.kill(pid, signal.SIGKILL)
    for _ in range(100):
        left = False
        for d in instance_cgroups(rank):
            # A v1 frozen task takes no SIGKILL until thawed (v2's does).
            for name, thawed in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
                if os.path.exists(os.path.join(d, name)):
                    try:
                        with open(os.path.join(d, name), "w") as f:
                            f.write(thawed)
                    except OSError:
                        pass
            try:
                pids = open(os.path.join(d, "cgroup.procs")).read().split()
            except OSError:
                continue
            for p in pids:
                left = True
                try:
                    os.kill(int(p), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if not left:
            break
        time.sleep(0.05)
    return cmdline


RESTARTED = []  # hpcq start stops only the agents it started: these are ours


@atexit.register
def stop_restarted():
    for p in RESTARTED:
        p.terminate()
    for p in RESTARTED:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def restart_agent(cmdline, name):
    log = open(os.path.join(t.cluster_dir(), "logs", f"agent-restarted-{name}.log"), "a")
    RESTARTED.append(subprocess.Popen(cmdline, stdout=log, stderr=log))
    t.wait_until(f"{name} up again", lambda: node_state(name) == "up")


def counter_on(d, node, *extra):
    """A counting job placed on `node` (the other node drained meanwhile)."""
    other = [n for n in node_names() if n != node][0]
    t.hpcq("drain", other, "--reason", "placing a test job")
    try:
        job = t.submit("-N", "1", "-n", "1", "-o", "count-%j.out", *extra, "--",
                       "sh", "-c", t.COUNTER, cwd=d)
        s = t.wait_state(job, "RUNNING")
        t.check(s["nodes"] == [node], f"job {job} on {s['nodes']}, wanted {node}")
    finally:
        t.hpcq("resume", other)
    out = os.path.join(d, f"count-{job}.out")
    t.wait_until(f"{out} counting", lambda: len(t.counts(out)) >= 5)
    return job, out


def check_resumed_not_restarted(out, before_kill):
    """The count went on from a checkpoint: at most one step back, never to 1."""
    c = t.counts(out)
    drops = [i for i in range(1, len(c)) if c[i] != c[i - 1] + 1]
    t.check(len(drops) <= 1, f"{out}: more than one break: {drops} in {c}")
    if drops:
        i = drops[0]
        t.check(1 < c[i] <= c[i - 1], f"{out}: restarted from {c[i]} after {c[i - 1]}")
    t.check(c[-1] > before_kill, f"{out}: no progress after the restart ({c[-1]})")


@t.needs_checkpoint
def test_periodic_checkpoints_are_pruned_and_placements_shown():
    d = t.workdir()
    node = node_names()[0]
    job, out = counter_on(d, node, "--checkpoint-interval", "1s")
    s = t.wait_until("three periodic checkpoints", lambda: (
        lambda s: s if len([c for c in s["checkpoints"] if c["outcome"] == "ok"]) >= 3 else None)(
            t.status(job)))
    good = [c for c in s["checkpoints"] if c["outcome"] == "ok"]
    t.check(all(c["periodic"] for c in good), f"checkpoints {good}")
    t.check(all(c["pruned"] for c in good[:-2]), f"older ones not pruned: {good}")
    for c in good[:-2]:
        t.check(not os.path.exists(c["image"]), f"pruned image {c['image']} still there")
    t.check(os.path.isdir(os.path.join(good[-1]["image"], "part-0")), f"newest {good[-1]}")
    t.check(s["state"] == "RUNNING" and s["requeue_count"] == 0, f"status {s}")
    t.hpcq("cancel", str(job))
    s = t.wait_state(job, "CANCELLED")
    p = s["placements"]
    t.check(len(p) == 1 and p[0]["nodes"] == [node] and p[0]["end"] and
            p[0]["outcome"].startswith("CANCELLED"), f"placements {p}")


@t.needs_checkpoint
def test_node_loss_restarts_from_the_last_checkpoint():
    d = t.workdir()
    first, second = node_names()
    job, out = counter_on(d, first, "--checkpoint-interval", "1s")
    t.wait_until("a periodic checkpoint", lambda: any(
        c["outcome"] == "ok" for c in t.status(job)["checkpoints"]))
    time.sleep(0.5)
    cmdline = kill_node(1)
    try:
        before_kill = t.counts(out)[-1]
        t.wait_until(f"{first} down", lambda: node_state(first) == "down", timeout=20)
        s = t.wait_state(job, "RUNNING", timeout=30)
        t.check(s["nodes"] == [second] and s["requeue_count"] == 1, f"status {s}")
        t.wait_until("counting again", lambda: t.counts(out)[-1] > before_kill + 5)
        s = t.status(job)
        p = s["placements"]
        t.check(len(p) == 2 and p[0]["nodes"] == [first] and "restarting from checkpoint"
                in p[0]["outcome"] and p[1]["restored_from"], f"placements {p}")
        t.hpcq("cancel", str(job))
        t.wait_state(job, "CANCELLED")
        check_resumed_not_restarted(out, before_kill)
    finally:
        restart_agent(cmdline, first)


@t.needs_checkpoint
def test_target_dies_during_restore():
    d = t.workdir()
    first, second = node_names()
    job, out = counter_on(d, first)
    t.hpcq("drain", first, "--reason", "migration test")
    try:
        record = json.loads(t.hpcq("checkpoint", str(job), "--then", "requeue", "--json").stdout)
        cmdline = kill_node(2)  # the only node it can be restored on, at once
        try:
            at = t.counts(out)[-1]
            t.wait_until(f"{second} down", lambda: node_state(second) == "down", timeout=20)
            s = t.wait_state(job, "PENDING")
            t.check(s["restore_from"] == record["image"], f"status {s}")
            t.hpcq("resume", first)
            s = t.wait_state(job, "RUNNING", timeout=30)
            t.check(s["nodes"] == [first], f"status {s}")
            t.wait_until("counting again", lambda: t.counts(out)[-1] > at + 5)
            t.hpcq("cancel", str(job))
            t.wait_state(job, "CANCELLED")
            check_resumed_not_restarted(out, at)
        finally:
            restart_agent(cmdline, second)
    finally:
        t.hpcq("resume", first)
        t.run([t.HPCQ, "cancel", str(job)])


def test_bad_interval():
    p = t.hpcq("submit", "--checkpoint-interval", "soon", "--", "true", rc=2)
    t.check("--checkpoint-interval: bad duration 'soon'" in p.stderr, p.stderr)
    p = t.hpcq("submit", "--checkpoint-interval", "unlimited", "--", "true", rc=2)
    t.check("--checkpoint-interval: want a positive time" in p.stderr, p.stderr)


t.main([test_periodic_checkpoints_are_pruned_and_placements_shown,
        test_node_loss_restarts_from_the_last_checkpoint,
        test_target_dies_during_restore, test_bad_interval])
