#!/usr/bin/env python3
"""What a job sees of the node and of other users, and how a job whose task
fails ends (issue 20's serious items): a job has its own /proc, showing its
own processes and no others; a multi-node job whose task fails ends FAILED
with that task's code and node, not CANCELLED; tasks create files with the
submitter's umask; the leader's state directory
and database are its owner's alone, and hpcqd refuses a state directory that
other users can enter."""
import glob
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2)

ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}


def output_of(job, path):
    s = t.wait_state(job, ENDED)
    with open(path) as f:
        return s, f.read()


def test_a_job_sees_its_own_processes_only():
    d = t.workdir()
    # Another job's process, which the second job must not see.
    other = t.submit("--", "sleep", "4242", cwd=d)
    t.wait_state(other, "RUNNING")
    try:
        script = ("echo pid=$$; echo comm=$(cat /proc/$$/comm); "
                  "sleep 4343 & echo pgrep=$(pgrep -x sleep); kill $!; wait $!; "
                  "echo others=$(pgrep -x sleep || echo none); "
                  "echo self=$(readlink /proc/self); echo ps=$(ps -eo comm= | sort | tr '\\n' ,)")
        out = os.path.join(d, "proc.out")
        job = t.submit("-o", out, "--", "bash", "-c", script, cwd=d)
        s, text = output_of(job, out)
        t.check(s["state"] == "COMPLETED", f"job {s['state']}: {s['reason']}\n{text}")
        lines = dict(l.split("=", 1) for l in text.splitlines() if "=" in l)
        pid = int(lines["pid"])
        t.check(pid < 10, f"bash is pid {pid} in the job's namespace: {text}")
        t.check(lines["comm"] == "bash", f"/proc/$$ is not the job's bash: {text}")
        t.check(lines["pgrep"].strip().isdigit(), f"pgrep did not find the job's sleep: {text}")
        t.check(lines["others"] == "none", f"the job sees another job's process: {text}")
        t.check(lines["self"].isdigit() and int(lines["self"]) < 100, f"/proc/self: {text}")
        seen = set(filter(None, lines["ps"].split(",")))
        t.check("kthreadd" not in seen and "hpcqd" not in seen and "hpcq-agent" not in seen,
                f"ps shows the host's processes: {seen}")
        t.check({"bash", "ps"} <= seen, f"ps does not show the job's processes: {seen}")
    finally:
        t.hpcq("cancel", str(other), rc=None)
        t.wait_state(other, ENDED)


def test_a_failed_task_fails_a_multi_node_job():
    d = t.workdir()
    job = t.submit("-N", "2", "-n", "2", "-o", "/dev/null", "--", "bash", "-c",
                   "[ $HPCQ_TASK_RANK = 1 ] && exit 3; sleep 60", cwd=d)
    s = t.wait_state(job, ENDED, timeout=90)
    t.check(s["state"] == "FAILED", f"state {s['state']}: {s['reason']}")
    t.check(s["exit_code"] == 3, f"exit code {s['exit_code']}, expected the task's 3")
    failed_node = s["nodes"][1]  # rank 1 runs on the job's second node
    t.check(s["reason"].startswith(failed_node + ":"), f"reason {s['reason']!r}")


def test_the_submitters_umask_goes_with_the_job():
    # Two umasks, so that neither a fixed one nor the daemons' own passes.
    for umask, want in (("077", 0o600), ("027", 0o640)):
        d = t.workdir()
        p = t.run(["sh", "-c", f"umask {umask}; exec {t.HPCQ} submit -o umask.out -- touch made"],
                  cwd=d, check_rc=0)
        s = t.wait_state(int(p.stdout.strip()), ENDED)
        t.check(s["state"] == "COMPLETED", f"job {s['state']}: {s['reason']}")
        for name in ("made", "umask.out"):
            mode = os.stat(os.path.join(d, name)).st_mode & 0o777
            t.check(mode == want, f"{name}: mode {oct(mode)} under umask {umask}")


def test_another_users_job_is_not_described():
    """A user learns nothing of another user's job from hpcq's answers: the
    same neutral line on every path, and a dependency on it says that it can
    never be met, not how that job ended."""
    t.ensure_user()
    d = t.workdir()
    root_job = t.submit("-o", "/dev/null", "--", "false", cwd=d)
    t.wait_state(root_job, "FAILED")
    for verb in ("cancel", "hold", "status"):
        p = t.hpcq(verb, str(root_job), user="hpcqtest", rc=1)
        t.check(p.stderr.strip().endswith(f"job {root_job} belongs to another user"),
                f"{verb}: {p.stderr}")
    mine = t.submit("-d", f"afterok:{root_job}", "--", "true", user="hpcqtest", cwd=d)
    s = t.wait_state(mine, ENDED, user="hpcqtest")
    t.check("can never be met" in s["reason"] and "FAILED" not in s["reason"], s["reason"])


