#!/usr/bin/env python3
"""Checkpoint and migration of running jobs with real CRIU, real agents and a
real hpcqd: a job that counts once per 100 ms into its output file is
checkpointed and runs on; is migrated to the other node (its first node
drained) and its count goes on from where it was, with no gap and no restart
from zero; is checkpointed and stopped (held), then released and restored;
an `hpcq run` job (its output and input going to its caller through the
agent) is checkpointed and migrated while the caller prints every line once,
in order, and its input reaches it on the new node; a restored job reads its
new node's hostfiles; bad requests get one-line errors."""
import json
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:2 pu:1")

def processes_writing(path):
    """The pids of processes with `path` open (a job's output file: its tasks,
    whichever node runs them, or none once it stopped)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # gone meanwhile
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                    pids.append(int(pid))
                    break
            except OSError:
                pass
    return pids


def counter_job(d):
    job = t.submit("-N", "1", "-n", "1", "-o", "count-%j.out", "--", "sh", "-c", t.COUNTER, cwd=d)
    s = t.wait_state(job, "RUNNING")
    out = os.path.join(d, f"count-{job}.out")
    t.wait_count(out, 5)
    return job, s, out


@t.needs_checkpoint
def test_checkpoint_and_run_on():
    d = t.workdir()
    job, _, out = counter_job(d)
    record = json.loads(t.hpcq("checkpoint", str(job), "--json").stdout)
    t.check(record["outcome"] == "ok" and record["image_bytes"] > 0, f"record {record}")
    t.check(os.path.isdir(os.path.join(record["image"], "part-0")), f"no images in {record}")
    at = t.counts(out)[-1]
    t.wait_count(out, at + 5)
    s = t.status(job)
    t.check(s["state"] == "RUNNING" and s["requeue_count"] == 0, f"status {s}")
    t.check(len(s["checkpoints"]) == 1 and s["checkpoints"][0]["then"] == "continue",
            f"checkpoints {s['checkpoints']}")
    t.hpcq("cancel", str(job))
    t.wait_state(job, "CANCELLED")
    t.check_contiguous(out)


@t.needs_checkpoint
def test_migrate_to_the_other_node():
    d = t.workdir()
    job, s, out = counter_job(d)
    first = s["nodes"][0]
    t.hpcq("drain", first, "--reason", "migration test")
    try:
        t.hpcq("migrate", str(job))
        s = t.wait_state(job, "RUNNING")
        t.check(s["nodes"] != [first], f"restored on {s['nodes']}, the drained node")
        # Its hostfiles (at the path its environment names, in the directory
        # it started in) name where it runs now, once its new node has
        # restored it: the job shows RUNNING there as the restore is sent,
        # and the restore copies the old files before it rewrites them.
        started_in = os.path.join(t.jobs_dir(int(first.removeprefix("node"))), str(job))

        def read(name):
            try:
                with open(os.path.join(started_in, name)) as f:
                    return f.read()
            except FileNotFoundError:
                return None
        for name, want in (("hostfile", f"{s['nodes'][0]} slots=1\n"),
                           ("hostfile.mpich", f"{s['nodes'][0]}:1\n")):
            try:
                t.wait_until(f"{name} rewritten", lambda: read(name) == want)
            except t.Failure:
                raise t.Failure(f"{name} after the migration: {read(name)!r}, not {want!r}")
        at = t.counts(out)[-1]
        t.wait_count(out, at + 5)
        t.check(s["requeue_count"] == 1, f"requeue_count {s['requeue_count']}")
        s = t.status(job)
        t.check(s["checkpoints"][-1]["restored"] is True, f"checkpoints {s['checkpoints']}")
    finally:
        t.hpcq("resume", first)
        t.run([t.HPCQ, "cancel", str(job)])
    t.wait_state(job, "CANCELLED")
    t.check_contiguous(out)


@t.needs_checkpoint
def test_migrate_goes_elsewhere_or_stays_saying_why():
    """Without --to a migration moves the job off its node, to one that can
    take it now (it restored on the node it left); with none free it is
    refused, saying what it needs, and the job runs on where it was."""
    d = t.workdir()
    job, s, out = counter_job(d)
    first = s["nodes"][0]
    t.hpcq("migrate", str(job))
    s = t.wait_state(job, "RUNNING")
    t.check(s["nodes"] != [first] and s["requeue_count"] == 1, f"restored on {s['nodes']}")
    t.wait_count(out, t.counts(out)[-1] + 3)
    here = s["nodes"][0]
    gate = t.Gate(d)
    blocker = t.submit("-N", "1", "-c", "2", "--", *gate.command, cwd=d)
    try:
        t.check(t.wait_state(blocker, "RUNNING")["nodes"] == [first], "the blocker's node")
        p = t.hpcq("migrate", str(job), rc=None)
        t.check(p.returncode == 1 and "stays where it is" in p.stderr, f"{p.returncode} {p.stderr}")
        s = t.status(job)
        t.check(s["state"] == "RUNNING" and s["nodes"] == [here], f"after a refused move: {s}")
        t.wait_count(out, t.counts(out)[-1] + 3)
    finally:
        gate.open()
        t.run([t.HPCQ, "cancel", str(job)])
    t.wait_state(job, "CANCELLED")
    t.check_contiguous(out)


@t.needs_checkpoint
def test_migrate_to_a_named_node():
    d = t.workdir()
    job, s, out = counter_job(d)
    first = s["nodes"][0]
    other = [n["name"] for n in json.loads(t.hpcq("nodes", "--json").stdout)
             if n["name"] != first][0]
    try:
        p = t.hpcq("migrate", str(job), "--to", "nosuchnode", rc=2)
        t.check("--to: unknown node 'nosuchnode'" in p.stderr, p.stderr)
        p = t.hpcq("checkpoint", str(job), "--to", other, rc=2)
        t.check("--to: only when the job leaves its nodes" in p.stderr, p.stderr)
        record = json.loads(t.hpcq("migrate", str(job), "--to", other, "--json").stdout)
        t.check(record["to"] == [other], f"record {record}")
        s = t.wait_state(job, "RUNNING")
        t.check(s["nodes"] == [other], f"restored on {s['nodes']}, not on {other}")
        at = t.counts(out)[-1]
        t.wait_count(out, at + 5)
        p = s["placements"]
        t.check(len(p) == 2 and p[0]["nodes"] == [first] and p[1]["nodes"] == [other]
                and p[1]["restored_from"] == record["image"], f"placements {p}")
    finally:
        t.run([t.HPCQ, "cancel", str(job)])
    t.wait_state(job, "CANCELLED")
    t.check_contiguous(out)
    # Accounting shows both placements.
    listed = [j for j in json.loads(t.hpcq("history", "--json").stdout) if j["id"] == job]
    t.check(listed and [p["nodes"] for p in listed[0]["placements"]] == [[first], [other]],
            f"history {listed}")
    row = [l for l in t.hpcq("history").stdout.splitlines() if l.split()[0] == str(job)]
    t.check(row and f"{first}>{other}" in row[0], f"history row {row}")


@t.needs_checkpoint
def test_an_hpcq_run_job_is_checkpointed_and_migrated():
    d = t.workdir()
    gate = t.Gate(d)
    # Numbered lines until the gate opens; then one line of input, echoed.
    script = (f"i=0; while [ ! -e {gate.path} ]; do i=$((i+1)); echo \"line $i\"; sleep 0.05; "
              "done; read text; echo \"read:$text\"")
    p = subprocess.Popen([t.HPCQ, "run", "-n", "1", "--", "sh", "-c", script], cwd=d,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()
    try:
        t.wait_until("its first lines", lambda: len(lines) >= 5)
        job = max(j["id"] for j in json.loads(t.hpcq("queue", "--json").stdout))
        first = t.status(job)["nodes"][0]
        other = "node2" if first == "node1" else "node1"
        record = json.loads(t.hpcq("checkpoint", str(job), "--json").stdout)
        t.check(record["outcome"] == "ok", f"checkpoint {record}")
        at = len(lines)
        t.wait_until("lines after the checkpoint", lambda: len(lines) >= at + 5)
        record = json.loads(t.hpcq("migrate", str(job), "--to", other, "--json").stdout)
        t.check(record["outcome"] == "ok", f"migrate {record}")
        s = t.wait_state(job, "RUNNING")
        t.check(s["nodes"] == [other], f"restored on {s['nodes']}, not {other}")
        at = len(lines)
        t.wait_until("lines from the new node", lambda: len(lines) >= at + 5)
        gate.open()
        p.stdin.write("hello\n")
        p.stdin.flush()
        t.check(p.wait(timeout=60) == 0, f"exit {p.returncode}: {p.stderr.read()}")
        reader.join(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            # The job outlives its caller: it must not hold the nodes the
            # next tests need.
            for j in json.loads(t.hpcq("queue", "--json").stdout):
                t.run([t.HPCQ, "cancel", str(j["id"])])
    t.check_numbered_then(lines, "read:hello")


@t.needs_checkpoint
def test_migrate_two_tasks():
    d = t.workdir()
    job = t.submit("-N", "1", "-n", "2", "-o", "count-%j.out", "--", "sh", "-c",
                   "i=0; while :; do i=$((i+1)); echo $HPCQ_TASK_RANK $i; sleep 0.1; done", cwd=d)
    s = t.wait_state(job, "RUNNING")
    out = os.path.join(d, f"count-{job}.out")

    def per_task():
        tasks = {}
        if not os.path.exists(out):  # the job shell has not opened it yet
            return tasks
        with open(out) as f:
            for line in f.read().splitlines():
                rank, n = line.split()
                tasks.setdefault(rank, []).append(int(n))
        return tasks

    first = s["nodes"][0]
    try:
        deadline = time.monotonic() + 30
        while len(per_task()) < 2 or min(c[-1] for c in per_task().values()) < 5:
            t.check(time.monotonic() < deadline, f"tasks did not count: {per_task()}")
            time.sleep(0.1)
        t.hpcq("drain", first)
        t.hpcq("migrate", str(job))
        s = t.wait_state(job, "RUNNING")
        t.check(s["nodes"] != [first], f"restored on {s['nodes']}")
        at = {r: c[-1] for r, c in per_task().items()}
        deadline = time.monotonic() + 30
        while any(per_task()[r][-1] < at[r] + 5 for r in at):
            t.check(time.monotonic() < deadline, f"tasks stopped counting after the move: {at}")
            time.sleep(0.1)
    finally:
        t.hpcq("resume", first)
        t.run([t.HPCQ, "cancel", str(job)])
    t.wait_state(job, "CANCELLED")
    for rank, c in per_task().items():
        t.check(c == list(range(1, len(c) + 1)), f"task {rank}: not contiguous: {c[-5:]}")


@t.needs_checkpoint
def test_stop_then_release_restores():
    d = t.workdir()
    job, _, out = counter_job(d)
    # What "stopped" is seen against: while it runs, the job has cgroups and
    # processes that hold its output open.
    t.check(t.job_cgroups(job) and processes_writing(out),
            f"job {job} runs, yet: cgroups {t.job_cgroups(job)}, writers {processes_writing(out)}")
    t.hpcq("checkpoint", str(job), "--then", "stop")
    s = t.wait_state(job, "PENDING")
    t.check(s["held"] and s["restore_from"], f"status {s}")
    t.wait_until(f"job {job} stopped: its cgroups and the processes writing its output gone",
                 lambda: not t.job_cgroups(job) and not processes_writing(out))
    at = t.counts(out)[-1]
    t.hpcq("release", str(job))
    t.wait_state(job, "RUNNING")
    t.wait_count(out, at + 5)
    t.hpcq("cancel", str(job))
    t.wait_state(job, "CANCELLED")
    t.check_contiguous(out)


@t.needs_checkpoint
def test_a_restored_job_reads_the_hostfiles_of_its_new_node():
    """The job's first read of $HPCQ_HOSTFILE after its restore on another
    node names that node (issue 45 item 10). Its environment keeps the path
    it was dumped with, where the new node has written the new files. It
    read its old node's before, for as long as it ran: hpcq start's job
    directories are on a tmpfs, which CRIU dumped with the job's mount
    namespace and restored as the job's private copy."""
    d = t.workdir()
    gate = t.Gate(d)
    seen = os.path.join(d, "seen")
    read_hostfiles = f'cat "$HPCQ_HOSTFILE" "$HPCQ_HOSTFILE_MPICH" > {seen}.tmp && mv {seen}.tmp'
    job = t.submit("-N", "1", "-n", "1", "-o", "out-%j", "--", "sh", "-c",
                   f"{read_hostfiles} {seen}.before; "
                   f"while [ ! -e {gate.path} ]; do sleep 0.05; done; "
                   f"{read_hostfiles} {seen}; exec sleep 300", cwd=d)
    first = t.wait_state(job, "RUNNING")["nodes"][0]

    def read(path):
        try:
            with open(path) as f:
                return f.read()
        except FileNotFoundError:
            return None
    t.wait_until("its read where it started", lambda: read(seen + ".before") is not None)
    t.check(read(seen + ".before") == f"{first} slots=1\n{first}:1\n",
            f"where it started: {read(seen + '.before')!r}")
    t.hpcq("checkpoint", str(job), "--then", "stop")
    t.wait_state(job, "PENDING")
    t.wait_until(f"job {job} stopped", lambda: not t.job_cgroups(job))
    t.hpcq("drain", first, "--reason", "restore elsewhere")
    try:
        gate.open()  # what the restored job looks for first
        t.hpcq("release", str(job))
        new = t.wait_state(job, "RUNNING")["nodes"][0]
        t.check(new != first, f"restored on {new}, the drained node")
        t.wait_until("its read after the restore", lambda: read(seen) is not None, timeout=60)
        t.check(read(seen) == f"{new} slots=1\n{new}:1\n",
                f"restored on {new}, it read {read(seen)!r}")
    finally:
        t.hpcq("resume", first)
        t.run([t.HPCQ, "cancel", str(job)])
    t.wait_state(job, "CANCELLED")


