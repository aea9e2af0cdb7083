#!/usr/bin/env python3
"""Preemption in a real cluster: a job of a higher-tier queue preempts a
lower-tier job whose queue allows it. The whole victim is stopped on every
node (never a part of it), then requeued (preempt_mode requeue) and run again
later, or cancelled (preempt_mode cancel), or checkpointed with CRIU and
restored where it next starts, its work kept (preempt_mode checkpoint)."""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

CONFIG = "/tmp/hpcq-t0020.toml"
DECISIONS = t.decision_log("t0020")
if not os.environ.get("HPCQ_TEST_INSIDE"):
    with open(CONFIG, "w") as f:
        f.write(f"""
[scheduler]
actions = ["allocate", "preempt", "backfill"]
plugins = ["fcfs"]
decision_log = "{DECISIONS}"

[[queue]]
name = "low"
default = true
preempt_mode = "requeue"

[[queue]]
name = "scavenger"
preempt_mode = "cancel"

[[queue]]
name = "checkpointed"
preempt_mode = "checkpoint"

[[queue]]
name = "high"
priority_tier = 1
""")
# The leader restarts below keep the leader away for a whole CRIU dump:
# under a second on a host, 19 to 36 s in the guest (qemu TCG); the waits
# allow DUMP_S. The nodes' lease on their jobs (node-down less a heartbeat,
# docs/admin-guide.md, "A lost node's jobs") must outlast that absence, or
# the nodes end the preemptor while the leader is away (the guest with
# node-down 15 s: its tasks were killed 14.5 s into a 19 s dump, and the
# victim was restored in its place). DUMP_S plus 30 s for the leader's
# restart and the nodes' next Hello.
DUMP_S = 120
t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:2 pu:1",
                 extra=("--config", CONFIG, "--node-down-after", str(DUMP_S + 30)))


def test_a_whole_gang_is_requeued_for_a_higher_tier():
    d = t.workdir()
    gang = t.submit("-N", "2", "-n", "4", "--", "sleep", "300", cwd=d)
    s = t.wait_state(gang, "RUNNING")
    t.check(sorted(s["nodes"]) == ["node1", "node2"], f"gang on {s['nodes']}")
    # What "runs nowhere" below looks at, seen while it runs (one per node).
    # RUNNING is the leader's word at dispatch: each node makes its part's
    # cgroups when its launch arrives, a moment later.
    nodes_with_cgroups = lambda: {os.path.basename(os.path.dirname(c))
                                  for c in t.job_cgroups(gang)}
    t.wait_until("the running gang's cgroups on both nodes",
                 lambda: len(nodes_with_cgroups()) == 2, timeout=30)
    gate = t.Gate(d)
    urgent = t.submit("-q", "high", "-n", "1", "--", *gate.command, cwd=d)
    s = t.wait_state(urgent, "RUNNING", timeout=30)
    g = t.status(gang)
    t.check(g["state"] == "PENDING" and g["requeue_count"] == 1 and
            f"preempted by job {urgent}" in g["reason"], f"victim {g}")
    t.check(not t.job_cgroups(gang), f"the gang still runs somewhere: {t.job_cgroups(gang)}")
    gate.open()
    t.wait_state(urgent, "COMPLETED")
    s = t.wait_state(gang, "RUNNING", timeout=30)  # it runs again once there is room
    t.check(s["requeue_count"] == 1, f"{s}")
    t.hpcq("cancel", str(gang))
    t.wait_state(gang, "CANCELLED")


def test_cancel_mode_and_no_preemption_within_a_tier():
    d = t.workdir()
    scavenger = t.submit("-q", "scavenger", "-N", "2", "-n", "4", "--", "sleep", "300", cwd=d)
    t.wait_state(scavenger, "RUNNING")
    same_tier = t.submit("-n", "1", "--", "true", cwd=d)  # low: tier 0 like scavenger
    t.wait_cycle_showing(DECISIONS, same_tier)
    t.check(t.status(same_tier)["state"] == "PENDING" and
            f"job {scavenger}: preempted" not in t.leader_log(),
            "a same-tier job preempted another")
    urgent = t.submit("-q", "high", "-n", "1", "--", "true", cwd=d)
    s = t.wait_state(scavenger, ["CANCELLED", "PENDING", "COMPLETED"], timeout=30)
    t.check(s["state"] == "CANCELLED" and "preempted by job" in s["reason"], f"{s}")
    t.wait_state(urgent, "COMPLETED")
    t.wait_state(same_tier, "COMPLETED")