def test_impossible_requests_are_refused_at_submit():
    """Two 16-core nodes without GPUs: what they could never hold is refused
    with one line naming the limit, instead of pending for ever."""
    for args, says in ((("-N", "3"), "the cluster has 2"),
                       (("-n", "1000"), "room for 32"),
                       (("-c", "64"), "the largest node has 16"),
                       (("--mem", "99999T"), "--mem: "),
                       (("--gpus-per-task", "1"), "no node has GPUs"),
                       (("-N", "0"), "must be at least 1")):
        p = t.hpcq("submit", *args, "--", "true", rc=None)
        t.check(p.returncode == 2 and says in p.stderr and p.stderr.count("\n") == 1,
                f"{args}: exit {p.returncode}: {p.stderr!r}")
    job = t.submit("-n", "32", "-o", "/dev/null", "--", "true")
    t.check(t.wait_state(job, ENDED)["state"] == "COMPLETED", "a job that just fits runs")


def test_queue_aligns_names_that_are_not_ascii():
    d = t.workdir()
    gate = t.Gate(d)
    jobs = [t.submit("-J", name, "--", *gate.command, cwd=d) for name in ("plain", "héllo wörld")]
    try:
        for j in jobs:
            t.wait_state(j, "RUNNING")
        lines = t.hpcq("queue").stdout.splitlines()
        header = lines[0]
        column = header.index("STATE")  # characters, as a terminal shows them
        rows = [l for l in lines[1:] if any(l.startswith(str(j)) for j in jobs)]
        t.check(len(rows) == 2 and all(l[column:].startswith("RUNNING") for l in rows),
                "\n".join(lines))
    finally:
        gate.open()
        for j in jobs:
            t.wait_state(j, ENDED)


