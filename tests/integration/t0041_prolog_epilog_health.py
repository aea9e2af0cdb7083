#!/usr/bin/env python3
"""The site's prolog, epilog and health check (issue 24, item 4), set in
hpcq.toml's [agent] (through `hpcq start --config`). The prolog runs as root
on each node of a job before its first task there, with the job's id, user
and nodes in its environment; the epilog after its last task; a failing
prolog requeues the job and drains the node with what the prolog said; a
failing epilog drains the node; a job held for a node waits for that node's
epilog to end; a job cancelled during its prolog ends CANCELLED. The health
check runs every second: failing, it drains its node with its output as the
reason; passing again, it resumes that node, but never one an admin
drained."""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

DIR = "/tmp/hpcq-t0041"
CONFIG = os.path.join(DIR, "site.toml")
# Each program records what it saw in DIR and fails (or waits) on a file.
PROLOG = f"""#!/bin/sh
d={DIR}
while [ -e $d/hold-prolog ]; do sleep 0.05; done
env | grep -E '^HPCQ_' | sort > $d/prolog.$HPCQ_NODENAME.$HPCQ_JOB_ID.tmp
echo "uid=$(id -u)" >> $d/prolog.$HPCQ_NODENAME.$HPCQ_JOB_ID.tmp
mv $d/prolog.$HPCQ_NODENAME.$HPCQ_JOB_ID.tmp $d/prolog.$HPCQ_NODENAME.$HPCQ_JOB_ID
if [ -e $d/fail-prolog-$HPCQ_NODENAME ]; then echo "no scratch on $HPCQ_NODENAME"; exit 3; fi
"""
EPILOG = f"""#!/bin/sh
d={DIR}
while [ -e $d/hold-epilog ]; do sleep 0.05; done
env | grep -E '^HPCQ_' | sort > $d/epilog.$HPCQ_NODENAME.$HPCQ_JOB_ID
if [ -e $d/fail-epilog-$HPCQ_NODENAME ]; then echo "cannot clean /scratch"; exit 4; fi
touch $d/epilog-done.$HPCQ_NODENAME.$HPCQ_JOB_ID
"""
HEALTH = f"""#!/bin/sh
d={DIR}
echo run >> $d/health.$HPCQ_NODENAME
if [ -e $d/sick-$HPCQ_NODENAME ]; then echo "disk /scratch full"; echo more; exit 1; fi
"""

if not os.environ.get("HPCQ_TEST_INSIDE"):
    shutil.rmtree(DIR, ignore_errors=True)
    os.makedirs(DIR)
    os.chmod(DIR, 0o777)
    for name, text in (("prolog", PROLOG), ("epilog", EPILOG), ("health", HEALTH)):
        with open(os.path.join(DIR, name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(DIR, name), 0o755)
    with open(CONFIG, "w") as f:
        f.write(f"""
[agent]
prolog = "{DIR}/prolog"
epilog = "{DIR}/epilog"
health_check = "{DIR}/health"
health_check_interval_s = 1
script_timeout_s = 20
""")
t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:2 pu:1",
                 extra=("--config", CONFIG))


def path(name):
    return os.path.join(DIR, name)


def touch(name):
    with open(path(name), "w"):
        pass


def read_env(name):
    with open(path(name)) as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


def prolog_processes(job):
    """The pids of a prolog run for `job` (its environment names the job and
    the prolog context; its sleeps inherit it)."""
    want = {f"HPCQ_JOB_ID={job}".encode(), b"HPCQ_SCRIPT_CONTEXT=prolog"}
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if want <= set(f.read().split(b"\0")):
                    pids.append(int(pid))
        except OSError:
            pass  # gone meanwhile, or a kernel thread
    return pids


def node(name):
    return next(n for n in json.loads(t.hpcq("nodes", "--json").stdout) if n["name"] == name)


def health_runs(name):
    try:
        with open(path(f"health.{name}")) as f:
            return len(f.readlines())
    except FileNotFoundError:
        return 0


