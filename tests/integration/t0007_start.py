#!/usr/bin/env python3
"""`hpcq start` runs the command with HPCQ_SOCKET set, exits with its status,
and leaves nothing behind: no process of the cluster, no cgroup, no directory
-- even when a job is still running at the end."""
import glob
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

INNER = """
set -e
id=$(hpcq submit -N 2 -n 2 -- sleep 300)
img=$(hpcq submit -N 2 -n 2 --image "$ROOTFS" -- sleep 300)
for j in $id $img; do
  while :; do
    state=$(hpcq status $j --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
    case $state in
      RUNNING) break ;;
      PENDING) sleep 0.05 ;;
      *) echo "job $j ended $state: $(hpcq status $j)" >&2; exit 9 ;;
    esac
  done
done
dirname "$HPCQ_SOCKET"
exit 7
"""


def test_exit_status_and_clean_teardown():
    env = dict(os.environ, PATH=os.path.dirname(t.HPCQ) + ":" + os.environ["PATH"],
               ROOTFS=t.busybox_rootfs())
    p = subprocess.run([t.HPCQ, "start", "--agents", "2", "--", "bash", "-c", INNER],
                       capture_output=True, text=True, env=env, timeout=120)
    t.check(p.returncode == 7, f"exit {p.returncode}, expected the command's 7: {p.stderr}")
    d = p.stdout.strip().splitlines()[-1]
    t.check(d.startswith("/") and "hpcq-start-" in d, f"cluster dir {d!r}")
    t.check(not os.path.exists(d), f"{d} left behind")
    left = subprocess.run(["pgrep", "-f", d], capture_output=True, text=True).stdout.split()
    t.check(not left, f"processes left: {left}")
    # Every v1 controller (runc's of the image job too), or the v2 tree.
    prefix = t.cgroup_instance(os.path.join(d, "agents")) + "-"
    cgroups = [c for c in glob.glob("/sys/fs/cgroup/*/hpcq/*") + glob.glob("/sys/fs/cgroup/hpcq/*")
               if os.path.basename(c).startswith(prefix)]
    t.check(not cgroups, f"cgroups left: {cgroups}")


def test_command_gets_the_socket():
    p = subprocess.run([t.HPCQ, "start", "--agents", "1", "--", "sh", "-c", 'test -S "$HPCQ_SOCKET"'],
                       capture_output=True, text=True, timeout=120)
    t.check(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")


def test_sigterm_stops_the_command_and_the_cluster():
    # As when a batch system or a terminal ends `hpcq start` itself: the
    # command ends, then the cluster, with a job running; nothing is left.
    d = t.workdir()
    ready = os.path.join(d, "ready")
    inner = (f'id=$(hpcq submit -- sleep 300) && echo "$(dirname $HPCQ_SOCKET) $id" > {ready}.tmp '
             f'&& mv {ready}.tmp {ready} && exec sleep 300')
    env = dict(os.environ, PATH=os.path.dirname(t.HPCQ) + ":" + os.environ["PATH"])
    p = subprocess.Popen([t.HPCQ, "start", "--agents", "1", "--", "sh", "-c", inner],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        t.wait_until("the command running", lambda: os.path.exists(ready), timeout=60)
        cluster = open(ready).read().split()[0]
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    t.check(p.returncode == 128 + signal.SIGTERM, f"exit {p.returncode}: {err}")
    t.check(not os.path.exists(cluster), f"{cluster} left behind")
    left = subprocess.run(["pgrep", "-f", cluster], capture_output=True, text=True).stdout.split()
    t.check(not left, f"processes left: {left}")


def test_bad_arguments():
    p = t.run([t.HPCQ, "start", "--agents", "0", "--", "true"])
    t.check(p.returncode == 2 and "--agents" in p.stderr, p.stderr)


def start_dirs():
    return set(glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "hpcq-start-*")))


def test_a_documented_agent_key_of_hpcq_starts_is_the_sites():
    """kill_grace_s, which hpcq start also sets, is the file's when it gives
    it (it was a duplicate key, blamed on the generated file)."""
    d = t.workdir()
    site = os.path.join(d, "grace.toml")
    with open(site, "w") as f:
        f.write('[agent]\nkill_grace_s = 7\n')
    p = t.run([t.HPCQ, "start", "--agents", "1", "--config", site, "--", "sh", "-c",
               'grep -c "^kill_grace_s = 7$" "$(dirname "${HPCQ_SOCKET%%:*}")/hpcq.toml"'])
    t.check(p.returncode == 0 and p.stdout.strip() == "1", f"exit {p.returncode}: {p.stdout} {p.stderr}")


