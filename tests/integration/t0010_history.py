#!/usr/bin/env python3
"""hpcq history (like sacct): ended jobs only, filtered by user, state and end
time, with cores and CPU time; users see their own jobs, root all."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=1, fanout=2)


def history(*args, user=None, rc=0):
    return json.loads(t.hpcq("history", "--json", *args, user=user, rc=rc).stdout)


def test_history_filters_and_accounting():
    t.ensure_user("hpcqtest")
    d = t.workdir()
    ok = t.submit("-n", "2", "--", "sleep", "1", cwd=d)
    failed = t.submit("--", "sh", "-c", "exit 2", cwd=d)
    running = t.submit("--", "sleep", "300", cwd=d)
    theirs = t.submit("--", "true", user="hpcqtest", cwd=d)
    for job in (ok, failed, theirs):
        t.wait_state(job, ["COMPLETED", "FAILED"])
    t.wait_state(running, "RUNNING")

    ids = {j["id"]: j for j in history()}
    t.check(set(ids) == {ok, failed, theirs}, f"history ids {sorted(ids)}")
    t.check(ids[ok]["cores"] == 2 and ids[ok]["cpu_time_s"] >= 2, f"accounting {ids[ok]}")
    t.check([j["id"] for j in history("--state", "FAILED")] == [failed], "--state")
    t.check([j["id"] for j in history("--user", "hpcqtest")] == [theirs], "--user")
    t.check([j["id"] for j in history(user="hpcqtest")] == [theirs], "users see their own")
    t.check(history("--since", "2999-01-01") == [], "--since in the future")
    t.check(len(history("--until", "2999-01-01")) == 3, "--until in the future")
    p = t.hpcq("history", "--since", "yesterday", rc=2)
    t.check("--since" in p.stderr, p.stderr)
    p = t.hpcq("history", "--state", "DONE", rc=2)
    t.check("DONE" in p.stderr, p.stderr)
    t.check("CPUTIME" in t.hpcq("history").stdout, "table header")
    t.hpcq("cancel", str(running))


t.main([test_history_filters_and_accounting])