def test_prolog_and_epilog_run_as_root_around_the_job():
    t.ensure_user()
    d = t.workdir()
    os.chmod(d, 0o777)
    # Each task says whether its node's prolog had run before it.
    job = t.submit("-N", "2", "-n", "2", "--", "sh", "-c",
                   f"test -e {DIR}/prolog.$HPCQ_NODENAME.$HPCQ_JOB_ID && echo after-prolog "
                   "> out-$HPCQ_TASK_RANK", user="hpcqtest", cwd=d)
    s = t.wait_state(job, ("COMPLETED", "FAILED"), user="hpcqtest")
    t.check(s["state"] == "COMPLETED", f"job {s}")
    for rank in (0, 1):
        with open(os.path.join(d, f"out-{rank}")) as f:
            t.check(f.read() == "after-prolog\n", f"task {rank} ran before its node's prolog")
    for n in ("node1", "node2"):
        env = read_env(f"prolog.{n}.{job}")
        want = {"HPCQ_JOB_ID": str(job), "HPCQ_JOB_USER": "hpcqtest",
                "HPCQ_JOB_UID": str(t.ensure_user()), "HPCQ_JOB_NODELIST": "node[1-2]",
                "HPCQ_NODENAME": n, "HPCQ_SCRIPT_CONTEXT": "prolog", "uid": "0"}
        t.check(all(env.get(k) == v for k, v in want.items()), f"{n}'s prolog saw {env}")
        t.wait_until(f"{n}'s epilog", lambda: os.path.exists(path(f"epilog-done.{n}.{job}")))
        env = read_env(f"epilog.{n}.{job}")
        t.check(env.get("HPCQ_JOB_ID") == str(job) and env.get("HPCQ_SCRIPT_CONTEXT") == "epilog"
                and env.get("HPCQ_JOB_USER") == "hpcqtest", f"{n}'s epilog saw {env}")


def test_a_failing_prolog_requeues_the_job_and_drains_the_node():
    d = t.workdir()
    gate = t.Gate(d)
    busy = t.submit("-w", "node2", "-n", "2", "--", *gate.command, cwd=d)
    t.wait_state(busy, "RUNNING")
    touch("fail-prolog-node1")
    try:
        job = t.submit("-n", "1", "-o", "out-%j", "--", "echo", "ran", cwd=d)
        n1 = t.wait_until("node1 drained", lambda: node("node1")["state"] == "drained"
                          and node("node1"))
        t.check(f"prolog {DIR}/prolog exited with code 3: no scratch on node1" in n1["reason"],
                f"node1's reason: {n1['reason']!r}")
        s = t.wait_state(job, "PENDING")
        t.check("requeued: node1: node error: prolog" in s["reason"], f"job {s}")
    finally:
        os.unlink(path("fail-prolog-node1"))
    gate.open()
    s = t.wait_state(job, ("COMPLETED", "FAILED"))
    t.check(s["state"] == "COMPLETED", f"job {s}")
    t.check([p["nodes"] for p in s["placements"]] == [["node1"], ["node2"]],
            f"placements {s['placements']}")
    # The prolog failed on node1: no epilog runs there for it.
    t.check(not os.path.exists(path(f"epilog.node1.{job}")), "an epilog after a failed prolog")
    t.hpcq("resume", "node1")


def test_a_failing_epilog_drains_the_node():
    d = t.workdir()
    touch("fail-epilog-node1")
    try:
        job = t.submit("-w", "node1", "-n", "1", "--", "true", cwd=d)
        s = t.wait_state(job, ("COMPLETED", "FAILED"))
        t.check(s["state"] == "COMPLETED", f"the epilog changed the job's end: {s}")
        n1 = t.wait_until("node1 drained", lambda: node("node1")["state"] == "drained"
                          and node("node1"))
        t.check(f"epilog {DIR}/epilog exited with code 4: cannot clean /scratch (job {job})"
                == n1["reason"], f"node1's reason: {n1['reason']!r}")
    finally:
        os.unlink(path("fail-epilog-node1"))
    t.hpcq("resume", "node1")


def test_the_next_job_waits_for_the_epilog():
    d = t.workdir()
    touch("hold-epilog")
    try:
        first = t.submit("-w", "node1", "-n", "2", "--", "true", cwd=d)
        t.wait_state(first, "COMPLETED")
        t.wait_until("the epilog holding", lambda: not os.path.exists(
            path(f"epilog-done.node1.{first}")) and os.path.exists(path("hold-epilog")))
        second = t.submit("-w", "node1", "-n", "2", "-o", "out-%j", "--", "sh", "-c",
                          f"test -e {DIR}/epilog-done.node1.{first} && echo after-epilog", cwd=d)
    finally:
        os.unlink(path("hold-epilog"))
    s = t.wait_state(second, ("COMPLETED", "FAILED"))
    t.check(s["state"] == "COMPLETED", f"job {s}")
    with open(os.path.join(d, f"out-{second}")) as f:
        text = f.read()
        t.check(text == "after-epilog\n" * 2, f"the next job started before the epilog ended: {text!r}")


