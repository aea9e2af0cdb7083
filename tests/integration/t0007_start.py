#!/usr/bin/env python3
"""`hpcq start` runs the command with HPCQ_SOCKET set, exits with its status,
and leaves nothing behind: no process of the cluster, no cgroup, no directory
-- even when a job is still running at the end."""
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

INNER = """
set -e
id=$(hpcq submit -N 2 -n 2 -- sleep 300)
while [ "$(hpcq status $id --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" != RUNNING ]; do sleep 0.05; done
dirname "$HPCQ_SOCKET"
exit 7
"""


def test_exit_status_and_clean_teardown():
    env = dict(os.environ, PATH=os.path.dirname(t.HPCQ) + ":" + os.environ["PATH"])
    p = subprocess.run([t.HPCQ, "start", "--agents", "2", "--", "bash", "-c", INNER],
                       capture_output=True, text=True, env=env, timeout=120)
    t.check(p.returncode == 7, f"exit {p.returncode}, expected the command's 7: {p.stderr}")
    d = p.stdout.strip().splitlines()[-1]
    t.check(d.startswith("/") and "hpcq-start-" in d, f"cluster dir {d!r}")
    t.check(not os.path.exists(d), f"{d} left behind")
    left = subprocess.run(["pgrep", "-f", d], capture_output=True, text=True).stdout.split()
    t.check(not left, f"processes left: {left}")
    name = d.strip("/").replace("/", "-")
    cgroups = [c for c in glob.glob("/sys/fs/cgroup/*/hpcq/*") + glob.glob("/sys/fs/cgroup/hpcq/*")
               if os.path.basename(c).startswith(name)]
    t.check(not cgroups, f"cgroups left: {cgroups}")


def test_command_gets_the_socket():
    p = subprocess.run([t.HPCQ, "start", "--agents", "1", "--", "sh", "-c", 'test -S "$HPCQ_SOCKET"'],
                       capture_output=True, text=True, timeout=120)
    t.check(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")


def test_bad_arguments():
    p = t.run([t.HPCQ, "start", "--agents", "0", "--", "true"])
    t.check(p.returncode == 2 and "--agents" in p.stderr, p.stderr)


t.main([test_exit_status_and_clean_teardown, test_command_gets_the_socket, test_bad_arguments])
