#!/usr/bin/env python3
"""Site policy at submit (queues, their time limits, accounts, QOS), job
dependencies (afterok/afternotok/afterany/after, singleton, '?'), job arrays with a throttle,
and advance reservations honoured by the scheduler, on a real cluster with a
configured hpcq.toml."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

CONFIG = "/tmp/hpcq-t0011.toml"
DECISIONS = t.decision_log("t0011")
if not os.environ.get("HPCQ_TEST_INSIDE"):
    t.ensure_user("hpcqtest")
    with open(CONFIG, "w") as f:
        f.write(f"""
[scheduler]
actions = ["allocate", "backfill"]
plugins = ["fcfs"]
decision_log = "{DECISIONS}"

[[queue]]
name = "batch"
default = true
max_time_limit_s = 7200

[[queue]]
name = "debug"
default_time_limit_s = 300
max_time_limit_s = 600

[[queue]]
name = "second"
nodes = "node[2]"
allow_accounts = ["chem"]

[[queue]]
name = "closed"
allow_groups = ["hpcq-no-such-group"]

[[qos]]
name = "high"
priority = 10

[[account]]
name = "physics"

[[account]]
name = "chem"

[[user]]
name = "hpcqtest"
account = "physics"
""")
t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:2 pu:1",
                 extra=("--config", CONFIG))


def test_queues_at_submit():
    d = t.workdir()
    job = t.submit("-o", "q-%j.out", "--", "sh", "-c", "echo $HPCQ_QUEUE $HPCQ_ACCOUNT", cwd=d)
    s = t.wait_state(job, "COMPLETED")
    t.check(s["queue"] == "batch" and s["time_limit_s"] == 3600, f"default queue {s}")
    job = t.submit("-q", "debug", "-o", "q-%j.out", "--", "true", cwd=d)
    t.check(t.status(job)["time_limit_s"] == 300, "the queue's default time limit")
    p = t.hpcq("submit", "-q", "debug", "-t", "20", "--", "true", rc=2)
    t.check("--time: 1200 s exceeds the limit of 600 s of queue 'debug'" in p.stderr, p.stderr)
    p = t.hpcq("submit", "-q", "gpu", "--", "true", rc=2)
    t.check("--queue: unknown queue 'gpu' (known: batch, debug, second, closed)" in p.stderr,
            p.stderr)
    p = t.hpcq("submit", "--qos", "low", "--", "true", rc=2)
    t.check("--qos: unknown qos 'low'" in p.stderr, p.stderr)
    p = t.hpcq("submit", "-A", "chem", "--", "true", user="hpcqtest", cwd=d, rc=2)
    t.check("not associated with account 'chem'" in p.stderr, p.stderr)
    p = t.hpcq("submit", "--priority", "5", "--", "true", user="hpcqtest", cwd=d, rc=1)
    t.check("only an admin" in p.stderr, p.stderr)
    job = t.submit("-o", "q-%j.out", "--", "sh", "-c", "echo $HPCQ_QUEUE $HPCQ_ACCOUNT",
                   user="hpcqtest", cwd=d)
    s = t.wait_state(job, "COMPLETED", user="hpcqtest")
    with open(os.path.join(d, f"q-{job}.out")) as f:
        t.check(f.read().split() == ["batch", "physics"], "the user's account and queue")


def test_a_queue_of_its_own_nodes_and_users():
    """A queue bound to node2 runs its jobs there only; it is open to one
    account, another to one group (Slurm's Nodes=, AllowAccounts=,
    AllowGroups=); root may use either."""
    d = t.workdir()
    for _ in range(2):
        job = t.submit("-q", "second", "-A", "chem", "--", "true", cwd=d)
        t.check(t.wait_state(job, "COMPLETED")["nodes"] == ["node2"], "not on the queue's node")
    for args, rc, why in (
            (["-w", "node1"], 2, "--nodelist: node 'node1' is not in queue 'second' (its nodes: node2)"),
            (["-N", "2", "-n", "2"], 2, "--nodes: 2 nodes, queue 'second' has 1")):
        p = t.hpcq("submit", "-q", "second", *args, "--", "true", rc=rc, cwd=d)
        t.check(p.stderr == f"hpcq: {why}\n", p.stderr)
    p = t.hpcq("submit", "-q", "second", "--", "true", user="hpcqtest", cwd=d, rc=1)
    t.check(p.stderr == "hpcq: --queue: queue 'second' is not open to account 'physics'\n",
            p.stderr)
    p = t.hpcq("submit", "-q", "closed", "--", "true", user="hpcqtest", cwd=d, rc=1)
    t.check(p.stderr == "hpcq: --queue: queue 'closed' is open to group hpcq-no-such-group only\n",
            p.stderr)
    t.wait_state(t.submit("-q", "closed", "--", "true", cwd=d), "COMPLETED")


def test_queues_summary():
    """hpcq queues, like sinfo: each queue's nodes by state, cores and jobs."""
    d = t.workdir()
    gate = t.Gate(d)
    job = t.submit("-q", "second", "-A", "chem", "--", *gate.command, cwd=d)
    t.wait_state(job, "RUNNING")
    waiting = t.submit("-q", "second", "-A", "chem", "-n", "2", "--", "true", cwd=d)
    t.wait_cycle_showing(DECISIONS, waiting)
    try:
        qs = {q["name"]: q for q in json.loads(t.hpcq("queues", "--json").stdout)}
        t.check(list(qs) == ["batch", "debug", "second", "closed"], f"queues {list(qs)}")
        t.check(qs["batch"]["default"] and not qs["second"]["default"], "the default queue")
        second = {k: qs["second"][k] for k in ("nodes", "nodes_allocated", "nodes_idle",
                                               "nodes_other", "cores_allocated", "cores_idle",
                                               "cores_total", "jobs_running", "jobs_pending")}
        t.check(second == {"nodes": ["node2"], "nodes_allocated": 1, "nodes_idle": 0,
                           "nodes_other": 0, "cores_allocated": 1, "cores_idle": 1,
                           "cores_total": 2, "jobs_running": 1, "jobs_pending": 1},
                f"queue second: {qs['second']}")
        batch = qs["batch"]
        t.check(batch["nodes"] == ["node1", "node2"] and batch["nodes_idle"] == 1 and
                batch["cores_total"] == 4 and batch["jobs_running"] == 0 and
                batch["max_time_limit_s"] == 7200, f"queue batch: {batch}")
        rows = {r.split()[0]: r.split() for r in t.hpcq("queues").stdout.splitlines()[1:]}
        t.check(rows["batch*"][1:] == ["1/1/0/2", "1/3/4", "0", "0", "7200s", "node[1-2]"] and
                rows["second"][1:] == ["1/0/0/1", "1/1/2", "1", "1", "-", "node2"],
                f"hpcq queues: {rows}")
    finally:
        gate.open()
    t.wait_state(waiting, "COMPLETED")


