#!/usr/bin/env python3
"""Checkpoint and migration of OCI (--image) jobs with real runc, real CRIU,
real agents and a real hpcqd: a container job that counts once per 100 ms
into its output file is migrated to the other node and its count goes on
with no gap and no restart from zero, inside a container again (its root is
the image, it runs as the job's user -- root where the host keeps
CAP_SYS_RESOURCE from root, as here); the same
for a 2-task job; a 2-node job requeued by checkpoint and restored on both
nodes; checkpoint --then requeue, then restored on the other node;
a container that holds a TCP connection cannot be dumped and runs on;
checkpoint and run on."""
import json
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:2 pu:1")

ROOT = t.busybox_rootfs(applets=("sh", "echo", "sleep", "nc"))


def can_dump_other_users():
    """CRIU reads other users' rlimits with CAP_SYS_RESOURCE, which some
    hosts (this project's VMs among them) drop from root's bounding set."""
    with open("/proc/self/status") as f:
        bounding = next(l for l in f if l.startswith("CapBnd:")).split()[1]
    return (int(bounding, 16) >> 24) & 1 == 1


# Each task counts on its own line: "RANK N".
RANK_COUNTER = "i=0; while :; do i=$((i+1)); echo $HPCQ_TASK_RANK $i; sleep 0.1; done"


def container_counter(d, ntasks=1, command=t.COUNTER, user=None, nodes=1):
    job = t.submit("-N", str(nodes), "-n", str(ntasks), "--image", ROOT, "-o", "count-%j.out",
                   "--", "sh", "-c", command, cwd=d, user=user)
    s = t.wait_state(job, "RUNNING", user=user)
    return job, s, os.path.join(d, f"count-{job}.out")


def job_pids(job):
    """Host PIDs of the job's processes on whichever node of this cluster,
    as the kernel places them (/proc/PID/cgroup, v1 or v2): those in
    hpcq/<this cluster's agent>/job-<job> or below (the containers' own)."""
    instance = t.cgroup_instance(os.path.join(t.cluster_dir(), "agents")) + "-"
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cgroup") as f:
                paths = [line.rstrip("\n").split(":", 2)[2] for line in f]
        except (OSError, IndexError):
            continue  # ended meanwhile
        for path in paths:
            parts = path.split("/")
            ours = [i for i, p in enumerate(parts[:-2])
                    if p == "hpcq" and parts[i + 1].startswith(instance)
                    and parts[i + 2] == f"job-{job}"]
            if ours:
                pids.add(int(entry))
                break
    return pids


def check_in_container(job, uid):
    """Some process of the job counts inside the image, as `uid`."""
    def counting():
        for pid in job_pids(job):
            try:
                with open(f"/proc/{pid}/cmdline") as f:
                    cmd = f.read()
                # Its root directory, seen through /proc: the image's?
                root = os.stat(f"/proc/{pid}/root")
                owner = os.stat(f"/proc/{pid}").st_uid
            except OSError:
                continue
            if "i=$((i+1))" in cmd:
                return (root.st_dev, root.st_ino), owner
        return None
    root, owner = t.wait_until(f"job {job}: its counting shell", counting)
    image = os.stat(ROOT)
    t.check(root == (image.st_dev, image.st_ino), f"job {job} does not count inside {ROOT}")
    t.check(owner == uid, f"job {job} counts as uid {owner}, not {uid}")


def migrate_away(job, s, out):
    first = s["nodes"][0]
    other = [n["name"] for n in json.loads(t.hpcq("nodes", "--json").stdout)
             if n["name"] != first][0]
    record = json.loads(t.hpcq("migrate", str(job), "--to", other, "--json").stdout)
    s = t.wait_state(job, "RUNNING")
    t.check(s["nodes"] == [other], f"restored on {s['nodes']}, not on {other}")
    ck = s["checkpoints"][-1]
    t.check(ck["outcome"] == "ok" and ck["restored"] is True, f"checkpoints {s['checkpoints']}")
    p = s["placements"]
    t.check(len(p) == 2 and p[0]["nodes"] == [first] and p[1]["nodes"] == [other]
            and p[1]["restored_from"] == record["image"], f"placements {p}")
    return s


@t.needs_checkpoint
def test_migrate_a_container_job():
    user = "hpcqtest" if can_dump_other_users() else None
    uid = t.ensure_user() if user else 0
    d = t.workdir()
    job, s, out = container_counter(d, user=user)
    t.wait_count(out, 5)
    check_in_container(job, uid)
    try:
        migrate_away(job, s, out)
        at = t.counts(out)[-1]
        after = t.wait_count(out, at + 5)
        check_in_container(job, uid)
    finally:
        t.run([t.HPCQ, "cancel", str(job)])
    t.wait_state(job, "CANCELLED")
    t.check_contiguous(out)
    # Still there after the cancel: counted on past the migration.
    t.check(t.counts(out)[-1] >= after >= at + 5, f"{out}: only {t.counts(out)[-1]}")