@t.needs_checkpoint
def test_dump_failure_keeps_the_job():
    # CRIU does not dump an established TCP connection (no --tcp-established):
    # a job that holds one cannot be checkpointed.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted = []
    threading.Thread(target=lambda: [accepted.append(listener.accept()) for _ in range(8)],
                     daemon=True).start()
    port = listener.getsockname()[1]
    d = t.workdir()
    job = t.submit("-N", "1", "-n", "1", "-o", "count-%j.out", "--", "bash", "-c",
                   f"exec 3<>/dev/tcp/127.0.0.1/{port}; " + t.COUNTER, cwd=d)
    t.wait_state(job, "RUNNING")
    out = os.path.join(d, f"count-{job}.out")
    t.wait_count(out, 3)
    p = t.hpcq("checkpoint", str(job), rc=1)
    t.check("checkpoint failed" in p.stderr and "the job runs on" in p.stderr, p.stderr)
    at = t.counts(out)[-1]
    t.wait_count(out, at + 3)
    s = t.status(job)
    t.check(s["state"] == "RUNNING" and s["checkpoints"][-1]["outcome"] != "ok", f"status {s}")
    # Requeue and migrate: nothing was stopped, so the job runs on where it
    # was (a preemption's victim must leave all the same, and is requeued).
    for request in (("checkpoint", str(job), "--then", "requeue"), ("migrate", str(job))):
        p = t.hpcq(*request, rc=1)
        t.check("checkpoint failed" in p.stderr and "the job runs on" in p.stderr, p.stderr)
        at = t.counts(out)[-1]
        t.wait_count(out, at + 3)
        s = t.status(job)
        t.check(s["state"] == "RUNNING" and s["requeue_count"] == 0, f"status {s}")
    t.check_contiguous(out)
    t.hpcq("cancel", str(job))
    t.wait_state(job, "CANCELLED")
    listener.close()


