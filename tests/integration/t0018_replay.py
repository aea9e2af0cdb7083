#!/usr/bin/env python3
"""hpcqd's decision log replays identically: ~30 jobs of mixed shapes and
lengths on 3 agents under allocate + backfill, then `hpcq simulate --replay`
runs the same scheduler over the logged inputs and must decide the same
(exit 0, "identical"); a tampered copy reports its line and exits 1, a
malformed one exits 2."""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

CONFIG = "/tmp/hpcq-t0018.toml"
LOG = "/tmp/hpcq-t0018-decisions.jsonl"
if not os.environ.get("HPCQ_TEST_INSIDE"):
    # The daemon appends: start from an empty log.
    if os.path.exists(LOG):
        os.remove(LOG)
    with open(CONFIG, "w") as f:
        f.write(f"""
[scheduler]
actions = ["allocate", "backfill"]
plugins = ["fcfs"]
decision_log = "{LOG}"
""")
t.within_cluster(agents=3, fanout=2, topology="pack:1 numa:1 core:4 pu:1",
                 extra=("--config", CONFIG))


def replay(path):
    return t.run([t.HPCQ, "simulate", "--replay", path])


def test_mixed_jobs_replay_identically():
    d = t.workdir()
    rng = random.Random(18)
    jobs = []
    for _ in range(30):
        nodes = rng.randint(1, 2)
        tasks = rng.randint(nodes, 4)
        secs = rng.choice(["0", "0.5", "1", "2"])
        jobs.append(t.submit("-N", str(nodes), "-n", str(tasks), "-t", str(rng.randint(1, 5)),
                             "-o", "r-%j.out", "--", "sleep", secs, cwd=d))
    for j in jobs:
        t.wait_state(j, "COMPLETED", timeout=120)
    with open(LOG) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    starts = [l for l in lines if l["type"] == "start"]
    t.check(len(starts) == len(jobs), f"{len(starts)} start lines for {len(jobs)} jobs")
    t.check(sum(1 for l in lines if l["type"] == "node") == 3, "three node lines")
    p = replay(LOG)
    t.check(p.returncode == 0, f"replay exit {p.returncode}: {p.stdout} {p.stderr}")
    t.check(p.stdout.strip().endswith(f"{len(jobs)} starts: identical"), p.stdout)

    # The first start moved to other cores: a difference at its line.
    with open(LOG) as f:
        raw = f.readlines()
    first = next(i for i, l in enumerate(raw) if json.loads(l)["type"] == "start")
    line = json.loads(raw[first])
    part = line["allocation"][0]
    part["cores"] = [c + len(part["cores"]) for c in part["cores"]]
    tampered = os.path.join(d, "tampered.jsonl")
    with open(tampered, "w") as f:
        f.writelines(raw[:first] + [json.dumps(line) + "\n"] + raw[first + 1:])
    p = replay(tampered)
    t.check(p.returncode == 1, f"tampered replay exit {p.returncode}: {p.stdout} {p.stderr}")
    t.check(f"line {first + 1}: job {line['job']}" in p.stdout, p.stdout)

    bad = os.path.join(d, "bad.jsonl")
    with open(bad, "w") as f:
        f.writelines(raw[:3] + ['{"t":1,"type":"end"}\n'] + raw[3:])
    p = replay(bad)
    t.check(p.returncode == 2 and f"{bad}:4: field 'job'" in p.stderr, f"{p.returncode} {p.stderr}")


def test_simulate_flags():
    """--option and --half-life (no daemon needed; checked here with the
    other simulate flags this test adds)."""
    d = t.workdir()
    trace = os.path.join(d, "tiny.swf")
    with open(trace, "w") as f:
        # id submit wait run procs cpu mem req_procs req_time ... user
        f.write("1 0 -1 100 4 -1 -1 4 100 -1 1 7 -1 -1 -1 -1 -1 -1\n"
                "2 10 -1 10 4 -1 -1 4 10 -1 1 8 -1 -1 -1 -1 -1 -1\n")
    p = t.hpcq("simulate", trace, "--cores", "4", "--policy", "wfp3", "--option",
               "wfp3.wait=rlscheduler", "--half-life", "12h", "--json")
    out = json.loads(p.stdout)
    t.check(out["options"] == ["wfp3.wait=rlscheduler"] and out["half_life_s"] == 43200, p.stdout)
    for args, why in ((["--option", "wfp3.wait=later"], "wfp3.wait"),
                      (["--option", "nokey"], "is not KEY=VALUE"),
                      (["--half-life", "3x"], "--half-life '3x'")):
        p = t.hpcq("simulate", trace, "--cores", "4", "--policy", "wfp3", *args, rc=2)
        t.check(why in p.stderr and p.stderr.count("\n") == 1, p.stderr)
    p = t.hpcq("simulate", trace, "--replay", trace, rc=2)
    t.check("not both" in p.stderr, p.stderr)


t.main([test_mixed_jobs_replay_identically, test_simulate_flags])
