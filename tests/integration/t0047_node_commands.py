#!/usr/bin/env python3
"""The hpcq command on a node without hpcqd: its agent serves the command's
socket (hpcq-agent --socket; hpcq start gives each agent one) and forwards
each call to the leader over the overlay, with the caller the kernel names.
Submissions, status, streams (hpcq run's output and exit status) work
through it; a user is who the node's kernel says, not who the request
claims; garbage on the socket gets nothing and the agent serves on."""
import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:2 pu:1")


def node_socket(rank):
    return os.path.join(t.cluster_dir(), "agents", f"rank-{rank}.sock")


def on_node(rank, *args, user=None, cwd=None, input=None):
    """`hpcq ARGS` through the agent of `rank`."""
    env = dict(os.environ, HPCQ_SOCKET=node_socket(rank))
    return t.run([t.HPCQ, *args], user=user, cwd=cwd, input=input, env=env)


def test_submit_status_and_queue_through_an_agent():
    d = t.workdir()
    p = on_node(2, "submit", "-o", "out-%j", "--", "echo", "from node2", cwd=d)
    t.check(p.returncode == 0, f"submit: {p.returncode} {p.stderr}")
    job = int(p.stdout)
    s = t.wait_state(job, ["COMPLETED", "FAILED"])
    t.check(s["state"] == "COMPLETED", f"job {job}: {s['state']} {s['reason']}")
    with open(os.path.join(d, f"out-{job}")) as f:
        t.check(f.read() == "from node2\n", "the job's output")
    p = on_node(1, "status", str(job), "--json")
    t.check(p.returncode == 0 and json.loads(p.stdout)["id"] == job, f"status: {p.stderr}")
    p = on_node(1, "queue")
    t.check(p.returncode == 0, f"queue: {p.stderr}")


def test_the_caller_is_who_the_nodes_kernel_says():
    t.ensure_user("hpcqtest")
    d = t.workdir()
    p = on_node(1, "submit", "-o", "/dev/null", "--", "sleep", "30", user="hpcqtest", cwd=d)
    t.check(p.returncode == 0, f"submit as hpcqtest: {p.stderr}")
    job = int(p.stdout)
    t.check(t.status(job)["user"] == "hpcqtest", f"job {job}: {t.status(job)}")
    root_job = t.submit("-o", "/dev/null", "--", "sleep", "30")
    p = on_node(1, "cancel", str(root_job), user="hpcqtest")
    t.check(p.returncode != 0 and p.stderr.count("\n") == 1, f"cancel of root's job: {p.stderr}")
    p = on_node(1, "cancel", str(job), user="hpcqtest")
    t.check(p.returncode == 0, f"cancel of its own job: {p.stderr}")
    t.hpcq("cancel", str(root_job))


def test_hpcq_run_streams_through_an_agent():
    # Each task exits once both have written (the first to fail the job
    # would end the other's, maybe before its line was out).
    d = t.workdir()
    p = on_node(2, "run", "-N", "2", "-n", "2", "-l", "--", "sh", "-c",
                'read line; echo "$HPCQ_TASK_RANK got $line"; touch $HPCQ_TASK_RANK.done; '
                'while [ ! -e 0.done ] || [ ! -e 1.done ]; do sleep 0.05; done; exit 3',
                cwd=d, input="hi\n")
    t.check(p.returncode == 3, f"hpcq run: exit {p.returncode}: {p.stderr}")
    t.check("0: 0 got hi" in p.stdout and "1: 1 got" in p.stdout, f"output: {p.stdout!r}")


def test_garbage_on_the_socket_gets_nothing():
    for garbage in (b"GET / HTTP/1.1\r\n\r\n", b"HPQ1\xff\xff\xff\xffxx", b"HPQ1\x00\x00\x00\x03abc"):
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(15)
            s.connect(node_socket(1))
            s.sendall(garbage)
            s.shutdown(socket.SHUT_WR)
            try:
                answer = s.recv(4096)
            except ConnectionResetError:  # closed with the garbage unread
                answer = b""
            except socket.timeout:
                raise t.Failure(f"no end for {garbage!r}")
        t.check(len(answer) < 4096, f"{garbage!r}: {answer!r}")
    p = on_node(1, "queue")
    t.check(p.returncode == 0, f"the agent stopped serving: {p.stderr}")


t.main([test_submit_status_and_queue_through_an_agent, test_the_caller_is_who_the_nodes_kernel_says,
        test_hpcq_run_streams_through_an_agent, test_garbage_on_the_socket_gets_nothing])