@t.needs_checkpoint
def test_stopped_job_is_restored_after_a_leader_restart():
    d = t.workdir()
    job, _, out = counter_job(d)
    t.hpcq("checkpoint", str(job), "--then", "stop")
    t.wait_state(job, "PENDING")
    at = t.counts(out)[-1]
    t.restart_leader(t.kill_leader())
    s = t.status(job)
    t.check(s["held"] and s["restore_from"], f"after the restart: {s}")
    t.hpcq("release", str(job))
    t.wait_state(job, "RUNNING", timeout=30)
    t.wait_count(out, at + 5)
    t.hpcq("cancel", str(job))
    t.wait_state(job, "CANCELLED")
    t.check_contiguous(out)


@t.needs_checkpoint
def test_another_users_job_where_only_roots_can_be_dumped():
    """`nodes` says whether a node can checkpoint every user's jobs or only
    root's (a trial dump of an unprivileged process); a job it cannot dump is
    refused with that reason before any dump, and runs on."""
    nodes = json.loads(t.hpcq("nodes", "--json").stdout)
    t.check(all(n["checkpoint"] for n in nodes), f"{nodes}")
    others = {n["checkpoint_other_users"] for n in nodes}
    t.check(len(others) == 1, f"the nodes of one host disagree: {nodes}")
    table = t.hpcq("nodes").stdout
    t.check("CHECKPOINT" in table and ("all" if others == {True} else "root-only") in table, table)
    t.ensure_user()
    d = t.workdir()
    out = os.path.join(d, "user.out")
    job = t.submit("-o", out, "--", "sh", "-c", t.COUNTER, user="hpcqtest", cwd=d)
    t.wait_state(job, "RUNNING", user="hpcqtest")
    t.wait_count(out, 3)
    p = t.hpcq("checkpoint", str(job), "--json", user="hpcqtest", rc=None)
    if others == {True}:
        t.check(p.returncode == 0 and json.loads(p.stdout)["outcome"] == "ok", p.stdout + p.stderr)
    else:
        reason = nodes[0]["checkpoint_other_users_reason"]
        t.check("only root's jobs" in reason, f"reason {reason!r}")
        t.check(p.returncode == 1 and "(of uid" in p.stderr and "only root's jobs" in p.stderr,
                f"{p.returncode} {p.stderr}")
        t.check(not t.status(job, user="hpcqtest")["checkpoints"], "a refused checkpoint recorded")
    at = t.counts(out)[-1]
    t.wait_count(out, at + 3)
    t.hpcq("cancel", str(job), user="hpcqtest")
    t.wait_state(job, "CANCELLED", user="hpcqtest")


