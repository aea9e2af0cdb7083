#!/usr/bin/env python3
"""Bad input, table-driven: malformed scripts, options and config files each
get a one-line error naming the problem and exit status 2 (1 for a missing
job or an unreachable daemon); the daemon keeps serving throughout."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=1, fanout=2)

SCRIPTS = {
    "unknown_directive.sh": ("#!/bin/sh\n#HPCQ -N 1\n#HPCQ --frobnicate\ntrue\n", "unknown_directive.sh:3"),
    "bad_mem.sh": ("#!/bin/sh\n#HPCQ --mem=lots\ntrue\n", "lots"),
    "bad_time.sh": ("#!/bin/sh\n#HPCQ -t 1:2:3:4\ntrue\n", "1:2:3:4"),
    "bad_quote.sh": ("#!/bin/sh\n#HPCQ -J \"unterminated\ntrue\n", "bad_quote.sh:2"),
    "bad_nodes.sh": ("#!/bin/sh\n#HPCQ -N many\ntrue\n", "many"),
}

# (arguments, expected exit status, text the message must contain)
CASES = [
    (["submit", "--mem", "lots", "true"], 2, "lots"),
    (["submit", "--frobnicate", "true"], 2, "frobnicate"),
    (["submit", "-t", "-5", "true"], 2, "-5"),
    (["submit", "-n", "0", "true"], 2, "ntasks"),
    (["submit", "-N", "3", "-n", "2", "true"], 2, "nodes"),
    (["submit", "-c", "x", "true"], 2, "x"),
    (["submit"], 2, "no command"),
    (["status", "abc"], 2, "abc"),
    (["status", "999999"], 1, "999999"),
    (["cancel", "424242"], 1, "424242"),
    (["cancel"], 2, "jobs"),
    (["frobnicate"], 2, "frobnicate"),
    (["wait", "0"], 2, "0"),
]

CONFIGS = {
    "unknown key": ("[leader]\nstate_dirr = \"/tmp\"\n", ":2", "state_dirr"),
    "bad value": ("[overlay]\nfanout = \"wide\"\n", ":2", "fanout"),
    "negative": ("[overlay]\nfanout = -1\n", ":2", "fanout"),
    "syntax": ("[leader\n", ":1", "invalid key"),
    "no ranks": ("[leader]\nsocket = \"/tmp/x.sock\"\n", "", "rank"),
    "short key": ("[[rank]]\nname = \"a\"\nendpoint = \"tcp://127.0.0.1:1\"\npublic_key = \"x\"\n", ":1", "public_key"),
}


def one_line(p):
    lines = p.stderr.strip().splitlines()
    return len(lines) == 1, p.stderr


def test_bad_scripts():
    d = t.workdir()
    for name, (text, needle) in SCRIPTS.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
        p = t.run([t.HPCQ, "submit", name], cwd=d)
        t.check(p.returncode == 2, f"{name}: exit {p.returncode} ({p.stderr.strip()})")
        ok, err = one_line(p)
        t.check(ok and needle in err, f"{name}: message {err!r} lacks {needle!r}")


def test_bad_options():
    d = t.workdir()
    for args, rc, needle in CASES:
        p = t.run([t.HPCQ, *args], cwd=d)
        t.check(p.returncode == rc, f"{args}: exit {p.returncode}, expected {rc} ({p.stderr.strip()})")
        ok, err = one_line(p)
        t.check(ok and needle in err, f"{args}: message {err!r} lacks {needle!r}")


def test_unreachable_daemon():
    # (Asking again for 1 s, not the default 60 s: cli/client.h.)
    env = dict(os.environ, HPCQ_SOCKET="/nonexistent/hpcqd.sock", HPCQ_RETRY_S="1")
    p = t.run([t.HPCQ, "queue"], env=env)
    t.check(p.returncode == 1 and "not reachable" in p.stderr, p.stderr)
    t.check(len(p.stderr.strip().splitlines()) == 1, p.stderr)


def test_bad_config_files():
    d = tempfile.mkdtemp(prefix="hpcq-config-")
    for name, (text, where, needle) in CONFIGS.items():
        path = os.path.join(d, name.replace(" ", "_") + ".toml")
        with open(path, "w") as f:
            f.write(text)
        for prog, extra in ((t.HPCQD, []), (t.AGENT, ["--rank", "1"])):
            p = t.run([prog, "--config", path, *extra])
            t.check(p.returncode == 2, f"{name} ({prog}): exit {p.returncode}: {p.stderr.strip()}")
            ok, err = one_line(p)
            t.check(ok and path + where in err and needle in err,
                    f"{name} ({prog}): message {err!r} lacks {path + where!r} / {needle!r}")


def test_daemon_still_serving():
    job = t.submit("--", "true", cwd=t.workdir())
    t.hpcq("wait", str(job))


t.main([test_bad_scripts, test_bad_options, test_unreachable_daemon, test_bad_config_files,
        test_daemon_still_serving])