def test_dependencies():
    d = t.workdir()
    first = t.submit("-o", "dep-%j.out", "--", "sleep", "1", cwd=d)
    ok = t.submit("-d", f"afterok:{first}", "-o", "dep-%j.out", "--", "true", cwd=d)
    s = t.status(ok)
    t.check(s["state"] == "PENDING" and s["reason"] == f"dependency afterok:{first}", f"{s}")
    notok = t.submit("-d", f"afternotok:{first}", "-o", "dep-%j.out", "--", "true", cwd=d)
    started = t.submit("-d", f"after:{ok}", "-o", "dep-%j.out", "--", "true", cwd=d)
    t.wait_state(first, "COMPLETED")
    s = t.wait_state(ok, "COMPLETED")
    t.check(s["start_time"] >= t.status(first)["end_time"], "afterok waits for the end")
    s = t.wait_state(notok, "CANCELLED")
    t.check("dependency never satisfied: afternotok" in s["reason"], s["reason"])
    t.wait_state(started, "COMPLETED")
    failing = t.submit("-o", "dep-%j.out", "--", "false", cwd=d)
    any_end = t.submit("-d", f"afterany:{failing}", "-o", "dep-%j.out", "--", "true", cwd=d)
    t.wait_state(failing, "FAILED")
    t.wait_state(any_end, "COMPLETED")
    p = t.hpcq("submit", "-d", "afterok:999999", "--", "true", rc=2)
    t.check("--dependency: no job 999999" in p.stderr, p.stderr)
    p = t.hpcq("submit", "-d", "later:3", "--", "true", rc=2)
    t.check("--dependency: unknown type 'later'" in p.stderr, p.stderr)


