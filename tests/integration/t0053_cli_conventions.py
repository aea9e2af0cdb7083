#!/usr/bin/env python3
"""The command line's conventions (issue 45 items 19, 9 and 10): every
command's --help prints its own help on stdout and exits 0; hpcq, hpcqd and
hpcq-agent take --version; every command takes --json and prints JSON;
`hpcq batch /dev/zero` is refused at once, not read; job and step ids are
digits only; --begin reads now+COUNT as seconds with Slurm's unit words and
refuses overflow and more than 365 days ahead; `hpcq status JOB.STEP` shows
the step."""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:2 pu:1")

ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")
COMMANDS = ["submit", "batch", "run", "alloc", "rsh", "simulate", "attach", "signal", "cancel",
            "status", "wait", "queue", "nodes", "queues", "leaders", "hold", "release",
            "checkpoint", "migrate", "resize", "drain", "resume", "requeue", "stat", "update",
            "history", "keygen", "hostnames", "reserve", "start"]


def one_line(p):
    lines = p.stderr.strip().splitlines()
    t.check(len(lines) == 1, f"want one line on stderr, got {p.stderr!r}")
    return lines[0]


def as_json(p):
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError as e:
        raise t.Failure(f"not JSON ({e}): {p.stdout!r}")


def test_every_command_has_its_own_help():
    top = t.hpcq("--help")
    t.check(top.stdout.startswith("hpcq: ") and "hpcq [OPTIONS] SUBCOMMAND" in top.stdout,
            f"the top-level help names no program: {top.stdout[:200]!r}")
    for command in COMMANDS:
        t.check(re.search(rf"^\s+{command}\s", top.stdout, re.M) is not None,
                f"hpcq --help does not list {command}")
    for command in COMMANDS:
        for flag in ("--help", "-h"):
            p = t.run([t.HPCQ, command, flag])
            t.check(p.returncode == 0, f"hpcq {command} {flag}: exit {p.returncode}: {p.stderr}")
            t.check(p.stderr == "", f"hpcq {command} {flag} wrote on stderr: {p.stderr!r}")
            t.check(re.search(rf"(?i)usage: hpcq {command}\b", p.stdout) is not None
                    or f"hpcq {command}" in p.stdout.splitlines()[0],
                    f"hpcq {command} {flag} is not its own help: {p.stdout[:300]!r}")
    # The options of a submission, not one line of usage.
    p = t.hpcq("batch", "-N", "2", "--help")
    t.check("--begin WHEN" in p.stdout and len(p.stdout.splitlines()) > 20, p.stdout)
    # After the command, --help is the command's own argument.
    d = t.workdir()
    job = t.submit("--begin", "now+1hour", "-o", "/dev/null", "grep", "--help", cwd=d)
    t.check(t.status(job)["command"] == ["grep", "--help"], f"{t.status(job)}")
    t.hpcq("cancel", str(job))


def test_version_of_the_three_binaries():
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "meson.build")
    with open(source) as f:
        version = re.search(r"version\s*:\s*'([^']+)'", f.read()).group(1)
    for binary, name in ((t.HPCQ, "hpcq"), (t.HPCQD, "hpcqd"), (t.AGENT, "hpcq-agent")):
        p = t.run([binary, "--version"], check_rc=0)
        # "hpcq 0.1.0 (commit 88f0ac6, protocol 2)": t0039 checks the rest.
        t.check(re.fullmatch(re.escape(f"{name} {version}") + r" \(commit \S+, protocol \d+\)",
                             p.stdout.strip()) is not None, f"{binary} --version: {p.stdout!r}")


def test_every_command_takes_json():
    d = t.workdir()
    pending = t.submit("--begin", "now+1h", "-o", "/dev/null", "--", "true", cwd=d)
    running = t.submit("-o", "/dev/null", "--", "sleep", "300", cwd=d)
    t.wait_state(running, "RUNNING")

    for command in ("hold", "release"):
        out = as_json(t.hpcq(command, str(pending), "--json"))
        t.check(out == [{"id": pending, "ok": True}], f"{command} --json: {out}")
    out = as_json(t.hpcq("signal", str(running), "CONT", "--json"))
    t.check(out == [{"id": running, "ok": True}], f"signal --json: {out}")
    out = as_json(t.hpcq("requeue", str(running), "--json"))
    t.check(out == [{"id": running, "ok": True}], f"requeue --json: {out}")

    # A failure is a row of its own (and its line on stderr); the others go on.
    p = t.hpcq("cancel", str(pending), "999999", "--json", rc=1)
    out = as_json(p)
    t.check(out[0] == {"id": pending, "ok": True} and out[1]["id"] == 999999
            and out[1]["ok"] is False and out[1]["error"], f"cancel --json: {out}")
    t.check("999999" in one_line(p), p.stderr)
    out = as_json(t.hpcq("cancel", str(running), "--json"))
    t.check(out == [{"id": running, "ok": True}], f"cancel --json: {out}")
    t.wait_state(running, ENDED)

    out = as_json(t.hpcq("hostnames", "n[1-3],x", "--json"))
    t.check(out == ["n1", "n2", "n3", "x"], f"hostnames --json: {out}")

    node = as_json(t.hpcq("nodes", "--json"))[0]["name"]
    out = as_json(t.hpcq("drain", node, "--reason", "t0053", "--json"))
    t.check(out == [{"node": node, "ok": True}], f"drain --json: {out}")
    out = as_json(t.hpcq("resume", node, "--json"))
    t.check(out == [{"node": node, "ok": True}], f"resume --json: {out}")
    out = as_json(t.hpcq("resume", "nosuchnode", "--json", rc=1))
    t.check(out[0]["node"] == "nosuchnode" and out[0]["ok"] is False, f"resume --json: {out}")

    key = os.path.join(d, "key")
    out = as_json(t.hpcq("keygen", key, "--json"))
    t.check(out["file"] == key and len(out["public_key"]) == 40, f"keygen --json: {out}")

    t.hpcq("reserve", "create", "t0053", "--nodes", node, "--start", "now+2hours",
           "--duration", "10m", "--users", "root", "--json")
    out = as_json(t.hpcq("reserve", "delete", "t0053", "--json"))
    t.check(out == {"name": "t0053", "deleted": True}, f"reserve delete --json: {out}")

    # attach follows output as it comes: --json is refused, in one line.
    p = t.hpcq("attach", str(running), "--json", rc=2)
    t.check("--json" in one_line(p), p.stderr)