def test_bad_requests():
    t.ensure_user("hpcqtest")
    d = t.workdir()
    # 3 tasks on 2 nodes: a restore could not lay them out as the dump did.
    uneven = t.submit("-N", "2", "-n", "3", "--", "sleep", "300", cwd=d)
    t.wait_state(uneven, "RUNNING")
    p = t.hpcq("checkpoint", str(uneven), "--then", "requeue", rc=1)
    t.check("unevenly" in p.stderr, p.stderr)
    t.hpcq("cancel", str(uneven))
    t.wait_state(uneven, "CANCELLED")
    blocker = t.submit("-n", "2", "-N", "1", "--", "sleep", "300", cwd=d)
    blocker2 = t.submit("-n", "2", "-N", "1", "--", "sleep", "300", cwd=d)
    t.wait_state(blocker, "RUNNING")
    t.wait_state(blocker2, "RUNNING")
    pending = t.submit("-n", "1", "--", "true", cwd=d)
    p = t.hpcq("checkpoint", str(pending), rc=1)
    t.check("only running jobs can be checkpointed" in p.stderr, p.stderr)
    p = t.hpcq("checkpoint", str(blocker), user="hpcqtest", rc=1)
    t.check("belongs to another user" in p.stderr, p.stderr)
    p = t.hpcq("checkpoint", str(blocker), "--then", "later", rc=2)
    t.check(p.stderr.count("\n") == 1, p.stderr)
    p = t.hpcq("checkpoint", "999999", rc=1)
    t.check("no job 999999" in p.stderr, p.stderr)
    # The pending job first: a freed node would start it (and end it) at once.
    for j in (pending, blocker, blocker2):
        t.hpcq("cancel", str(j))


t.main([test_checkpoint_and_run_on, test_migrate_to_the_other_node,
        test_migrate_goes_elsewhere_or_stays_saying_why, test_migrate_to_a_named_node,
        test_an_hpcq_run_job_is_checkpointed_and_migrated, test_migrate_two_tasks,
        test_stop_then_release_restores, test_a_restored_job_reads_the_hostfiles_of_its_new_node,
        test_dump_failure_keeps_the_job,
        test_stopped_job_is_restored_after_a_leader_restart,
        test_another_users_job_where_only_roots_can_be_dumped, test_bad_requests])
