#!/usr/bin/env python3
"""hpcq run, batch, attach and signal (issue 22): run's tasks on two nodes
print while the caller reads, its exit status is the highest task's, Ctrl-C
once interrupts the tasks and twice cancels the job; the same in an --image
(each node's tasks in a container); a batch script runs once,
on its allocation's first node, and its job ends with it; two clients attach
to one job's output; signals reach the tasks; bad input is refused with one
line."""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2)

ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}


def start_run(*args, cwd=None):
    return subprocess.Popen([t.HPCQ, "run", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd)


def read_lines(stream, n, timeout=30):
    """The next n lines of a pipe, read as they come."""
    lines = []
    deadline = time.monotonic() + timeout
    while len(lines) < n:
        t.check(time.monotonic() < deadline, f"only {lines} after {timeout}s")
        line = stream.readline()
        t.check(line != "", f"the output ended after {lines}")
        lines.append(line.rstrip("\n"))
    return lines


def running_job():
    """The id of the one running job (hpcq run does not print it)."""
    def find():
        jobs = json.loads(t.hpcq("queue", "--json").stdout)
        running = [j["id"] for j in jobs if j["state"] == "RUNNING"]
        return running[0] if len(running) == 1 else None
    return t.wait_until("a running job", find)


def test_run_output_comes_while_the_tasks_run():
    # Two nodes, one task each, printing once a second for 4 seconds.
    p = start_run("-N", "2", "-n", "2", "-l", "--", "sh", "-c",
                  'for i in 1 2 3 4; do echo "$HPCQ_NODENAME tick $i"; sleep 1; done')
    try:
        first = read_lines(p.stdout, 2)
        t.check(p.poll() is None, "hpcq run ended before its first lines were read")
        t.check(sorted(first) == ["0: node1 tick 1", "1: node2 tick 1"],
                f"first lines: {first}")
        rest = p.stdout.read().splitlines()
        t.check(p.wait(timeout=30) == 0, f"exit {p.returncode}: {p.stderr.read()}")
        t.check(sorted(rest) == sorted(f"{r}: node{r + 1} tick {i}" for r in (0, 1)
                                       for i in (2, 3, 4)), f"the rest: {rest}")
    finally:
        p.kill()


def test_run_exit_status_and_streams():
    r = t.run([t.HPCQ, "run", "-n", "3", "--", "sh", "-c",
               'echo out $HPCQ_TASK_RANK; echo err $HPCQ_TASK_RANK >&2; exit $((HPCQ_TASK_RANK * 2))'])
    t.check(r.returncode == 4, f"exit {r.returncode}, want 4 (the highest task's)")
    t.check(sorted(r.stdout.split("\n")[:3]) == ["out 0", "out 1", "out 2"], f"stdout {r.stdout!r}")
    t.check("err 0" in r.stderr and "err 2" in r.stderr and "out" not in r.stderr,
            f"stderr {r.stderr!r}")
    t.check("FAILED" in r.stderr and "exited with code 4" in r.stderr, f"stderr {r.stderr!r}")
    r = t.run([t.HPCQ, "run", "--", "sh", "-c", "kill -TERM $$"])
    t.check(r.returncode == 128 + signal.SIGTERM, f"a task killed by SIGTERM: exit {r.returncode}")
    r = t.run([t.HPCQ, "run", "-N", "2", "--", "true"])
    t.check(r.returncode == 0 and r.stdout == "" and r.stderr == "", f"true: {r}")


def test_stdin_goes_to_task_0():
    r = t.run([t.HPCQ, "run", "-N", "2", "-n", "2", "-l", "--", "cat"], input="hello\nworld\n")
    t.check(r.returncode == 0 and r.stdout == "0: hello\n0: world\n", f"cat: {r}")
    r = t.run([t.HPCQ, "run", "--", "wc", "-c"], input="x" * 100000)
    t.check(r.returncode == 0 and r.stdout.strip() == "100000", f"wc -c: {r}")


def test_ctrl_c_once_interrupts_twice_cancels():
    # Each task ends once both have had the signal: the first to end fails
    # the job, which would end the other's tasks, maybe before its trap ran.
    marks = t.workdir()
    p = start_run("-N", "2", "-n", "2", "--", "sh", "-c",
                  f'trap "echo got INT; touch {marks}/$HPCQ_TASK_RANK; '
                  f'while [ ! -e {marks}/0 ] || [ ! -e {marks}/1 ]; do sleep 0.05; done; exit 5" INT; '
                  'echo ready; while :; do sleep 0.1; done')
    try:
        read_lines(p.stdout, 2)
        p.send_signal(signal.SIGINT)
        rest = p.stdout.read()
        t.check(p.wait(timeout=30) == 5, f"exit {p.returncode}: {p.stderr.read()}")
        t.check(rest.count("got INT") == 2, f"the tasks' output after Ctrl-C: {rest!r}")
    finally:
        p.kill()
    # Tasks that ignore SIGINT: the second Ctrl-C within a second cancels the job.
    p = start_run("-n", "2", "--", "sh", "-c",
                  'trap "echo ignored" INT; echo ready; while :; do sleep 0.1; done')
    try:
        read_lines(p.stdout, 2)
        job = running_job()
        p.send_signal(signal.SIGINT)
        time.sleep(0.2)  # two key presses, not one
        p.send_signal(signal.SIGINT)
        p.wait(timeout=30)
        s = t.wait_state(job, ENDED)
        t.check(s["state"] == "CANCELLED", f"job {s['state']} after Ctrl-C twice")
        t.check(p.returncode != 0, "hpcq run exited 0 for a cancelled job")
    finally:
        p.kill()


def test_run_in_an_image():
    # Each node's tasks in a runc container of a busybox root: their output
    # comes live through the container's shell, input reaches task 0, Ctrl-C
    # reaches each task once (runc passes it to the container's shell, which
    # passes it on), and the exit status is the task's. (Both end 0 after
    # their trap: a failing node would end the other's tasks, maybe before
    # its trap printed.)
    root = t.busybox_rootfs()
    task = ('trap "echo got INT; touch /tmp/stop" INT; '
            'test -e /etc/debian_version && echo host || echo image; '
            'if [ $HPCQ_TASK_RANK = 0 ]; then read line; echo "input $line"; fi; '
            'echo ready; while [ ! -e /tmp/stop ]; do sleep 0.1; done; '
            'exit 0')
    p = subprocess.Popen([t.HPCQ, "run", "-N", "2", "-n", "2", "-l", "--image", root, "--",
                          "sh", "-c", task],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=t.workdir())
    try:
        first = read_lines(p.stdout, 3)
        t.check(sorted(first) == ["0: image", "1: image", "1: ready"], f"first lines: {first}")
        t.check(p.poll() is None, "hpcq run ended before its first lines were read")
        p.stdin.write("hello\n")
        p.stdin.flush()
        t.check(read_lines(p.stdout, 2) == ["0: input hello", "0: ready"], "task 0's input")
        p.send_signal(signal.SIGINT)
        rest = p.stdout.read()
        t.check(p.wait(timeout=30) == 0, f"exit {p.returncode}: {p.stderr.read()}")
        t.check(sorted(rest.splitlines()) == ["0: got INT", "1: got INT"],
                f"after Ctrl-C, each task's trap once: {rest!r}")
    finally:
        p.kill()
    r = t.run([t.HPCQ, "run", "--image", root, "--", "sh", "-c", "exit 3"], cwd=t.workdir())
    t.check(r.returncode == 3, f"a task's exit 3 in an image: {r.returncode} {r.stderr!r}")


def test_batch_script_runs_once_on_the_first_node():
    d = t.workdir()
    script = os.path.join(d, "job.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n#HPCQ -N 2 -n 4\n"
                'echo "once on $HPCQ_NODENAME of $HPCQ_NODELIST nnodes=$HPCQ_NNODES '
                'ntasks=$HPCQ_NTASKS rank=$HPCQ_TASK_RANK"\nexit ${1:-0}\n')
    os.chmod(script, 0o755)
    for code, state in ((0, "COMPLETED"), (3, "FAILED")):
        started = time.monotonic()
        job = int(t.hpcq("batch", script, str(code), cwd=d).stdout)
        s = t.wait_state(job, ENDED, timeout=30)
        t.check(s["state"] == state and s["exit_code"] == code,
                f"batch exit {code}: {s['state']} {s['exit_code']} {s['reason']}")
        t.check(time.monotonic() - started < 20, "the job did not end with its script")
        with open(os.path.join(d, f"hpcq-{job}.out")) as f:
            lines = f.read().splitlines()
        t.check(len(lines) == 1, f"the script ran {len(lines)} times: {lines}")
        words = dict(w.split("=") for w in lines[0].split() if "=" in w)
        node, nodelist = lines[0].split()[2], lines[0].split()[4]
        names = t.hpcq("hostnames", nodelist).stdout.split()
        t.check(node == names[0] and len(names) == 2, f"not on the first of two nodes: {lines[0]}")
        t.check(words == {"nnodes": "2", "ntasks": "4", "rank": "0"}, f"environment: {lines[0]}")
    r = t.hpcq("batch", "--", "true", rc=2)
    t.check("not a script" in r.stderr and r.stderr.count("\n") == 1, f"batch true: {r.stderr!r}")


def test_attach_from_two_clients():
    p = start_run("-n", "1", "--", "sh", "-c",
                  'for i in 1 2 3 4 5 6; do echo line $i; sleep 0.5; done')
    try:
        read_lines(p.stdout, 1)
        job = str(running_job())
        clients = [subprocess.Popen([t.HPCQ, "attach", *args, job], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
                   for args in (["--all"], ["--all", "-l"], [])]
        outs = [c.communicate(timeout=30) for c in clients]
        for c, (out, err) in zip(clients, outs):
            t.check(c.returncode == 0, f"attach exit {c.returncode}: {err}")
        want = [f"line {i}" for i in range(1, 7)]
        t.check(outs[0][0].splitlines() == want, f"attach --all: {outs[0][0]!r}")
        t.check(outs[1][0].splitlines() == ["0: " + w for w in want], f"-l: {outs[1][0]!r}")
        later = outs[2][0].splitlines()
        t.check("line 1" not in later and later and later == want[-len(later):],
                f"attach from now: {later}")
        t.check(p.wait(timeout=30) == 0, "hpcq run failed")
    finally:
        p.kill()
    d = t.workdir()
    plain = t.submit("-o", "/dev/null", "--", "sleep", "30", cwd=d)
    t.wait_state(plain, "RUNNING")
    r = t.hpcq("attach", str(plain), rc=1)
    t.check("writes its output to files" in r.stderr, f"attach to a file job: {r.stderr!r}")
    t.hpcq("cancel", str(plain))


def test_signal_reaches_the_tasks():
    p = start_run("-N", "2", "-n", "2", "--", "sh", "-c",
                  'trap "echo got USR1" USR1; echo ready; i=0; '
                  'while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done')
    try:
        read_lines(p.stdout, 2)
        job = str(running_job())
        t.hpcq("signal", job, "SIGUSR1")
        t.check(read_lines(p.stdout, 2) == ["got USR1"] * 2, "USR1 did not reach both tasks")
        r = t.hpcq("signal", job, "STOP", rc=2)
        t.check("not one hpcq sends" in r.stderr, f"signal STOP: {r.stderr!r}")
        t.hpcq("signal", job, "term")
        t.check(p.wait(timeout=30) == 128 + signal.SIGTERM, f"after TERM: exit {p.returncode}")
        r = t.hpcq("signal", job, "USR1", rc=1)
        t.check("not running" in r.stderr, f"signal to an ended job: {r.stderr!r}")
    finally:
        p.kill()


def test_bad_input_is_refused_in_one_line():
    for args, what in ((["run", "-o", "x.out", "--", "true"], "--output"),
                       (["run"], "no command"),
                       (["run", "--label"], "no command"),
                       (["submit", "--label", "--", "true"], "--label")):
        r = t.hpcq(*args, rc=2)
        t.check(what in r.stderr and r.stderr.count("\n") == 1, f"{args}: {r.stderr!r}")
    # Inside a job (HPCQ_JOB_ID) hpcq run is a step of it (t0033): of a job that exists.
    r = t.run([t.HPCQ, "run", "--", "true"], env=dict(os.environ, HPCQ_JOB_ID="999999"))
    t.check(r.returncode == 1 and "no job 999999" in r.stderr,
            f"run inside a job that does not exist: {r.returncode} {r.stderr!r}")
    r = t.run([t.HPCQ, "run", "--", "true"], env=dict(os.environ, HPCQ_JOB_ID="x"))
    t.check(r.returncode == 2 and "HPCQ_JOB_ID" in r.stderr, f"a bad HPCQ_JOB_ID: {r.stderr!r}")


t.main([test_run_output_comes_while_the_tasks_run, test_run_exit_status_and_streams,
        test_stdin_goes_to_task_0,
        test_ctrl_c_once_interrupts_twice_cancels, test_run_in_an_image,
        test_batch_script_runs_once_on_the_first_node,
        test_attach_from_two_clients, test_signal_reaches_the_tasks,
        test_bad_input_is_refused_in_one_line])