def test_a_submission_over_the_limit_is_refused_in_one_line():
    d = t.workdir()
    script = os.path.join(d, "big.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n" + ("# padding\n" * ((5 << 20) // 10)) + "true\n")
    p = t.hpcq("submit", script, rc=None, cwd=d)
    # The command's own bound on a script (issue 45 item 9), before hpcqd's
    # on a message ([api] max_message_bytes, 4 MiB too).
    t.check(p.returncode == 2 and p.stderr.count("\n") == 1 and
            "is larger than 4 MiB" in p.stderr, f"exit {p.returncode}: {p.stderr!r}")


def test_a_memory_limit_kill_is_named():
    job = t.submit("--mem", "32M", "-o", "/dev/null", "--", "dd", "if=/dev/zero", "of=/dev/null",
                   "bs=256M", "count=1")
    s = t.wait_state(job, ENDED)
    t.check(s["state"] == "FAILED" and s["exit_code"] == 137 and "out of memory" in s["reason"],
            f"{s['state']} {s['exit_code']}: {s['reason']}")


def test_the_leaders_state_is_private():
    state = os.path.join(t.cluster_dir(), "leader")
    t.check(os.stat(state).st_mode & 0o777 == 0o700, f"{state}: {oct(os.stat(state).st_mode)}")
    db = os.path.join(state, "hpcq.db")
    for path in (db, db + "-wal"):
        mode = os.stat(path).st_mode & 0o777
        t.check(mode == 0o600, f"{path}: mode {oct(mode)}")
    t.ensure_user()
    p = t.run(["cat", db], user="hpcqtest")
    t.check(p.returncode != 0, "another user can read the leader's database")


def test_hpcqd_refuses_a_state_dir_others_can_enter():
    d = tempfile.mkdtemp(prefix="hpcq-t0031-")
    state = os.path.join(d, "state")
    os.mkdir(state)
    os.chmod(state, 0o755)
    key = os.path.join(d, "leader.key")
    public = t.hpcq("keygen", key).stdout.strip()
    config = os.path.join(d, "hpcq.toml")
    with open(config, "w") as f:
        f.write(f'[leader]\nstate_dir = "{state}"\nsocket = "{d}/hpcqd.sock"\n'
                f'secret_key = "{key}"\n\n[[rank]]\nname = "leader"\n'
                f'endpoint = "tcp://127.0.0.1:1"\npublic_key = "{public}"\n')
    p = subprocess.run([t.HPCQD, "--config", config], capture_output=True, text=True, timeout=60)
    t.check(p.returncode != 0, f"hpcqd started on a 0755 state dir: {p.stderr}")
    t.check(f"state dir {state} is open to other users (mode 0755)" in p.stderr, p.stderr)
    t.check(not os.path.exists(os.path.join(state, "hpcq.db")), "it wrote a database there")


def test_commands_and_paths_are_bytes_names_are_text():
    # Python passes "\udcXX" to the command as the byte 0xXX.
    d = t.workdir()
    out = os.path.join(d, "caf\udce9.out")
    script = os.path.join(d, "latin1.sh")
    with open(script, "wb") as f:
        f.write(b"#!/bin/sh\n# \xe9t\xe9\nprintf '%s|' \"$@\"\nprintf '%s' \"$LATIN1\"\n")
    os.chmod(script, 0o755)
    env = dict(os.environ, LATIN1="caf\udce9")
    p = t.run([t.HPCQ, "submit", "-o", out, script, "caf\udce9", "\udcff"], check_rc=0, cwd=d,
              env=env)
    job = int(p.stdout.strip())
    s = t.wait_state(job, ENDED)
    t.check(s["state"] == "COMPLETED", f"job {job}: {s['state']} {s.get('reason')}")
    with open(out, "rb") as f:
        data = f.read()
    t.check(data == b"caf\xe9|\xff|caf\xe9", f"the job printed {data!r}")
    t.hpcq("status", str(job), "--json")  # shown, with U+FFFD for what is not UTF-8
    p = t.hpcq("submit", "-J", "x\udcff", "--", "true", rc=None)
    t.check(p.returncode != 0 and p.stderr.count("\n") == 1 and
            "-J/--job-name: not valid UTF-8" in p.stderr, f"exit {p.returncode}: {p.stderr!r}")


# Prints "usage" when the job reads its own cgroup's memory usage (v1 or v2).
READ_OWN_USAGE = r"""
if grep -q ':memory:' /proc/self/cgroup; then
  root=/sys/fs/cgroup/memory usage=memory.usage_in_bytes
  own=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
else
  root=/sys/fs/cgroup usage=memory.current own=$(sed -n 's/^0:://p' /proc/self/cgroup)
fi
job=$(echo "$own" | sed 's|\(/job-[0-9]*\).*|\1|')
cat "$root$job/$usage" >/dev/null && echo usage
"""


def job_cgroup_dirs(job):
    """Where the node keeps job `job`'s cgroups (every hierarchy)."""
    return [p for p in glob.glob("/sys/fs/cgroup/**/hpcq/*/job-%d" % job, recursive=True)
            if os.path.isdir(p)]


def test_other_users_see_no_job_ids_hostfiles_or_logs():
    """Issue 45 item 12: while root's job runs, another user cannot list the
    node's job directories or job cgroups, read the job's hostfile or memory
    usage, or read the daemons' logs (every job id, start and end); the job's
    own user reads its hostfile and its cgroup's usage."""
    t.ensure_user()
    d = t.workdir()
    job = t.submit("--", "sleep", "300", cwd=d)
    mine = t.submit("-o", os.path.join(d, "hostfile.out"), "--", "sh", "-c",
                    'cat "$HPCQ_HOSTFILE" && echo read' + READ_OWN_USAGE,
                    user="hpcqtest", cwd=d)
    try:
        t.wait_state(job, "RUNNING")
        s, text = output_of(mine, os.path.join(d, "hostfile.out"))
        t.check(s["state"] == "COMPLETED" and text.endswith("read\nusage\n"),
                f"the job's user cannot read its hostfile and usage: {s['state']}: {text}")
        cgroups = job_cgroup_dirs(job)
        t.check(cgroups, f"no cgroup of job {job} under /sys/fs/cgroup")
        for path in cgroups:
            for look in (["ls", os.path.dirname(path)], ["ls", path]):
                p = t.run(look, user="hpcqtest")
                t.check(p.returncode != 0, f"another user runs {look}: {p.stdout.split()}")
            for usage in ("memory.usage_in_bytes", "memory.current"):
                if os.path.exists(os.path.join(path, usage)):
                    p = t.run(["cat", os.path.join(path, usage)], user="hpcqtest")
                    t.check(p.returncode != 0, f"another user reads {path}/{usage}")
        for rank in (1, 2):
            jobs = t.jobs_dir(rank)
            p = t.run(["ls", jobs], user="hpcqtest")
            t.check(p.returncode != 0, f"another user lists {jobs}: {p.stdout.split()}")
        found = [os.path.join(t.jobs_dir(rank), str(job), f) for rank in (1, 2)
                 if os.path.isdir(os.path.join(t.jobs_dir(rank), str(job)))
                 for f in os.listdir(os.path.join(t.jobs_dir(rank), str(job)))
                 if f.startswith("hostfile")]
        t.check(found, f"no hostfile of job {job} under the job directories")
        for path in found:
            p = t.run(["cat", path], user="hpcqtest")
            t.check(p.returncode != 0, f"another user reads {path}: {p.stdout!r}")
        logs = os.path.join(t.cluster_dir(), "logs")
        for name in os.listdir(logs):
            p = t.run(["cat", os.path.join(logs, name)], user="hpcqtest")
            t.check(p.returncode != 0, f"another user reads logs/{name}")
    finally:
        t.hpcq("cancel", str(job), rc=None)
        t.wait_state(job, ENDED)


t.main([test_a_job_sees_its_own_processes_only, test_a_failed_task_fails_a_multi_node_job,
        test_the_submitters_umask_goes_with_the_job, test_another_users_job_is_not_described,
        test_impossible_requests_are_refused_at_submit, test_queue_aligns_names_that_are_not_ascii,
        test_a_submission_over_the_limit_is_refused_in_one_line, test_a_memory_limit_kill_is_named,
        test_the_leaders_state_is_private, test_hpcqd_refuses_a_state_dir_others_can_enter,
        test_commands_and_paths_are_bytes_names_are_text,
        test_other_users_see_no_job_ids_hostfiles_or_logs])
