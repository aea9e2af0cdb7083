#!/usr/bin/env python3
"""An agent whose CURVE key is not in the allow-list is refused (and logged);
a user can neither see nor cancel another user's job, root can; tasks run as
the submitting user, with their groups and home directory."""
import json
import os
import pwd
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2)


def test_unlisted_curve_key_is_refused():
    d = t.workdir()
    key = os.path.join(d, "rogue.key")
    t.hpcq("keygen", key)
    t.check(oct(os.stat(key).st_mode & 0o777) == "0o600", "keygen writes mode 0600")
    log = os.path.join(t.cluster_dir(), "logs", "hpcqd.log")
    rogue = subprocess.Popen(
        [t.AGENT, "--config", os.path.join(t.cluster_dir(), "hpcq.toml"), "--rank", "2",
         "--secret-key", key, "--state-dir", os.path.join(d, "rogue-state")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        refused = False
        while time.monotonic() < deadline and not refused:
            refused = "not in the allow-list" in open(log).read()
            time.sleep(0.1)
        t.check(refused, "hpcqd did not log the refused key")
        public = open(key).read().split()[1]
        t.check(public in open(log).read(), "the log names the refused key")
    finally:
        rogue.terminate()
        rogue.wait(timeout=20)
    nodes = json.loads(t.hpcq("nodes", "--json").stdout)
    t.check(all(n["state"] == "up" for n in nodes), f"nodes {nodes}")


def test_other_user_cannot_touch_job():
    uid = t.ensure_user("hpcqtest")
    d = t.workdir()
    root_job = t.submit("--", "sleep", "300", cwd=d)
    t.wait_state(root_job, "RUNNING")
    p = t.hpcq("cancel", str(root_job), user="hpcqtest", rc=1)
    t.check("belongs to another user" in p.stderr, f"cancel message: {p.stderr}")
    p = t.hpcq("status", str(root_job), user="hpcqtest", rc=1)
    t.check("another user" in p.stderr, f"status message: {p.stderr}")
    queue = json.loads(t.hpcq("queue", "--json", user="hpcqtest").stdout)
    t.check(root_job not in [j["id"] for j in queue], "root's job is hidden from hpcqtest")
    t.check(t.status(root_job)["state"] == "RUNNING", "root's job still runs")

    own = t.submit("-o", "own.out", "--", "sh", "-c", "id -u; id -g; sleep 300", user="hpcqtest", cwd=d)
    s = t.wait_state(own, "RUNNING", user="hpcqtest")
    t.check(s["user"] == "hpcqtest" and s["uid"] == uid, f"owner {s['user']} {s['uid']}")
    out = os.path.join(d, "own.out")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (os.path.exists(out) and open(out).read().count("\n") >= 2):
        time.sleep(0.05)
    t.check(open(out).read().split()[0] == str(uid), "the task runs as the submitting user")
    t.check(os.stat(out).st_uid == uid, "the output file belongs to the user")
    t.hpcq("cancel", str(own), user="hpcqtest")
    t.wait_state(own, "CANCELLED", user="hpcqtest")
    t.hpcq("cancel", str(root_job))  # root may cancel any job; here its own
    t.wait_state(root_job, "CANCELLED")


def test_root_may_cancel_any_job():
    t.ensure_user("hpcqtest")
    d = t.workdir()
    job = t.submit("--", "sleep", "300", user="hpcqtest", cwd=d)
    t.wait_state(job, "RUNNING")
    t.hpcq("cancel", str(job))
    t.wait_state(job, "CANCELLED")


def test_tasks_have_the_users_groups_and_home():
    # The executor resolves them (the shell uses no name service): a group
    # the user is a member of, not their primary one, must be there.
    uid = t.ensure_user("hpcqtest")
    subprocess.run(["groupadd", "-f", "hpcqextra"], check=True)
    subprocess.run(["usermod", "-aG", "hpcqextra", "hpcqtest"], check=True)
    expected = set(subprocess.run(["id", "-G", "hpcqtest"], capture_output=True, text=True,
                                  check=True).stdout.split())
    extra = subprocess.run(["getent", "group", "hpcqextra"], capture_output=True, text=True,
                           check=True).stdout.split(":")[2]
    t.check(extra in expected, f"hpcqextra ({extra}) is not among {expected}")
    d = t.workdir()
    # --export NONE: HOME comes from the node, not from the submitter.
    job = t.submit("--export", "NONE", "-o", "ids.out", "--", "sh", "-c",
                   'id -u; id -G; echo "$HOME"', user="hpcqtest", cwd=d)
    t.wait_state(job, ("COMPLETED",), user="hpcqtest")
    got_uid, groups, home = open(os.path.join(d, "ids.out")).read().splitlines()[:3]
    t.check(got_uid == str(uid), f"uid {got_uid}")
    t.check(set(groups.split()) == expected, f"groups {groups}, expected {sorted(expected)}")
    t.check(home == pwd.getpwnam("hpcqtest").pw_dir, f"HOME {home!r}")


t.main([test_unlisted_curve_key_is_refused, test_other_user_cannot_touch_job,
        test_root_may_cancel_any_job, test_tasks_have_the_users_groups_and_home])
