#!/usr/bin/env python3
"""cgroup v2 past a job's launch (issue 26). Meant for the guest of
run_guest.py (the unified hierarchy alone); elsewhere it skips, saying why.

- a split job (two workers) checkpointed, stopped and released is restored
  as it was launched: its shell in the job's `shell` leaf, each task in its
  worker's cgroup on its worker's CPU, nothing in the job's cgroup itself,
  and its tasks count on from where they were;
- a batch job restored the same way runs a step afterwards (a step's cgroup
  is a child of the job's, which v2 allows only while the job's own
  processes sit in a leaf);
- an agent started in a cgroup of its own (what systemd's Delegate=yes in
  hpcq-agent.service gives it) moves into that cgroup's leaf `agent` and
  makes its jobs' cgroups below it, not at the root, and removes them when
  the jobs end.
"""
import glob
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "integration"))
import hpcqtest as t  # noqa: E402

CGROUP2 = "/sys/fs/cgroup"
UNIT = "/hpcq-agent-g0003.service"  # the agent's cgroup, as systemd would name it
CONFIG = "/tmp/hpcq-g0003.toml"


def why_not_here():
    with open("/proc/mounts") as f:
        if f" {CGROUP2} cgroup2 " not in f.read():
            return f"{CGROUP2} is not cgroup2 (this test is for the guest of tests/guest/run_guest.py)"
    if os.cpu_count() < 2:
        return "one CPU here; a job of two workers needs two"
    return None


if not os.environ.get("HPCQ_SOCKET"):
    why = why_not_here()
    if why:
        print(f"SKIP: {why}")
        print("0 passed, 0 failed, 1 skipped")
        sys.exit(77)
    with open(CONFIG, "w") as f:
        f.write('[sched.granularity]\npolicy = "granularity"\n')

t.within_cluster(agents=1, fanout=2, topology="host", extra=("--config", CONFIG))

COUNT = 'i=0; while :; do i=$((i+1)); echo "$HPCQ_TASK_RANK $i"; sleep 0.2; done'

BATCH = """#!/bin/bash
#HPCQ -n 1
#HPCQ -o out-%j.txt
i=0
while [ ! -e GO ]; do i=$((i+1)); echo "tick $i"; sleep 0.2; done
echo "shell=$(cut -d: -f3- /proc/self/cgroup)"
hpcq run -n 1 sh -c 'echo "step=$(cut -d: -f3- /proc/self/cgroup)"'
"""


def read(path):
    with open(path) as f:
        return f.read().strip()


def instance():
    return t.cgroup_instance(os.path.join(t.cluster_dir(), "agents")) + "-rank_1"


def job_cgroup(j, base=""):
    return f"{CGROUP2}{base}/hpcq/{instance()}/job-{j}"


def procs(cgroup):
    return [int(p) for p in read(cgroup + "/cgroup.procs").split()]


def stop_and_release(j):
    t.hpcq("checkpoint", str(j), "--then", "stop")
    s = t.wait_state(j, "PENDING")
    t.check(s["held"] and s["restore_from"], f"job {j} after its checkpoint: {s}")
    t.hpcq("release", str(j))
    s = t.wait_state(j, "RUNNING", timeout=120)
    t.check(s["checkpoints"][-1]["restored"] is True, f"job {j}: {s['checkpoints']}")


def wait_counting(out, at, ranks=(0, 1)):
    t.wait_until(f"tasks {ranks} counting past {at}",
                 lambda: all(t.counts_by_task(out).get(r, [0])[-1] >= at.get(r, 0) + 3
                             for r in ranks),
                 timeout=60)


@t.needs_checkpoint
def test_split_job_is_restored_into_its_workers():
    d = t.workdir()
    j = t.submit("-n", "2", "--profile", "cpu", "--workers", "2", "-o", "count-%j.out", "--", "sh", "-c", COUNT, cwd=d)
    t.check(len(t.wait_state(j, "RUNNING")["workers"]) == 2, f"job {j} is not split in two")
    out = os.path.join(d, f"count-{j}.out")
    try:
        wait_counting(out, {})
        stop_and_release(j)
        wait_counting(out, {r: c[-1] for r, c in t.counts_by_task(out).items()})
        cg = job_cgroup(j)
        t.check(procs(cg) == [], f"processes in {cg} itself: {procs(cg)}")
        t.check(len(procs(cg + "/shell")) == 1, f"{cg}/shell: {procs(cg + '/shell')}")
        workers = sorted(glob.glob(cg + "/worker-*"))
        t.check(len(workers) == 2, f"worker cgroups {workers}")
        cpus = [read(w + "/cpuset.cpus.effective") for w in workers]
        t.check(len(set(cpus)) == 2 and all(len(t.parse_list(c)) == 1 for c in cpus),
                f"the workers' cpus {cpus}")
        for w, c in zip(workers, cpus):
            t.check(procs(w), f"{w}: no task in it")
            for pid in procs(w):
                allowed = [line.split()[1] for line in open(f"/proc/{pid}/status")
                           if line.startswith("Cpus_allowed_list")][0]
                t.check(t.parse_list(allowed) == t.parse_list(c),
                        f"process {pid} of {w} may run on {allowed}, its worker has {c}")
    finally:
        t.run([t.HPCQ, "cancel", str(j)])
    t.wait_state(j, "CANCELLED")
    for rank, c in t.counts_by_task(out).items():
        t.check(c == list(range(1, len(c) + 1)), f"task {rank}: not contiguous: {c[-5:]}")
    t.wait_until("the job's cgroups removed", lambda: not os.path.exists(job_cgroup(j)))


