#!/usr/bin/env python3
"""Job steps (issue 22): hpcq run inside a batch script launches steps on
the job's nodes and cores, whose output lands in the job's output file; two
concurrent steps get disjoint cores and a third waits; a step is signalled,
cancelled and attached to from outside by JOB.STEP; steps are recorded
(status --json, history --steps) and survive a kill -9 of hpcqd; hpcq run
refuses to be a step of what is not an allocation."""
import json
import os
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2)

ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}


def batch(d, body, name="job.sh"):
    script = os.path.join(d, name)
    with open(script, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(script, 0o755)
    return int(t.hpcq("batch", script, cwd=d).stdout)


def output(d, job):
    with open(os.path.join(d, f"hpcq-{job}.out")) as f:
        return f.read()


def read_lines(stream, n):
    return [stream.readline().rstrip("\n") for _ in range(n)]


def steps_of(job):
    return t.status(job)["steps"]


def wait_step(job, step, states, timeout=30):
    states = {states} if isinstance(states, str) else set(states)
    def reached():
        s = steps_of(job)
        return s[step - 1] if len(s) >= step and s[step - 1]["state"] in states else None
    return t.wait_until(f"job {job} step {step} {states}", reached, timeout)


def test_a_batch_script_runs_steps_into_its_output_file():
    d = t.workdir()
    job = batch(d, "#HPCQ -N 2 -n 2\n"
                   "hpcq run -l -- sh -c 'echo one on $HPCQ_NODENAME of $HPCQ_NNODES'\n"
                   "echo rc1=$?\n"
                   "hpcq run -N 1 -- sh -c 'echo two on $HPCQ_NODENAME; exit 3'\n"
                   "echo rc2=$?\n")
    s = t.wait_state(job, ENDED)
    text = output(d, job)
    t.check(s["state"] == "COMPLETED", f"job {s['state']}: {s['reason']}\n{text}")
    lines = text.splitlines()
    t.check(sorted(lines[:2]) == ["0: one on node1 of 2", "1: one on node2 of 2"], text)
    # hpcq run's own line about the failed step goes to its stderr: the same file.
    t.check(lines[2:] == ["rc1=0", "two on node1",
                          f"hpcq: job {job} step 2 FAILED: node1: task 0: exited with code 3",
                          "rc2=3"], text)
    steps = s["steps"]
    t.check([x["state"] for x in steps] == ["COMPLETED", "FAILED"], f"steps {steps}")
    t.check(steps[0]["nodes"] == ["node1", "node2"] and steps[1]["nodes"] == ["node1"],
            f"steps' nodes {steps}")
    t.check(steps[1]["exit_code"] == 3 and "exited with code 3" in steps[1]["reason"], steps[1])
    history = t.hpcq("history", "--steps").stdout
    t.check(f"{job}.1 " in history and f"{job}.2 " in history, f"history --steps:\n{history}")


def test_concurrent_steps_get_disjoint_cores():
    d = t.workdir()
    gate = t.Gate(d)
    wait = f"while [ ! -e {gate.path} ]; do sleep 0.05; done"
    job = batch(d, "#HPCQ -N 1 -n 4\n"
                   f"hpcq run -n 2 -- sh -c 'echo A $HPCQ_CPUS; {wait}' &\n"
                   f"hpcq run -n 2 -- sh -c 'echo B $HPCQ_CPUS; {wait}' &\n"
                   # C once A and B run (their lines are in this job's file).
                   "out=$HPCQ_SUBMIT_DIR/hpcq-$HPCQ_JOB_ID.out\n"
                   "until grep -q '^A' $out && grep -q '^B' $out; do sleep 0.05; done\n"
                   "hpcq run -n 1 -- sh -c 'echo C $HPCQ_CPUS' &\n"
                   "wait\n")
    wait_step(job, 1, "RUNNING")
    wait_step(job, 2, "RUNNING")
    third = wait_step(job, 3, "PENDING")  # its cores are the first two's
    t.check(third["nodes"] == [], f"a waiting step has nodes: {third}")
    gate.open()
    s = t.wait_state(job, ENDED)
    text = output(d, job)
    t.check(s["state"] == "COMPLETED", f"job {s['state']}\n{text}")
    cpus = {l.split()[0]: set(l.split()[1].split("-")) for l in text.splitlines() if l[:1] in "ABC"}
    t.check(len(cpus) == 3 and not cpus["A"] & cpus["B"], f"steps' cores: {text}")
    steps = s["steps"]
    t.check(steps[2]["start"] >= min(steps[0]["end"], steps[1]["end"]),
            f"the third step started before cores were free: {steps}")


def test_a_step_is_signalled_cancelled_and_attached_from_outside():
    d = t.workdir()
    job = batch(d, "#HPCQ -N 2 -n 2\n"
                   "hpcq run -- sh -c 'trap \"echo got INT; exit 4\" INT; echo ready; "
                   "while :; do sleep 0.1; done'\n"
                   "echo rc1=$?\n"
                   "hpcq run -- sh -c 'echo tick; while :; do sleep 0.1; done'\n"
                   "echo rc2=$?\n")
    wait_step(job, 1, "RUNNING")
    t.wait_until("step 1's ready lines", lambda: output(d, job).count("ready") == 2)
    # Two clients attached to the step from its start, then SIGINT to its tasks.
    clients = [subprocess.Popen([t.HPCQ, "attach", "--all", f"{job}.1"], stdout=subprocess.PIPE,
                                text=True) for _ in range(2)]
    for c in clients:
        t.check(read_lines(c.stdout, 2) == ["ready", "ready"], "attach --all missed the start")
    t.hpcq("signal", f"{job}.1", "INT")
    for c in clients:
        out, _ = c.communicate(timeout=30)
        t.check(out.count("got INT") == 2, f"attach {job}.1 after the signal: {out!r}")
        t.check(c.returncode == 4, f"attach's exit {c.returncode}, the step's is 4")
    wait_step(job, 2, "RUNNING")
    t.hpcq("cancel", f"{job}.2")
    step = wait_step(job, 2, ENDED)
    t.check(step["state"] == "CANCELLED" and "cancelled by" in step["reason"], f"step 2 {step}")
    s = t.wait_state(job, ENDED)
    text = output(d, job)
    t.check(s["state"] == "COMPLETED" and "rc1=4" in text and "rc2=" in text,
            f"job {s['state']}\n{text}")


def test_steps_survive_a_leader_restart():
    d = t.workdir()
    gate = t.Gate(d)
    job = batch(d, "#HPCQ -N 2 -n 2\n"
                   f"hpcq run -- sh -c 'echo before; while [ ! -e {gate.path} ]; do sleep 0.05; "
                   "done; echo after'\n"
                   "echo rc=$?\n")
    wait_step(job, 1, "RUNNING")
    t.wait_until("the step's first lines", lambda: output(d, job).count("before") == 2)
    cmdline = t.kill_leader()
    t.restart_leader(cmdline)
    step = wait_step(job, 1, "RUNNING")
    t.check(step["nodes"] == ["node1", "node2"], f"the step after the restart: {step}")
    gate.open()
    s = t.wait_state(job, ENDED)
    text = output(d, job)
    t.check(s["state"] == "COMPLETED" and s["steps"][0]["state"] == "COMPLETED",
            f"job {s['state']}, step {s['steps']}\n{text}")
    t.check(text.count("after") == 2 and "rc=0" in text, f"the step's output and exit: {text}")


def test_a_pending_step_starts_after_a_restart_that_freed_its_cores():
    """The leader stored a step's end and died before it started the step
    that waited for those cores: once restarted, it starts that step
    without waiting for another step to end."""
    d = t.workdir()
    gate = t.Gate(d)
    started = os.path.join(d, "first-started")
    job = batch(d, "#HPCQ -N 1 -n 2\n"
                   f"hpcq run -n 2 -- sh -c 'touch {started}; "
                   f"while [ ! -e {gate.path} ]; do sleep 0.05; done' &\n"
                   f"until [ -e {started} ]; do sleep 0.05; done\n"
                   "hpcq run -n 1 -- echo second &\n"
                   "wait\n")
    wait_step(job, 1, "RUNNING")
    wait_step(job, 2, "PENDING")  # the first holds both cores
    cmdline = t.kill_leader()
    # What the store holds in that window: the first step ended, the
    # second not started (its task still runs on the node until the gate).
    db = sqlite3.connect(os.path.join(t.cluster_dir(), "leader", "hpcq.db"))
    (value,) = db.execute("SELECT value FROM records WHERE kind = 'step' AND key = ?",
                          (f"{job}/1",)).fetchone()
    first = json.loads(value)
    first.update(state="COMPLETED", runningOn=[])
    db.execute("UPDATE records SET value = ? WHERE kind = 'step' AND key = ?",
               (json.dumps(first), f"{job}/1"))
    db.commit()
    db.close()
    t.restart_leader(cmdline)
    # No step ends now (the gate is shut): the second must start on its own.
    wait_step(job, 2, {"RUNNING", "COMPLETED"})
    gate.open()
    s = t.wait_state(job, ENDED)
    t.check(s["steps"][1]["state"] == "COMPLETED" and "second" in output(d, job),
            f"job {s['state']}, steps {s['steps']}\n{output(d, job)}")


def test_steps_only_inside_allocations():
    d = t.workdir()
    plain = t.submit("-o", "/dev/null", "--", "sleep", "30", cwd=d)
    t.wait_state(plain, "RUNNING")
    env = dict(os.environ, HPCQ_JOB_ID=str(plain))
    r = t.run([t.HPCQ, "run", "--", "true"], env=env)
    t.check(r.returncode == 1 and "not an allocation" in r.stderr, f"{r.returncode} {r.stderr!r}")
    t.hpcq("cancel", str(plain))
    gate = t.Gate(d)
    job = batch(d, f"#HPCQ -N 1 -n 2\nhpcq run -- sh -c 'while [ ! -e {gate.path} ]; do sleep 0.05; "
                   "done'\n")
    wait_step(job, 1, "RUNNING")
    env = dict(os.environ, HPCQ_JOB_ID=str(job))
    r = t.run([t.HPCQ, "run", "--immediate", "--", "true"], env=env)
    t.check(r.returncode == 1 and "held by other steps" in r.stderr, f"--immediate: {r.stderr!r}")
    r = t.run([t.HPCQ, "run", "-n", "3", "--", "true"], env=env)
    t.check(r.returncode == 2 and "do not fit" in r.stderr, f"too big: {r.stderr!r}")
    r = t.run([t.HPCQ, "run", "--overlap", "--", "echo", "shared"], env=env)
    t.check(r.returncode == 0 and r.stdout.count("shared") == 2, f"--overlap: {r}")
    r = t.hpcq("cancel", f"{job}.9", rc=1)
    t.check("has no step 9" in r.stderr, r.stderr)
    r = t.hpcq("submit", "--overlap", "--", "true", rc=2)
    t.check("only for hpcq run" in r.stderr, r.stderr)
    gate.open()
    t.wait_state(job, ENDED)


t.main([test_a_batch_script_runs_steps_into_its_output_file,
        test_concurrent_steps_get_disjoint_cores,
        test_a_step_is_signalled_cancelled_and_attached_from_outside,
        test_steps_survive_a_leader_restart,
        test_a_pending_step_starts_after_a_restart_that_freed_its_cores,
        test_steps_only_inside_allocations])