def wait_both_count(out, what, past=None):
    """Until tasks 0 and 1 have each counted 5 past `past` (rank -> count; none: 0)."""
    past = past or {0: 0, 1: 0}
    t.wait_until(what, lambda: len(t.counts_by_task(out)) == 2 and all(
        t.counts_by_task(out)[r][-1] >= past[r] + 5 for r in (0, 1)))


def check_tasks_contiguous(out):
    for rank, c in t.counts_by_task(out).items():
        t.check(c == list(range(1, len(c) + 1)),
                f"task {rank}: count not contiguous: {c[:5]}...{c[-5:]}")


@t.needs_checkpoint
def test_migrate_two_tasks_in_a_container():
    d = t.workdir()
    job, s, out = container_counter(d, ntasks=2, command=RANK_COUNTER)
    wait_both_count(out, "both tasks counting")
    try:
        migrate_away(job, s, out)
        before = {r: c[-1] for r, c in t.counts_by_task(out).items()}
        wait_both_count(out, "both tasks counting on", before)
    finally:
        t.run([t.HPCQ, "cancel", str(job)])
    t.wait_state(job, "CANCELLED")
    check_tasks_contiguous(out)


@t.needs_checkpoint
def test_two_node_job_requeued_and_restored():
    d = t.workdir()
    job, _, out = container_counter(d, ntasks=2, nodes=2, command=RANK_COUNTER)
    wait_both_count(out, "both nodes counting")
    try:
        record = json.loads(
            t.hpcq("checkpoint", str(job), "--then", "requeue", "--json").stdout)
        t.check(record["outcome"] == "ok", f"record {record}")
        s = t.wait_state(job, "RUNNING")
        t.check(len(s["nodes"]) == 2 and s["requeue_count"] == 1, f"status {s}")
        before = {r: c[-1] for r, c in t.counts_by_task(out).items()}
        wait_both_count(out, "both nodes counting on", before)
    finally:
        t.run([t.HPCQ, "cancel", str(job)])
    t.wait_state(job, "CANCELLED")
    check_tasks_contiguous(out)


@t.needs_checkpoint
def test_requeue_then_restore_elsewhere():
    d = t.workdir()
    job, s, out = container_counter(d)
    t.wait_count(out, 5)
    first = s["nodes"][0]
    t.hpcq("drain", first, "--reason", "container requeue test")
    try:
        record = json.loads(
            t.hpcq("checkpoint", str(job), "--then", "requeue", "--json").stdout)
        t.check(record["outcome"] == "ok", f"record {record}")
        s = t.wait_state(job, "RUNNING")
        t.check(s["nodes"] != [first], f"restored on {s['nodes']}, the drained node")
        t.check(s["requeue_count"] == 1, f"requeue_count {s['requeue_count']}")
        at = t.counts(out)[-1]
        t.wait_count(out, at + 5)
    finally:
        t.hpcq("resume", first)
        t.run([t.HPCQ, "cancel", str(job)])
    t.wait_state(job, "CANCELLED")
    t.check_contiguous(out)


@t.needs_checkpoint
def test_dump_failure_keeps_the_container_running():
    # CRIU does not dump an established TCP connection (no --tcp-established):
    # a container that holds one cannot be checkpointed, and runs on.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    threading.Thread(target=lambda: [listener.accept() for _ in range(8)], daemon=True).start()
    d = t.workdir()
    job, _, out = container_counter(
        d, command=f"nc 127.0.0.1 {listener.getsockname()[1]} </dev/null & " + t.COUNTER)
    t.wait_count(out, 5)
    for request in (("checkpoint", str(job)), ("migrate", str(job))):
        p = t.hpcq(*request, rc=1)
        t.check("checkpoint failed" in p.stderr and "the job runs on" in p.stderr, p.stderr)
        t.wait_count(out, t.counts(out)[-1] + 3)
        s = t.status(job)
        t.check(s["state"] == "RUNNING" and s["requeue_count"] == 0, f"status {s}")
    t.hpcq("cancel", str(job))
    t.wait_state(job, "CANCELLED")
    t.check_contiguous(out)
    listener.close()


@t.needs_checkpoint
def test_checkpoint_and_run_on():
    d = t.workdir()
    job, _, out = container_counter(d)
    t.wait_count(out, 5)
    record = json.loads(t.hpcq("checkpoint", str(job), "--json").stdout)
    t.check(record["outcome"] == "ok" and record["image_bytes"] > 0, f"record {record}")
    t.check(os.path.exists(os.path.join(record["image"], "part-0", "worker-0", "inventory.img")),
            f"no container images in {record['image']}")
    at = t.counts(out)[-1]
    t.wait_count(out, at + 5)
    t.check(t.status(job)["state"] == "RUNNING", "the job stopped")
    t.hpcq("cancel", str(job))
    t.wait_state(job, "CANCELLED")
    t.check_contiguous(out)


if __name__ == "__main__":
    t.main([test_migrate_a_container_job, test_migrate_two_tasks_in_a_container,
            test_two_node_job_requeued_and_restored, test_requeue_then_restore_elsewhere,
            test_dump_failure_keeps_the_container_running, test_checkpoint_and_run_on])