@t.needs_checkpoint
def test_restored_batch_job_runs_a_step():
    d = t.workdir()
    with open(os.path.join(d, "batch.sh"), "w") as f:
        f.write(BATCH)
    j = int(t.hpcq("batch", "batch.sh", cwd=d).stdout)
    t.wait_state(j, "RUNNING")
    out = os.path.join(d, f"out-{j}.txt")
    t.wait_until("the script ticking", lambda: os.path.exists(out) and "tick 3" in read(out))
    stop_and_release(j)
    t.check(procs(job_cgroup(j)) == [], "processes in the restored job's own cgroup")
    t.Gate(d, "GO").open()
    t.hpcq("wait", str(j), rc=None)
    s = t.status(j)
    text = read(out)
    t.check(s["state"] == "COMPLETED", f"job {j}: {s['state']} {s.get('reason')}; output: {text}")
    job = job_cgroup(j)[len(CGROUP2):]
    t.check(f"shell={job}/shell\n" in text, f"the restored script is not in {job}/shell: {text}")
    t.check(f"step={job}/step-" in text, f"no step in {job}/step-N after the restore: {text}")
    t.wait_until("the job's cgroups removed", lambda: not os.path.exists(job_cgroup(j)))


def test_jobs_go_under_the_agents_own_cgroup():
    """Last: it restarts the cluster's only agent in a cgroup of its own."""
    pid = t.agent_pid(1)
    argv = open(f"/proc/{pid}/cmdline").read().split("\0")[:-1]
    os.kill(pid, signal.SIGTERM)
    t.wait_until("the agent gone", lambda: not os.path.exists(f"/proc/{pid}/cmdline") or
                 read(f"/proc/{pid}/status").find("State:\tZ") >= 0)
    unit = CGROUP2 + UNIT
    os.mkdir(unit)

    def into_unit():
        with open(unit + "/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))

    log = open(os.path.join(t.cluster_dir(), "logs", "agent-1.log"), "a")
    agent = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True,
                             preexec_fn=into_unit)
    try:
        t.wait_until("the agent settled in its cgroup's leaf",
                     lambda: read(f"/proc/{agent.pid}/cgroup") == f"0::{UNIT}/agent")
        d = t.workdir()
        deadline = time.monotonic() + 30
        while True:  # until the restarted agent is up again
            j = t.submit("-n", "1", "-o", "out-%j.txt", "--", "sh", "-c",
                         'echo "cgroup=$(cut -d: -f3- /proc/self/cgroup)"', cwd=d)
            s = t.wait_state(j, {"COMPLETED", "FAILED", "NODE_FAIL"}, timeout=60)
            if s["state"] == "COMPLETED" or time.monotonic() > deadline:
                break
        out = read(os.path.join(d, f"out-{j}.txt"))
        t.check(s["state"] == "COMPLETED", f"job {j}: {s}; output {out}")
        want = job_cgroup(j, UNIT)[len(CGROUP2):]
        t.check(out == f"cgroup={want}", f"the task ran in {out}, not {want}")
        enabled = read(unit + "/cgroup.subtree_control").split()
        t.check({"cpuset", "memory", "pids"} <= set(enabled), f"{UNIT} hands down {enabled}")
        t.wait_until("the job's cgroup removed", lambda: not os.path.exists(job_cgroup(j, UNIT)))
        t.check(not glob.glob(f"{CGROUP2}/hpcq/{instance()}/job-*"), "job cgroups at the root")
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=30)
        log.close()
        left = sorted(glob.glob(f"{unit}/hpcq/*/job-*"))
        for d in (f"{unit}/hpcq/{instance()}", f"{unit}/hpcq", f"{unit}/agent", unit):
            try:
                os.rmdir(d)
            except OSError:
                pass
    t.check(not left, f"job cgroups left under {UNIT}: {left}")


t.main([test_split_job_is_restored_into_its_workers, test_restored_batch_job_runs_a_step,
        test_jobs_go_under_the_agents_own_cgroup])