def test_singleton_and_any_of():
    """--dependency=singleton: two jobs of one user and name run one after the
    other, the second once the first has ended, though there are cores for
    both. '?': a job goes on when the first of its jobs completes, and is
    cancelled only when none of them can; ',' and '?' together are refused."""
    d = t.workdir()
    gate = t.Gate(d)
    name = f"single-{os.path.basename(d)}"
    first = t.submit("-J", name, "-d", "singleton", "-o", "/dev/null", "--", *gate.command, cwd=d)
    second = t.submit("-J", name, "-d", "singleton", "-o", "/dev/null", "--", "true", cwd=d)
    other = t.submit("-J", name + "-b", "-d", "singleton", "-o", "/dev/null", "--", "true", cwd=d)
    t.wait_state(first, "RUNNING")
    t.wait_state(other, "COMPLETED")  # another name: not held back
    s = t.status(second)
    t.check(s["state"] == "PENDING" and s["reason"] == "dependency singleton" and
            s["dependency"] == "singleton", f"the second of the name: {s}")
    gate.open()
    s = t.wait_state(second, "COMPLETED")
    ended = t.wait_state(first, "COMPLETED")["end_time"]
    t.check(s["start_time"] >= ended, f"the second started at {s['start_time']}, before the "
            f"first ended at {ended}")

    slow_gate = t.Gate(d, "slow")
    slow = t.submit("-o", "/dev/null", "--", *slow_gate.command, cwd=d)
    t.wait_state(slow, "RUNNING")
    quick = t.submit("-o", "/dev/null", "--", "true", cwd=d)
    either = t.submit("-d", f"afterok:{slow}?afterok:{quick}", "-o", "/dev/null", "--", "true",
                      cwd=d)
    try:
        s = t.wait_state(either, "COMPLETED")
        t.check(s["start_time"] >= t.status(quick)["end_time"], f"'?' went on before {quick}")
        t.check(t.status(slow)["state"] == "RUNNING", f"'?' waited for {slow} too")
        t.check(s["dependency"] == f"afterok:{slow}?afterok:{quick}", f"{s['dependency']}")
    finally:
        slow_gate.open()
    t.wait_state(slow, "COMPLETED")

    failing = [t.submit("-o", "/dev/null", "--", "false", cwd=d) for _ in range(2)]
    for job in failing:
        t.wait_state(job, "FAILED")
    a, b = failing
    never = t.submit("-d", f"afterok:{a}?afterok:{b}", "--", "true", cwd=d)
    s = t.wait_state(never, "CANCELLED")
    t.check(s["reason"] == f"dependency never satisfied: afterok:{a} (job {a} ended FAILED); "
            f"afterok:{b} (job {b} ended FAILED)", s["reason"])
    one_left = t.submit("-d", f"afterok:{a}?afterany:{b}", "-o", "/dev/null", "--", "true",
                        cwd=d)
    t.wait_state(one_left, "COMPLETED")

    p = t.hpcq("submit", "-d", f"afterok:{a},afterok:{b}?singleton", "--", "true", rc=2)
    t.check(p.stderr.startswith("hpcq: --dependency: ") and p.stderr.count("\n") == 1 and
            "both ','" in p.stderr, p.stderr)


def test_array_with_throttle():
    d = t.workdir()
    p = t.hpcq("submit", "--json", "--array=0-3%1", "-o", "arr-%A_%a.out", "--", "sh", "-c",
               "echo $HPCQ_ARRAY_JOB_ID $HPCQ_ARRAY_TASK_ID $(date +%s.%N); sleep 0.3; "
               "date +%s.%N", cwd=d)
    made = json.loads(p.stdout)
    ids = made["ids"]
    t.check(made["count"] == 4 and ids == list(range(made["id"], made["id"] + 4)), f"{made}")
    for i in ids:
        t.wait_state(i, "COMPLETED")
    spans = []
    for index in range(4):
        with open(os.path.join(d, f"arr-{made['id']}_{index}.out")) as f:
            words = f.read().split()
        t.check(words[:2] == [str(made["id"]), str(index)], f"task {index}: {words}")
        spans.append((float(words[2]), float(words[3])))
    spans.sort()
    for a, b in zip(spans, spans[1:]):
        t.check(b[0] >= a[1], f"two tasks of a %1 array overlapped: {spans}")
    s = t.status(ids[2])
    t.check(s["array_job_id"] == ids[0] and s["array_task_id"] == 2, f"{s}")
    p = t.hpcq("submit", "--array=5-1", "--", "true", rc=2)
    t.check("--array: range '5-1' runs backwards" in p.stderr, p.stderr)