def test_a_script_is_a_bounded_regular_file():
    d = t.workdir()
    for command in ("batch", "submit"):
        start = time.monotonic()
        p = t.hpcq(command, "/dev/zero", rc=2)
        t.check(time.monotonic() - start < 5, f"hpcq {command} /dev/zero took "
                f"{time.monotonic() - start:.1f}s")
        t.check("'/dev/zero' is not a regular file" in one_line(p), p.stderr)
    big = os.path.join(d, "big.sh")
    with open(big, "w") as f:
        f.write("#!/bin/sh\n" + ("# padding\n" * (5 << 17)))  # 6.25 MiB
    p = t.hpcq("batch", big, rc=2)
    t.check("is larger than 4 MiB" in one_line(p), p.stderr)
    # A large command that is no script is a command, as before.
    binary = os.path.join(d, "big.bin")
    with open(binary, "wb") as f:
        f.write(b"\x7fELF" + b"\0" * (5 << 20))
    job = t.submit("--begin", "now+1h", "-o", "/dev/null", binary, cwd=d)
    t.hpcq("cancel", str(job))


def test_ids_are_digits_and_begin_is_bounded():
    for bad in ("17.+1", "17. 1", "+17", " 17", "17x", "0", "17.", "17.0", "0x11"):
        for args in (("cancel", bad), ("status", bad), ("hold", bad), ("signal", bad, "TERM"),
                     ("stat", bad), ("requeue", bad)):
            p = t.hpcq(*args, rc=2)
            t.check("is not a job" in one_line(p), f"hpcq {' '.join(args)}: {p.stderr}")
    d = t.workdir()
    for begin in ("now+99999999999", "now+99999999999999999999999", "now+366days",
                  "now+53weeks", "2999-01-01"):
        p = t.hpcq("submit", "--begin", begin, "--", "true", rc=2)
        t.check("more than 365 days ahead" in one_line(p), f"--begin {begin}: {p.stderr}")
    p = t.hpcq("submit", "--begin", "now+5fortnights", "--", "true", rc=2)
    t.check("bad offset" in one_line(p), p.stderr)
    # Slurm's default unit is seconds; its unit words are read.
    for begin, seconds in (("now+600", 600), ("now+2hours", 7200), ("now+1week", 604800)):
        job = t.submit("--begin", begin, "-o", "/dev/null", "--", "true", cwd=d)
        s = t.status(job)
        t.check(abs(s["begin_time"] - s["submit_time"] - seconds) <= 5,
                f"--begin {begin}: begin {s['begin_time']}, submitted {s['submit_time']}")
        p = t.hpcq("update", str(job), "--begin", "now+400days", rc=2)
        t.check("more than 365 days ahead" in one_line(p), p.stderr)
        t.hpcq("cancel", str(job))
    node = as_json(t.hpcq("nodes", "--json"))[0]["name"]
    p = t.hpcq("reserve", "create", "far", "--nodes", node, "--start", "now+400days",
               "--duration", "10m", rc=2)
    t.check("more than 365 days ahead" in one_line(p), p.stderr)


def test_status_of_a_step():
    d = t.workdir()
    script = os.path.join(d, "steps.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n#HPCQ -N 1 -n 1\nhpcq run -n 1 true\nsleep 300\n")
    job = int(t.hpcq("batch", "-o", os.path.join(d, "out"), script, cwd=d).stdout)
    t.wait_until("the step ended", lambda: any(
        s["state"] == "COMPLETED" for s in t.status(job).get("steps", [])), timeout=60)
    out = as_json(t.hpcq("status", f"{job}.1", "--json"))
    t.check(out["id"] == job and out["step"] == 1 and out["state"] == "COMPLETED"
            and out["command"] == ["true"], f"status {job}.1 --json: {out}")
    text = t.hpcq("status", f"{job}.1").stdout
    t.check(text.startswith(f"StepId={job}.1 ") and "State=COMPLETED" in text, text)
    p = t.hpcq("status", f"{job}.9", rc=1)
    t.check(f"job {job} has no step 9" in one_line(p), p.stderr)
    t.hpcq("cancel", str(job))
    t.wait_state(job, ENDED)


t.main([test_every_command_has_its_own_help, test_version_of_the_three_binaries,
        test_every_command_takes_json, test_a_script_is_a_bounded_regular_file,
        test_ids_are_digits_and_begin_is_bounded, test_status_of_a_step])
