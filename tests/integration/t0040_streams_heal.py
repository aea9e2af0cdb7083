#!/usr/bin/env python3
"""Live output, standard input and signals survive a healing tree (issue 22).
In the chain leader <- node1 <- node2 (fan-out 1), an `hpcq run` task on node2
prints a numbered line every 0.1 s. node1's agent is stopped (what goes
through it piles up in its sockets), a signal and a line of input are sent to
the task meanwhile, then node1's agent is killed: all that was in flight dies
with it. node2 detours to the leader, sends again the output it kept, and the
leader sends again the signal and the input its Hello does not report
received. The caller must see every line exactly once, the signal's trap
once and the input once. Then the same output across a kill -9 of hpcqd: the
agents send the new one what they kept when they say Hello to it, and `hpcq
run` prints each line once, in order (hpcqd is stopped first, so that what
reaches it meanwhile is lost with it); also when the task ends while hpcqd
is down (its end must not close the output before what was kept arrives)."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=1, topology="pack:1 numa:1 core:1 pu:1")

LINES = 120
SCRIPT = f"""trap 'echo got-usr1' USR1
i=0
while [ $i -lt 60 ]; do i=$((i+1)); echo "line $i"; sleep 0.1; done
read text; echo "read:$text"
while [ $i -lt {LINES} ]; do i=$((i+1)); echo "line $i"; sleep 0.1; done
"""


def start_run(script, stdin=None):
    """hpcq run of `script` on node2, its output lines collected as they come
    (the reader thread ends with the output)."""
    p = subprocess.Popen([t.HPCQ, "run", "-w", "node2", "-n", "1", "--", "sh", "-c", script],
                         stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=t.workdir())
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()
    return p, lines, reader


def test_output_input_and_signals_survive_the_heal():
    p, lines, reader = start_run(SCRIPT, stdin=subprocess.PIPE)
    node1 = t.agent_pid(1)
    try:
        t.wait_until("the first lines", lambda: len(lines) >= 5, timeout=30)
        jobs = [j["id"] for j in json.loads(t.hpcq("queue", "--json").stdout)
                if j["state"] == "RUNNING"]
        t.check(len(jobs) == 1, f"running jobs: {jobs}")
        os.kill(node1, signal.SIGSTOP)
        seen = len(lines)
        t.hpcq("signal", str(jobs[0]), "USR1")
        p.stdin.write("hello\n")
        p.stdin.flush()
        # Lines keep coming from the task, into node1's sockets.
        time.sleep(2)
        t.check(len(lines) <= seen + 1, f"output went past the stopped agent: {lines[seen:]}")
        os.kill(node1, signal.SIGKILL)
        p.stdin.close()
        t.check(p.wait(timeout=60) == 0, f"exit {p.returncode}: {p.stderr.read()}")
        reader.join(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
    text = [line.rstrip("\n") for line in lines]
    numbered = [line for line in text if line.startswith("line ")]
    t.check(numbered == [f"line {i}" for i in range(1, LINES + 1)],
            f"lines missing or twice: {sorted(set(range(1, LINES + 1)) - {int(x.split()[1]) for x in numbered})} "
            f"missing, {len(numbered)} lines")
    t.check(text.count("got-usr1") == 1, f"the signal's trap ran {text.count('got-usr1')} times")
    t.check(text.count("read:hello") == 1, f"the input arrived {text.count('read:hello')} times")
    with open(os.path.join(t.cluster_dir(), "logs", "agent-2.log")) as f:
        t.check("sending through rank 0 meanwhile" in f.read(), "node2 detoured")


def test_output_survives_a_leader_restart():
    d = t.workdir()
    gate = t.Gate(d)
    # Numbered lines until the gate opens, then as many again.
    count = os.path.join(d, "count")
    script = (f"i=0; while [ ! -e {gate.path} ]; do i=$((i+1)); echo \"line $i\"; echo $i > {count}; "
              "sleep 0.02; done; "
              "n=$i; while [ $i -lt $((2*n)) ]; do i=$((i+1)); echo \"line $i\"; done; echo end")
    p, lines, reader = start_run(script)
    try:
        t.wait_until("the first lines", lambda: len(lines) >= 5, timeout=30)
        # hpcqd stops: what the task prints meanwhile piles up in its
        # sockets, and dies with it.
        t.stop_leader()
        written = int(open(count).read() or 0)
        t.wait_until("lines written to a stopped leader",
                     lambda: int(open(count).read() or 0) >= written + 20, timeout=30)
        cmdline = t.kill_leader()
        t.restart_leader(cmdline)
        # Once node2 said Hello to the new leader (and sent again what it
        # kept before that), the task may end.
        t.wait_until("node2 up again", lambda: any(
            n["name"] == "node2" and n["state"] == "up"
            for n in json.loads(t.hpcq("nodes", "--json").stdout)), timeout=30)
        gate.open()
        t.check(p.wait(timeout=60) == 0, f"exit {p.returncode}: {p.stderr.read()}")
        reader.join(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
    numbered = t.check_numbered_then(lines, "end")
    t.check(numbered >= 50, f"only {numbered} lines")
    errors = p.stderr.read() if p.stderr else ""
    t.check("lost" not in errors, f"hpcq run says: {errors}")


def ends_kept(rank):
    """The job ends the agent of `rank` has journaled and not had acknowledged."""
    return t.journaled_ends(rank)


def test_output_of_a_task_that_ended_while_the_leader_was_down():
    d = t.workdir()
    gate = t.Gate(d)
    script = (f"i=0; while [ ! -e {gate.path} ]; do i=$((i+1)); echo \"line $i\"; sleep 0.02; "
              "done; n=$i; while [ $i -lt $((n+40)) ]; do i=$((i+1)); echo \"line $i\"; done; "
              "echo end")
    p, lines, reader = start_run(script)
    try:
        t.wait_until("the first lines", lambda: len(lines) >= 5, timeout=30)
        t.stop_leader()
        # The task ends while hpcqd is stopped: its last lines and its end
        # go to a leader that dies with them.
        gate.open()
        t.wait_until("the task's end journaled on node2", lambda: ends_kept(2), timeout=30)
        cmdline = t.kill_leader()
        t.restart_leader(cmdline)
        t.check(p.wait(timeout=60) == 0, f"exit {p.returncode}: {p.stderr.read()}")
        reader.join(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
    t.check_numbered_then(lines, "end")
    errors = p.stderr.read() if p.stderr else ""
    t.check("lost" not in errors, f"hpcq run says: {errors}")


t.main([test_output_input_and_signals_survive_the_heal, test_output_survives_a_leader_restart,
        test_output_of_a_task_that_ended_while_the_leader_was_down])
