#!/usr/bin/env python3
"""Measured usage and job control (issue 22, items 6 and 7): a job that burns
a known amount of CPU and memory shows them (status --json total_cpu_s and
max_memory_bytes, history's TOTALCPU and MAXMEM), a batch job's steps too;
--signal SIG@SECONDS warns the tasks before the limit; hpcq requeue runs a
job again from the start; hpcq update lowers a running job's time limit
(a user may not raise it, root may)."""
import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2)

ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}
MB = 1 << 20

# 1.5 s of CPU and 200 MB touched, in one process.
BURN = ("import time\n"
        "x = bytearray(200 << 20)\n"
        "for i in range(0, len(x), 4096): x[i] = 1\n"
        "t = time.process_time()\n"
        "while time.process_time() - t < 1.5: pass\n")


def burn_here():
    """The CPU time (user + system) of one BURN run outside hpcq: at least
    the 1.5 s it spins, plus what this machine takes to fault in 200 MB."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", BURN], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def test_a_job_shows_the_cpu_and_memory_it_used():
    d = t.workdir()
    expected = 2 * burn_here()
    job = t.submit("-n", "2", "-o", "/dev/null", "--", sys.executable, "-c", BURN, cwd=d)
    s = t.wait_state(job, ENDED)
    t.check(s["state"] == "COMPLETED", f"job {s['state']}: {s['reason']}")
    # Two tasks: about twice what one took here.
    t.check(3.0 <= s["total_cpu_s"] and 0.6 * expected <= s["total_cpu_s"] <= 1.6 * expected,
            f"total_cpu_s {s['total_cpu_s']}, want about {expected:.2f}")
    t.check(200 * MB <= s["max_memory_bytes"] < 2048 * MB,
            f"max_memory_bytes {s['max_memory_bytes']}, want at least 200 MB")
    history = t.hpcq("history").stdout
    line = next(l for l in history.splitlines() if l.split()[0] == str(job))
    t.check("TOTALCPU" in history and "M" in line.split()[-1], f"history:\n{history}")


def test_a_batch_jobs_steps_are_measured_and_counted_in_the_job():
    d = t.workdir()
    script = os.path.join(d, "job.sh")
    with open(os.path.join(d, "burn.py"), "w") as f:
        f.write(BURN)
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\n#HPCQ -N 2 -n 2\nhpcq run -N 1 -- {sys.executable} {d}/burn.py\n")
    os.chmod(script, 0o755)
    job = int(t.hpcq("batch", script, cwd=d).stdout)
    s = t.wait_state(job, ENDED, timeout=60)
    t.check(s["state"] == "COMPLETED", f"job {s['state']}: {s['reason']}")
    step = s["steps"][0]
    expected = burn_here()
    t.check(1.5 <= step["total_cpu_s"] and 0.6 * expected <= step["total_cpu_s"] <= 1.6 * expected,
            f"the step's total_cpu_s {step['total_cpu_s']}, want about {expected:.2f}")
    t.check(step["max_memory_bytes"] >= 200 * MB, f"the step's memory {step['max_memory_bytes']}")
    t.check(s["total_cpu_s"] >= step["total_cpu_s"], f"the job's {s['total_cpu_s']} < its step's")
    t.check(s["max_memory_bytes"] >= 200 * MB, f"the job's memory {s['max_memory_bytes']}")


def test_stat_shows_a_running_jobs_use_now():
    d = t.workdir()
    gate = t.Gate(d)
    burn = (f"import os, time\nx = bytearray(100 << 20)\nfor i in range(0, len(x), 4096): x[i] = 1\n"
            f"t = time.process_time()\nwhile time.process_time() - t < 1.0: pass\n"
            f"while not os.path.exists({gate.path!r}): time.sleep(0.05)\n")
    job = t.submit("-N", "2", "-n", "2", "-o", "/dev/null", "--", sys.executable, "-c", burn, cwd=d)
    t.wait_state(job, "RUNNING")
    def burnt():
        nodes = json.loads(t.hpcq("stat", str(job), "--json").stdout)["nodes"]
        return nodes if all(n["answered"] and n["total_cpu_s"] >= 1.0 for n in nodes) else None
    nodes = t.wait_until("a second of CPU on each node", burnt)
    t.check(sorted(n["node"] for n in nodes) == ["node1", "node2"], f"stat: {nodes}")
    t.check(all(n["memory_bytes"] >= 100 * MB and n["max_memory_bytes"] >= n["memory_bytes"]
                for n in nodes), f"stat's memory: {nodes}")
    table = t.hpcq("stat", str(job)).stdout
    t.check("node1" in table and "(all)" in table, f"stat:\n{table}")
    gate.open()
    t.wait_state(job, ENDED)
    r = t.hpcq("stat", str(job), rc=1)
    t.check("not running" in r.stderr, r.stderr)


def test_stat_shows_each_running_step():
    """Like sstat: a batch job's running step has rows of its own in `hpcq
    stat JOB`, and `hpcq stat JOB.STEP` shows that step alone."""
    d = t.workdir()
    gate = t.Gate(d)
    burn = (f"import os, time\nx = bytearray(100 << 20)\nfor i in range(0, len(x), 4096): x[i] = 1\n"
            f"t = time.process_time()\nwhile time.process_time() - t < 1.0: pass\n"
            f"while not os.path.exists({gate.path!r}): time.sleep(0.05)\n")
    with open(os.path.join(d, "burn.py"), "w") as f:
        f.write(burn)
    script = os.path.join(d, "job.sh")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\n#HPCQ -N 2 -n 2\nhpcq run -N 2 -n 2 -- {sys.executable} {d}/burn.py\n")
    os.chmod(script, 0o755)
    job = int(t.hpcq("batch", script, cwd=d).stdout)

    def burnt():
        r = t.run([t.HPCQ, "stat", f"{job}.1", "--json"])
        if r.returncode != 0:
            return None  # the step has not started yet
        nodes = json.loads(r.stdout)["nodes"]
        return nodes if all(n["answered"] and n["total_cpu_s"] >= 1.0 for n in nodes) else None
    nodes = t.wait_until("a second of CPU in the step on each node", burnt)
    t.check(sorted(n["node"] for n in nodes) == ["node1", "node2"], f"stat {job}.1: {nodes}")
    t.check(all(n["memory_bytes"] >= 100 * MB and not n["steps"] for n in nodes),
            f"stat {job}.1's memory: {nodes}")
    whole = json.loads(t.hpcq("stat", str(job), "--json").stdout)["nodes"]
    for n in whole:
        steps = n["steps"]
        t.check([s["step"] for s in steps] == [1] and steps[0]["total_cpu_s"] >= 1.0
                and n["total_cpu_s"] >= 1.0, f"stat {job} on {n['node']}: {n}")
    table = t.hpcq("stat", str(job)).stdout
    t.check(table.count(f"{job}.1 ") == 2, f"stat:\n{table}")
    r = t.hpcq("stat", f"{job}.7", rc=1)
    t.check("has no step 7" in r.stderr, r.stderr)
    gate.open()
    s = t.wait_state(job, ENDED, timeout=60)
    t.check(s["state"] == "COMPLETED", f"job {s['state']}: {s['reason']}")


def test_signal_before_the_time_limit():
    started = time.monotonic()
    r = t.run([t.HPCQ, "run", "-t", "00:00:20", "--signal", "USR1@15", "--", "sh", "-c",
               'trap "echo warned; exit 0" USR1; while :; do sleep 0.1; done'])
    took = time.monotonic() - started
    t.check(r.returncode == 0 and r.stdout == "warned\n", f"exit {r.returncode}: {r}")
    t.check(3 <= took < 15, f"warned after {took:.1f} s, want about 5 (20 s limit, 15 s before)")
    r = t.hpcq("submit", "--signal", "STOP@10", "--", "true", rc=2)
    t.check("--signal" in r.stderr and r.stderr.count("\n") == 1, r.stderr)
    r = t.hpcq("submit", "--signal", "USR1@x", "--", "true", rc=2)
    t.check("1..65535 seconds" in r.stderr, r.stderr)


def test_requeue_runs_a_job_again_from_the_start():
    d = t.workdir()
    out = os.path.join(d, "count.out")
    job = t.submit("-o", out, "--", "sh", "-c", t.COUNTER, cwd=d)
    t.wait_state(job, "RUNNING")
    t.wait_count(out, 3)
    t.hpcq("requeue", str(job))
    t.wait_until("the requeued run", lambda: t.status(job)["requeue_count"] == 1)
    t.wait_state(job, "RUNNING")
    t.wait_until("a count from 1 again", lambda: t.counts(out).count(2) == 2)
    c = t.counts(out)
    restart = c.index(1, 1)
    t.check(c[:restart] == list(range(1, restart + 1)) and c[restart:restart + 2] == [1, 2],
            f"counts: {c}")
    r = t.hpcq("requeue", "999999", rc=1)
    t.check("no job 999999" in r.stderr, r.stderr)
    t.hpcq("cancel", str(job))
    t.wait_state(job, ENDED)
    r = t.hpcq("requeue", str(job), rc=1)
    t.check("only running jobs" in r.stderr, r.stderr)


def test_update_lowers_a_running_jobs_time_limit():
    user = "hpcqtest"
    t.ensure_user(user)
    d = t.workdir()
    job = t.submit("-t", "10:00", "-o", "/dev/null", "--", "sleep", "300", user=user, cwd=d)
    t.wait_state(job, "RUNNING", user=user)
    r = t.hpcq("update", str(job), "-t", "20:00", user=user, rc=1)
    t.check("only root may raise" in r.stderr, f"a user raising: {r.stderr!r}")
    t.hpcq("update", str(job), "-t", "30:00")  # root may
    t.check(t.status(job)["time_limit_s"] == 1800, "root's raise did not hold")
    started = time.monotonic()
    t.hpcq("update", str(job), "-t", "00:00:02", user=user)
    s = t.wait_state(job, ENDED, timeout=30)
    t.check(s["state"] == "TIMEOUT", f"job {s['state']} after its limit was lowered")
    t.check(time.monotonic() - started < 20, "the lowered limit did not end it")
    r = t.hpcq("update", str(job), "-t", "5", rc=1)
    t.check("already ended" in r.stderr, r.stderr)
    r = t.hpcq("update", str(job), "-t", "soon", rc=2)
    t.check("--time-limit" in r.stderr, r.stderr)


t.main([test_a_job_shows_the_cpu_and_memory_it_used,
        test_a_batch_jobs_steps_are_measured_and_counted_in_the_job,
        test_stat_shows_a_running_jobs_use_now, test_stat_shows_each_running_step,
        test_signal_before_the_time_limit, test_requeue_runs_a_job_again_from_the_start,
        test_update_lowers_a_running_jobs_time_limit])