def test_an_array_is_one_job_to_wait_on_and_cancel():
    """`wait ID` and `cancel ID` act on every element of array ID (as
    scancel does), `ID_N` is an element wherever a job id is (`status ID` is
    the job ID, the first element), and a throttled element says why it
    waits."""
    d = t.workdir()
    gate = t.Gate(d)
    made = json.loads(t.hpcq("submit", "--json", "--array=0-2", "-o", "/dev/null", "--",
                             *gate.command, cwd=d).stdout)
    first = made["id"]
    s = t.status(f"{first}_2")
    t.check(s["id"] == first + 2 and s["array_task_id"] == 2, f"{first}_2 is {s}")
    p = t.hpcq("status", f"{first}_7", rc=None)
    t.check(p.returncode != 0 and f"no job {first}_7" in p.stderr, p.stderr)
    for i in made["ids"]:
        t.wait_state(i, "RUNNING")
    waiter = subprocess.Popen([t.HPCQ, "wait", str(first)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    t.hpcq("cancel", f"{first}_1")
    t.wait_state(first + 1, "CANCELLED")
    t.check(t.status(first)["state"] == "RUNNING" and t.status(first + 2)["state"] == "RUNNING",
            "cancelling one element touched the others")
    gate.open()
    t.wait_state(first + 2, "COMPLETED")
    out, err = waiter.communicate(timeout=60)
    # Waited for all three: one was cancelled, so not all completed.
    t.check(waiter.returncode == 1 and f"job {first + 1} ended CANCELLED" in err, err)

    throttled = json.loads(t.hpcq("submit", "--json", "--array=0-2%1", "--", "sleep", "300",
                                  cwd=d).stdout)
    t.wait_until("the throttle as the reason", lambda: "array throttle: at most 1 running"
                 in t.status(throttled["ids"][2])["reason"])
    t.hpcq("cancel", str(throttled["id"]))
    for i in throttled["ids"]:
        t.wait_state(i, "CANCELLED")


def test_reservations():
    d = t.workdir()
    p = t.hpcq("reserve", "create", "maint", "--nodes", "node1", "--duration", "1h",
               "--users", "hpcqtest", user="hpcqtest", rc=1)
    t.check("only root" in p.stderr, p.stderr)
    t.hpcq("reserve", "create", "maint", "--nodes", "node1", "--duration", "1h",
           "--users", "hpcqtest")
    listed = json.loads(t.hpcq("reserve", "list", "--json").stdout)
    t.check([r["name"] for r in listed] == ["maint"] and listed[0]["nodes"] == ["node1"],
            f"{listed}")
    p = t.hpcq("reserve", "create", "again", "--nodes", "node1", "--duration", "1h",
               "--users", "root", rc=1)
    t.check("overlaps reservation 'maint'" in p.stderr, p.stderr)
    # Others' work keeps off node1; the reservation's user may use it.
    jobs = [t.submit("-n", "1", "--", "sleep", "300", cwd=d) for _ in range(3)]
    for j in jobs[:2]:
        t.check(t.wait_state(j, "RUNNING")["nodes"] == ["node2"], "kept off the reserved node")
    t.wait_cycle_showing(DECISIONS, jobs[2])
    t.check(t.status(jobs[2])["state"] == "PENDING", "a third job waits rather than use node1")
    mine = t.submit("-n", "1", "-t", "10", "-o", "r-%j.out", "--", "true", user="hpcqtest", cwd=d)
    s = t.wait_state(mine, "COMPLETED", user="hpcqtest")
    t.check(s["nodes"] == ["node1"], f"the reservation's user runs there: {s['nodes']}")
    t.hpcq("reserve", "delete", "maint")
    t.check(t.wait_state(jobs[2], "RUNNING")["nodes"] == ["node1"], "node1 is free again")
    # A reservation in the future: a job that ends before it may still use the nodes.
    # node1 is busy with jobs[2] until its time limit (1 h): refused.
    p = t.hpcq("reserve", "create", "later", "--nodes", "node1", "--start", "now+30m",
               "--duration", "1h", "--users", "hpcqtest", rc=1)
    t.check("node node1 is busy during the reservation" in p.stderr, p.stderr)
    for j in jobs:
        t.hpcq("cancel", str(j))
        t.wait_state(j, "CANCELLED")
    t.hpcq("reserve", "create", "later", "--nodes", "node[1-2]", "--start", "now+1h",
           "--duration", "1h", "--users", "hpcqtest")
    short = t.submit("-n", "1", "-t", "30", "--", "true", cwd=d)
    t.wait_state(short, "COMPLETED")
    long = t.submit("-n", "1", "-t", "1:30:00", "--", "true", cwd=d)
    t.wait_cycle_showing(DECISIONS, long)
    t.check(t.status(long)["state"] == "PENDING", "a job that would overlap the window waits")
    t.hpcq("reserve", "delete", "later")
    t.wait_state(long, "COMPLETED")
    t.hpcq("reserve", "delete", "later", rc=1)


def test_node_lists_in_hostlist_form():
    """-w takes node[1-2]; queue and status show the nodes that way, like
    squeue; a malformed list is one line, exit 2."""
    d = t.workdir()
    gate = t.Gate(d)
    job = t.submit("-N", "2", "-n", "2", "-w", "node[1-2]", "--", *gate.command, cwd=d)
    t.wait_state(job, "RUNNING")
    t.check(t.status(job)["nodes"] == ["node1", "node2"], f"nodes {t.status(job)['nodes']}")
    row = [line for line in t.hpcq("queue").stdout.splitlines() if line.split()[:1] == [str(job)]]
    t.check(len(row) == 1 and row[0].split()[-1] == "node[1-2]", f"queue row {row}")
    t.check("NodeList=node[1-2]" in t.hpcq("status", str(job)).stdout, "status's NodeList")
    gate.open()
    t.wait_state(job, "COMPLETED")
    r = t.hpcq("submit", "-w", "node[2-1]", "--", "true", rc=2, cwd=d)
    t.check(r.stderr.strip() == "hpcq: --nodelist: bad node list 'node[2-1]': range '2-1' runs "
            "backwards (want NAME[,NAME...], or a hostlist: node[1-4,7])", r.stderr)
    # hostnames expands a list (a job's HPCQ_NODELIST by default), as
    # scontrol show hostnames.
    out = t.hpcq("hostnames", "n[08-10],gpu1").stdout
    t.check(out == "n08\nn09\nn10\ngpu1\n", f"hostnames: {out!r}")
    r = t.hpcq("hostnames", "n[1", rc=2)
    t.check(r.stderr.startswith("hpcq: hostnames: bad node list 'n[1'") and
            r.stderr.count("\n") == 1, r.stderr)
    r = t.hpcq("hostnames", rc=2)
    t.check(r.stderr == "hpcq: hostnames: give a node list, or run it in a job\n", r.stderr)


def test_exclude():
    """-x keeps a job off nodes even while they are idle, for a job and a
    step (as Slurm's -x); what cannot be met is refused at submit."""
    d = t.workdir()
    gate = t.Gate(d)
    full = t.submit("-n", "2", "-x", "node1", "--", *gate.command, cwd=d)
    s = t.wait_state(full, "RUNNING")
    t.check(s["nodes"] == ["node2"] and s["exclude"] == ["node1"], f"job {full}: {s}")
    t.check("ExcNodeList=node1" in t.hpcq("status", str(full)).stdout, "status's ExcNodeList")
    waits = t.submit("-n", "1", "-x", "node[1]", "--", "true", cwd=d)
    t.wait_cycle_showing(DECISIONS, waits)
    t.check(t.status(waits)["state"] == "PENDING", "a job kept off the idle node1 waits")
    gate.open()
    t.check(t.wait_state(waits, "COMPLETED")["nodes"] == ["node2"], "it ran on node2")
    for args, why in ((["-x", "node3"], "--exclude: unknown node 'node3'"),
                      (["-x", "node[1-2]"], "--exclude: no node is left to run on"),
                      (["-N", "2", "-x", "node1"], "--nodes: 2 nodes, --exclude leaves 1"),
                      (["-w", "node1", "-x", "node1"], "--exclude: no node is left to run on")):
        r = t.hpcq("submit", *args, "--", "true", rc=2, cwd=d)
        t.check(r.stderr.strip() == f"hpcq: {why}", f"{args}: {r.stderr!r}")
    with open(os.path.join(d, "steps.sh"), "w") as f:
        f.write("#!/bin/sh\n#HPCQ -N 2 -n 2\n"
                "hpcq run -x node1 -- sh -c 'echo step on $HPCQ_NODENAME'\n")
    batch = int(t.hpcq("batch", "-o", "steps-%j.out", "steps.sh", cwd=d).stdout)
    t.check(t.wait_state(batch, {"COMPLETED", "FAILED"})["state"] == "COMPLETED", "steps.sh")
    with open(os.path.join(d, f"steps-{batch}.out")) as f:
        out = f.read()
    t.check(out == "step on node2\n", f"the step's output: {out!r}")


t.main([test_queues_at_submit, test_a_queue_of_its_own_nodes_and_users, test_queues_summary,
        test_dependencies, test_singleton_and_any_of, test_array_with_throttle,
        test_an_array_is_one_job_to_wait_on_and_cancel, test_reservations,
        test_node_lists_in_hostlist_form, test_exclude])