def test_a_daemon_restarted_by_hand_ends_with_the_cluster():
    """An agent started again by hand (as t0048 does) was left running after
    hpcq start had ended and removed its directory."""
    script = ('pid=$(pgrep -o -f "hpcq-agent --config $(dirname "${HPCQ_SOCKET%%:*}")/hpcq.toml --rank 1 ");'
              'args=$(tr "\\0" " " < /proc/$pid/cmdline); kill -9 $pid; '
              'while kill -0 $pid 2>/dev/null; do sleep 0.05; done; '
              'setsid $args > /dev/null 2>&1 < /dev/null & echo $! > "$0"')
    d = t.workdir()
    pidfile = os.path.join(d, "again.pid")
    p = t.run([t.HPCQ, "start", "--agents", "1", "--", "sh", "-c", script, pidfile])
    t.check(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
    again = int(open(pidfile).read())
    alive = os.path.exists(f"/proc/{again}") and \
        open(f"/proc/{again}/stat").read().split()[2] != "Z"
    t.check(not alive, f"the agent restarted by hand (pid {again}) outlived hpcq start")


def test_a_start_that_cannot_work_says_why_and_leaves_nothing():
    d = t.workdir()
    bad = os.path.join(d, "site.toml")
    with open(bad, "w") as f:
        f.write('[scheduler]\nactions = ["allocate"]\nbogus = 1\n')
    # Its [agent] table takes hpcq start's agent keys: lines after it still
    # name the file's own lines.
    agent = os.path.join(d, "agent.toml")
    with open(agent, "w") as f:
        f.write('[agent]\nprolog = "/bin/true"\n\n[scheduler]\nbogus = 1\n')
    # Issue 45 item 20: what hpcq start writes itself, a queue of no node and
    # an unknown action were blamed on the generated file, or took 9 lines.
    mistakes = {
        "leader.toml": ('# site\n[leader]\nmpi = "pmix"\n', ":2: [leader] is hpcq start's own"),
        "overlay.toml": ('[overlay]\nfanout = 2\n', ":1: [overlay] is hpcq start's own"),
        "rank.toml": ('[[rank]]\nname = "x"\n', ":1: [rank] is hpcq start's own"),
        "state.toml": ('[agent]\nprolog = "/bin/true"\nstate_dir = "/x"\n',
                       ":3: agent.state_dir is hpcq start's own"),
        "queue.toml": ('[[queue]]\nname = "q"\nnodes = "node9"\n',
                       ":3: queue 'q' names 'node9', which is not a node's [[rank]]"),
        "action.toml": ('[scheduler]\nactions = ["allocate", "nosuch"]\n',
                        ": [scheduler]: "),
    }
    cases = [((bad,), f"{bad}:3: unknown key 'scheduler.bogus'"),
             ((agent,), f"{agent}:5: unknown key 'scheduler.bogus'"),
             ((os.path.join(d, "missing.toml"),), "missing.toml: cannot read")]
    for name, (text, says) in mistakes.items():
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text)
        cases.append(((path,), path + says))
    before = start_dirs()
    for args, says in cases:
        p = t.run([t.HPCQ, "start", "--config", *args, "--", "true"])
        t.check(p.returncode == 2 and p.stderr.count("\n") == 1 and says in p.stderr,
                f"exit {p.returncode}: {p.stderr!r}")
    t.ensure_user()
    p = t.run([t.HPCQ, "start", "--", "true"], user="hpcqtest")
    t.check(p.returncode == 2 and "must run as root" in p.stderr, f"{p.returncode} {p.stderr}")
    t.check(start_dirs() == before, f"left behind: {start_dirs() - before}")


t.main([test_exit_status_and_clean_teardown, test_command_gets_the_socket,
        test_sigterm_stops_the_command_and_the_cluster, test_bad_arguments,
        test_a_start_that_cannot_work_says_why_and_leaves_nothing,
        test_a_documented_agent_key_of_hpcq_starts_is_the_sites,
        test_a_daemon_restarted_by_hand_ends_with_the_cluster])