def counts(path):
    if not os.path.exists(path):
        return {}
    tasks = {}
    with open(path) as f:
        for line in f.read().splitlines():
            rank, n = line.split()
            tasks.setdefault(rank, []).append(int(n))
    return tasks


@t.needs_checkpoint
def test_checkpoint_mode_keeps_the_work():
    d = t.workdir()
    gang = t.submit("-q", "checkpointed", "-N", "2", "-n", "4", "-o", "count-%j.out", "--",
                    "sh", "-c", "i=0; while :; do i=$((i+1)); echo $HPCQ_TASK_RANK $i; sleep 0.1; done",
                    cwd=d)
    t.wait_state(gang, "RUNNING")
    out = os.path.join(d, f"count-{gang}.out")
    deadline = time.monotonic() + 30
    while len(counts(out)) < 4 or min(c[-1] for c in counts(out).values()) < 5:
        t.check(time.monotonic() < deadline, f"the gang does not count: {counts(out)}")
        time.sleep(0.1)
    gate = t.Gate(d)
    urgent = t.submit("-q", "high", "-N", "2", "-n", "4", "--", *gate.command, cwd=d)
    t.wait_state(urgent, "RUNNING", timeout=30)
    # It starts as the victim's dump begins (the frozen victim hands its
    # cores over); the victim is requeued once the dump is done.
    g = t.wait_state(gang, "PENDING", timeout=30)
    t.check(g["restore_from"] and
            f"preempted by job {urgent}, checkpointed" in g["reason"], f"victim {g}")
    t.check(g["checkpoints"][-1]["then"] == "requeue" and g["checkpoints"][-1]["outcome"] == "ok",
            f"checkpoints {g['checkpoints']}")
    at = {r: c[-1] for r, c in counts(out).items()}
    gate.open()
    t.wait_state(urgent, "COMPLETED")
    t.wait_state(gang, "RUNNING", timeout=30)
    deadline = time.monotonic() + 30
    while any(counts(out)[r][-1] < at[r] + 5 for r in at):
        t.check(time.monotonic() < deadline, f"not counting on after the restore: {at}")
        time.sleep(0.1)
    t.hpcq("cancel", str(gang))
    t.wait_state(gang, "CANCELLED")
    for rank, c in counts(out).items():
        t.check(c == list(range(1, len(c) + 1)), f"task {rank}: its count broke: {c[-5:]}")


def comes_back_and_counts_on(gate, urgent, victim, out, at):
    """Lets the job the victim left for end; the victim starts again and
    counts on past `at` (its output: one count a line); then it is cancelled."""
    gate.open()
    t.wait_state(urgent, "COMPLETED")
    t.wait_state(victim, "RUNNING", timeout=30)
    t.wait_count(out, at + 5)
    t.hpcq("cancel", str(victim))
    t.wait_state(victim, "CANCELLED")


@t.needs_checkpoint
def test_failed_dump_restarts_from_the_last_checkpoint():
    # A victim whose dump fails (it now holds an established TCP connection,
    # which CRIU does not dump) still leaves; it is requeued from its last
    # good periodic checkpoint, not from the start.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    threading.Thread(target=lambda: [listener.accept() for _ in range(8)], daemon=True).start()
    d = t.workdir()
    marker = os.path.join(d, "connect")
    counter = ("i=0; while :; do i=$((i+1)); echo $i; "
               f"if [ -e {marker} ] && [ -z \"$c\" ]; then "
               f"exec 3<>/dev/tcp/127.0.0.1/{listener.getsockname()[1]}; c=1; fi; "
               "sleep 0.1; done")
    victim = t.submit("-q", "checkpointed", "-n", "1", "--checkpoint-interval", "1s",
                      "-o", "count-%j.out", "--", "bash", "-c", counter, cwd=d)
    t.wait_state(victim, "RUNNING")
    out = os.path.join(d, f"count-{victim}.out")
    t.wait_until("a periodic checkpoint", lambda: any(
        c["periodic"] and c["outcome"] == "ok" for c in t.status(victim)["checkpoints"]))
    open(marker, "w").close()
    at = t.wait_count(out, t.counts(out)[-1] + 3)
    gate = t.Gate(d)
    urgent = t.submit("-q", "high", "-N", "2", "-n", "4", "--", *gate.command, cwd=d)
    t.wait_state(urgent, "RUNNING", timeout=30)
    v = t.wait_state(victim, "PENDING", timeout=30)
    t.check("restarting from checkpoint" in v["reason"] and
            v["restore_from"], f"victim {v}")
    t.check(v["checkpoints"][-1]["outcome"] != "ok", f"checkpoints {v['checkpoints']}")
    comes_back_and_counts_on(gate, urgent, victim, out, at)
    c = t.counts(out)
    t.check(c.count(1) == 1, f"{out}: counted from 1 again: {c}")
    listener.close()