def test_a_job_cancelled_in_its_prolog():
    d = t.workdir()
    touch("hold-prolog")
    try:
        job = t.submit("-w", "node2", "-n", "1", "-o", "out-%j", "--", "echo", "ran", cwd=d)
        t.wait_state(job, "RUNNING")
        t.hpcq("cancel", str(job))
        s = t.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED"))
        t.check(s["state"] == "CANCELLED", f"job {s}")
    finally:
        os.unlink(path("hold-prolog"))
    # The released prolog runs to its end (it records the job as it ends); its
    # outcome is ignored only if the agent remembered the cancel.
    t.wait_until("the cancelled job's prolog ran to its end",
                 lambda: os.path.exists(path(f"prolog.node2.{job}")))
    t.wait_until("the cancelled job's prolog exited", lambda: not prolog_processes(job))
    # The node takes the next job, the whole node: launched after the cancelled
    # job's prolog ended, on the same agent, so once it has completed a task
    # that prolog's end started wrongly has had its turn to write its output.
    s = t.wait_state(t.submit("-w", "node2", "-n", "2", "--", "true", cwd=d),
                     ("COMPLETED", "FAILED"))
    t.check(s["state"] == "COMPLETED", f"the next job {s}")
    t.check(not os.path.exists(os.path.join(d, f"out-{job}")), "a cancelled job's task ran")


def test_the_health_check_drains_and_resumes_its_node():
    touch("sick-node2")
    try:
        n2 = t.wait_until("node2 drained", lambda: node("node2")["state"] == "drained"
                          and node("node2"))
        t.check(n2["reason"] == f"health check {DIR}/health exited with code 1: disk /scratch full",
                f"node2's reason: {n2['reason']!r}")
    finally:
        os.unlink(path("sick-node2"))
    t.wait_until("node2 resumed", lambda: node("node2")["state"] == "up")
    # An admin's drain stays however often the check passes.
    t.hpcq("drain", "node1", "--reason", "bad DIMM")
    runs = health_runs("node1")
    t.wait_until("two more health checks on node1", lambda: health_runs("node1") >= runs + 3)
    n1 = node("node1")
    t.check(n1["state"] == "drained" and n1["reason"] == "bad DIMM", f"node1 {n1}")
    t.hpcq("resume", "node1")


def test_an_epilog_failure_outlives_a_lost_message():
    """The failure reaches a hpcqd that is stopped and then killed (what was
    sent to it dies with it); the agent sends it again until the restarted
    hpcqd acknowledges it, and node1 is drained."""
    d = t.workdir()
    touch("hold-epilog")
    touch("fail-epilog-node1")
    log = os.path.join(t.cluster_dir(), "logs", "agent-1.log")
    try:
        job = t.submit("-w", "node1", "-n", "1", "--", "true", cwd=d)
        t.wait_state(job, "COMPLETED")
        t.stop_leader()
        os.unlink(path("hold-epilog"))
        t.wait_until("the agent's epilog failure", lambda: f"(job {job})" in open(log).read())
        t.restart_leader(t.kill_leader())
        n1 = t.wait_until("node1 drained", lambda: node("node1")["state"] == "drained"
                          and node("node1"))
        t.check(f"exited with code 4: cannot clean /scratch (job {job})" in n1["reason"],
                f"node1's reason: {n1['reason']!r}")
    finally:
        for name in ("hold-epilog", "fail-epilog-node1"):
            if os.path.exists(path(name)):
                os.unlink(path(name))
    t.hpcq("resume", "node1")


t.main([test_prolog_and_epilog_run_as_root_around_the_job,
        test_a_failing_prolog_requeues_the_job_and_drains_the_node,
        test_a_failing_epilog_drains_the_node, test_the_next_job_waits_for_the_epilog,
        test_a_job_cancelled_in_its_prolog, test_the_health_check_drains_and_resumes_its_node,
        # Last: hpcqd is no longer hpcq start's child after it.
        test_an_epilog_failure_outlives_a_lost_message])
