#!/usr/bin/env python3
"""hpcq alloc driven through a real pseudo-terminal (issue 22, item 3): it
waits for its allocation, then runs the user's shell here, interactive,
with the job's environment; commands typed into it (hpcq run makes steps of
the allocation) print on the screen; leaving the shell ends the job
(COMPLETED) with the shell's exit status; the time limit ends the job and
hangs the shell up."""
import os
import pty
import re
import select
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2)

ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}


class Terminal:
    """A command on a pseudo-terminal: type into it and read its screen."""

    def __init__(self, args, env):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execvpe(args[0], args, env)
        self.screen = ""

    def read_until(self, pattern, timeout=30):
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.screen):
            left = deadline - time.monotonic()
            t.check(left > 0, f"{pattern!r} not on the screen after {timeout}s:\n{self.screen}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    data = os.read(self.fd, 4096)
                except OSError:  # the other side closed
                    data = b""
                t.check(data != b"", f"the terminal closed before {pattern!r}:\n{self.screen}")
                self.screen += data.decode(errors="replace")
        return re.search(pattern, self.screen)

    def type(self, text):
        os.write(self.fd, text.encode())

    def wait(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:  # drain, so that the command never blocks on a full terminal
                while select.select([self.fd], [], [], 0.05)[0]:
                    self.screen += os.read(self.fd, 4096).decode(errors="replace")
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
        raise t.Failure(f"the terminal's command did not exit:\n{self.screen}")


def shell_env():
    return dict(os.environ, SHELL="/bin/sh", PS1="alloc$ ", TERM="dumb")


def test_an_interactive_allocation():
    term = Terminal([t.HPCQ, "alloc", "-N", "2", "-n", "2"], shell_env())
    job = int(term.read_until(r"job (\d+) has its allocation: node1,node2").group(1))
    term.read_until(r"alloc\$ ")
    term.type("echo id=$HPCQ_JOB_ID nodes=$HPCQ_NODELIST\n")
    term.read_until(rf"id={job} nodes=node1,node2")
    t.check(t.status(job)["state"] == "RUNNING", "the allocation is not running")
    term.type("hpcq run -l -- sh -c 'echo hello from $HPCQ_NODENAME'\n")
    term.read_until(r"0: hello from node1")
    term.read_until(r"1: hello from node2")
    term.read_until(r"alloc\$ ")
    term.type("exit 3\n")
    t.check(term.wait() == 3, f"hpcq alloc's exit, want the shell's 3:\n{term.screen}")
    s = t.wait_state(job, ENDED)
    t.check(s["state"] == "COMPLETED", f"job {s['state']} after leaving the shell: {s['reason']}")
    t.check(len(s["steps"]) == 1 and s["steps"][0]["state"] == "COMPLETED", f"steps {s['steps']}")


def test_the_time_limit_ends_the_allocation():
    term = Terminal([t.HPCQ, "alloc", "-N", "1", "-t", "00:00:03"], shell_env())
    job = int(term.read_until(r"job (\d+) has its allocation").group(1))
    term.read_until(r"alloc\$ ")
    term.read_until(rf"job {job} ended \(TIMEOUT", timeout=30)
    code = term.wait()
    t.check(code != 0, f"the shell was not hung up: exit {code}\n{term.screen}")
    t.check(t.wait_state(job, ENDED)["state"] == "TIMEOUT", "the job did not time out")


def test_a_command_instead_of_a_shell():
    r = t.run([t.HPCQ, "alloc", "-N", "2", "--", "sh", "-c",
               "hpcq run -N 2 -- hostname >/dev/null && echo $HPCQ_NNODES"])
    t.check(r.returncode == 0 and r.stdout == "2\n", f"alloc -- COMMAND: {r}")


t.main([test_an_interactive_allocation, test_the_time_limit_ends_the_allocation,
        test_a_command_instead_of_a_shell])