# Counts like t.COUNTER, holding ~1 GB, so that its dump takes a while.
HOG_COUNTER = """import time
hog = b"x" * 1_000_000_000
i = 0
while True:
    i += 1
    print(i, flush=True)
    time.sleep(0.1)
"""


def logged(log, text):
    with open(os.path.join(t.cluster_dir(), "logs", log)) as f:
        return text in f.read()


def leader_restart_during_the_victims_dump(answered_while_away):
    """The leader is killed as the victim's dump begins, and started again
    either at once (the dump's answer comes to the new leader, which adopts
    the victim without the cores it handed over) or once the agent has
    answered into the void (the victim's part is gone from its node, dumped
    and stopped, and not reported ended: the agent repeats its answer in its
    Hello). Either way the victim is requeued from that dump and restored,
    not lost with its part."""
    d = t.workdir()
    victim = t.submit("-q", "checkpointed", "-n", "1", "-o", "count-%j.out", "--",
                      "python3", "-c", HOG_COUNTER, cwd=d)
    rank = t.wait_state(victim, "RUNNING")["allocation"][0]["rank"]
    out = os.path.join(d, f"count-{victim}.out")
    t.wait_count(out, 3)
    gate = t.Gate(d)
    urgent = t.submit("-q", "high", "-N", "2", "-n", "4", "--", *gate.command, cwd=d)
    t.wait_until("the victim's dump", lambda: logged("hpcqd.log", f"job {victim}: checkpoint (requeue)"))
    leader = t.kill_leader()
    # The dump's own time bounds the waits: 31 and 36 s in the guest (qemu
    # TCG) when the leader was killed as it began, under a second on a host.
    dump = DUMP_S
    if answered_while_away:
        t.wait_until("the agent's answer",
                     lambda: logged(f"agent-{rank}.log", f"job {victim}: checkpoint into"),
                     timeout=dump)
    t.restart_leader(leader)
    v = t.wait_state(victim, "PENDING", timeout=dump)
    t.check(f"preempted by job {urgent}, checkpointed" in v["reason"] and v["restore_from"],
            f"victim {v}")
    t.check(v["checkpoints"][-1]["outcome"] == "ok" and v["checkpoints"][-1]["preempted_for"] == urgent,
            f"checkpoints {v['checkpoints']}")
    t.wait_state(urgent, "RUNNING", timeout=dump)
    at = t.counts(out)[-1]
    comes_back_and_counts_on(gate, urgent, victim, out, at)
    t.check_contiguous(out)


@t.needs_checkpoint
def test_leader_restart_during_the_victims_dump():
    leader_restart_during_the_victims_dump(answered_while_away=False)


@t.needs_checkpoint
def test_leader_restart_after_the_victims_dump_was_answered():
    leader_restart_during_the_victims_dump(answered_while_away=True)


t.main([test_a_whole_gang_is_requeued_for_a_higher_tier,
        test_cancel_mode_and_no_preemption_within_a_tier,
        test_checkpoint_mode_keeps_the_work,
        test_failed_dump_restarts_from_the_last_checkpoint,
        test_leader_restart_during_the_victims_dump,
        test_leader_restart_after_the_victims_dump_was_answered])
