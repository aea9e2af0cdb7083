#!/usr/bin/env python3
"""hpcq alloc and hpcq run --pty driven through a real pseudo-terminal
(issue 22, item 3): alloc waits for its allocation, then runs the user's
shell here, interactive, with the job's environment; commands typed into it
(hpcq run makes steps of the allocation) print on the screen; leaving the
shell ends the job with the shell's exit status (exit 3: FAILED, as Slurm
records a salloc whose command failed); the time limit
ends the job and hangs the shell up. run --pty gives a shell on a terminal
of the first node: typed lines, ^C to its foreground command, its exit; in
an --image too (the terminal is the container's)."""
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
        self.seen = 0  # what read_until has matched up to: the next match comes after

    def read_until(self, pattern, timeout=30):
        """Waits for `pattern` in what came after the last match; returns the match."""
        deadline = time.monotonic() + timeout
        while not re.compile(pattern).search(self.screen, self.seen):
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
        match = re.compile(pattern).search(self.screen, self.seen)
        self.seen = match.end()
        return match

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
    term.read_until(rf"id={job} nodes=node\[1-2\]")
    t.check(t.status(job)["state"] == "RUNNING", "the allocation is not running")
    term.type("hpcq run -l -- sh -c 'echo hello from $HPCQ_NODENAME'\n")
    term.read_until(r"hello from node")
    term.read_until(r"hello from node")
    t.check("0: hello from node1" in term.screen and "1: hello from node2" in term.screen,
            term.screen)
    term.read_until(r"alloc\$ ")
    term.type("exit 3\n")
    t.check(term.wait() == 3, f"hpcq alloc's exit, want the shell's 3:\n{term.screen}")
    s = t.wait_state(job, ENDED)
    t.check(s["state"] == "FAILED" and s["exit_code"] == 3,
            f"job {s['state']} {s['exit_code']} after leaving the shell with 3: {s['reason']}")
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


def test_run_pty_is_a_terminal_on_the_first_node():
    env = dict(shell_env(), PS1="remote$ ")
    term = Terminal([t.HPCQ, "run", "--pty", "-N", "2", "-n", "2", "--", "sh"], env)
    term.read_until(r"remote\$ ")
    term.type("tty; echo node=$HPCQ_NODENAME rank=$HPCQ_TASK_RANK\n")
    term.read_until(r"/dev/pts/\d+")
    term.read_until(r"node=node1 rank=0")
    term.type("echo started; sleep 30\n")
    term.read_until(r"\nstarted")
    # ^C: the remote terminal's, to its foreground sleep; again until the shell
    # is back (one that came before sleep began would not have reached it).
    deadline = time.monotonic() + 10
    while True:
        term.type("\x03")
        try:
            term.read_until(r"remote\$ [^\n]*$", timeout=0.5)
            break
        except t.Failure:
            t.check(time.monotonic() < deadline, f"^C did not end the sleep:\n{term.screen}")
    term.type("exit 5\n")
    t.check(term.wait() == 5, f"hpcq run --pty's exit, want the shell's 5:\n{term.screen}")


def test_run_pty_in_an_image():
    root = t.busybox_rootfs(applets=("sh", "echo", "test", "tty", "sleep"))
    env = dict(shell_env(), PS1="container$ ")
    term = Terminal([t.HPCQ, "run", "--pty", "--image", root, "--", "sh"], env)
    term.read_until(r"container\$ ")
    term.type("tty; test -e /etc/debian_version || echo in-the-image\n")
    term.read_until(r"/dev/pts/\d+")
    term.read_until(r"\nin-the-image")
    term.type("exit 6\n")
    t.check(term.wait() == 6, f"hpcq run --pty --image's exit, want 6:\n{term.screen}")


def test_an_allocations_step_on_a_terminal():
    term = Terminal([t.HPCQ, "alloc", "-N", "1"], shell_env())
    term.read_until(r"alloc\$ ")
    term.type("PS1='step$ ' hpcq run --pty -- sh\n")
    term.read_until(r"step\$ ")
    term.type("echo in step $HPCQ_STEP_ID; exit\n")
    term.read_until(r"in step 1")
    term.read_until(r"alloc\$ ")
    term.type("exit\n")
    t.check(term.wait() == 0, f"alloc:\n{term.screen}")


t.main([test_an_interactive_allocation, test_run_pty_is_a_terminal_on_the_first_node,
        test_run_pty_in_an_image,
        test_an_allocations_step_on_a_terminal, test_the_time_limit_ends_the_allocation,
        test_a_command_instead_of_a_shell])
