#!/usr/bin/env python3
"""Regenerates every figure table in README.md, docs/benchmarks.md and
docs/failover.md from the files under bench/results/, so that no published
figure is typed by hand.

Each table sits between two marker comments in its file:

    <!-- figures:NAME -->
    ...generated text...
    <!-- /figures:NAME -->

and is followed, inside the markers, by a caption that names the command
that produced the data, the results file and the rule that picks its rows.
The rules are written below, one function per table; none picks a line by
its number. Where a figure is a min and median over several runs, both are
computed here from every stored run of that kind.

Usage: bench/readme_figures.py [--check | --write]
  --check (the default): exit 1, printing one line per table whose text
          differs from what the results give (or whose markers are missing
          or unknown); exit 0 when all agree.
  --write: rewrite the text between the markers.
Standard library only; reads nothing but bench/results/*.jsonl.
"""
import argparse
import json
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")

# What the results lines do not record, and where it comes from.
#
# The machine: no line names one. The project's VM was a 2-core Debian 12 VM
# until 2026-11-24; from 2026-11-25 it is a 2-core 6.18 PVM guest (commits
# e35e947 and bc4555b name it). Results are assigned to one or the other by
# the date in their line.
PVM_FROM = "2026-11-25"
EARLIER_VM = "the earlier 2-core VM"
PVM_GUEST = "the 2-core 6.18 PVM guest"
# The load beside a throughput.py invocation, keyed by the time in its first
# line: the issue "Trustworthy figures" says the first 2026-11-22 run had a
# niced build running beside it; the second, the one with Slurm, ran on a
# quiet machine. Every other run's load is "not recorded".
THROUGHPUT_LOAD = {
    "2026-11-22T19:27:43": "a niced build running beside it",
    "2026-11-22T19:32:14": "quiet machine",
}
NOT_RECORDED = "load not recorded"
# The load beside an mpi_wireup.py invocation, keyed by the time in its lines.
MPI_WIREUP_LOAD = {
    "2026-11-26T13:39:48": "a guest VM (qemu TCG, the cgroup v2 tests written alongside) busy beside "
                           "it at times, and a compiler",
    "2026-11-28T00:07:02": "quiet machine (an editor beside it)",
    "2026-11-28T10:07:08": "quiet for hpcq's half; a helper's niced build beside most of Slurm's",
    "2026-11-28T10:17:18": "quiet machine",
    "2026-11-29T14:00:14": "quiet machine",
    "2026-11-29T14:14:41": "quiet machine",
    "2026-11-29T14:52:25": "quiet machine",
}
RECORDED = "load recorded"
# migrate_cost.jsonl's lines carry neither date nor machine: the first line for
# each executor and size was measured on the earlier VM (commit ebda142,
# 2026-11-24), the second on the PVM guest (commit bc4555b, 2026-11-25).
MIGRATE_MACHINES = [f"{EARLIER_VM} (2026-11-24)", f"{PVM_GUEST} (2026-11-25)"]


# ---------------------------------------------------------------- helpers

def load(name):
    with open(os.path.join(RESULTS, name + ".jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def machine(when):
    return PVM_GUEST if when[:10] >= PVM_FROM else EARLIER_VM


def num(x, d=0):
    return f"{x:,.{d}f}"


def pct(x, d=1):
    return f"{100 * x:.{d}f}%"


def median(values):
    return statistics.median(values)


def min_median(values, d=0):
    """One run: its value; several: "min / median"."""
    if len(values) == 1:
        return num(values[0], d)
    return f"{num(min(values), d)} / {num(median(values), d)}"


def span(values, d=0, unit=""):
    lo, hi = num(min(values), d), num(max(values), d)
    return f"{lo}{unit}" if lo == hi else f"{lo}-{hi}{unit}"


def runs_word(n):
    return f"{n} run" if n == 1 else f"{n} runs"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def latest_by(rows, key):
    """The last row for each key, in the order the keys first appear."""
    out = {}
    for r in rows:
        out[key(r)] = r
    return out


# ---------------------------------------------------------------- throughput

MEASUREMENTS = [  # (measurement, row title, value field, decimals)
    ("submit_rate_1_clients", "(a) acknowledged submissions/s through gRPC, 1 client",
     "per_second", 0),
    ("submit_rate_8_clients", "(a) acknowledged submissions/s through gRPC, 8 clients",
     "per_second", 0),
    ("api_end_to_end_16_cores",
     "(b) `true` jobs end to end via the API (8 clients), 4 nodes x 16 cores, jobs/s",
     "per_second", 1),
    ("api_end_to_end_2_cores", "(b) the same, 4 nodes x 2 cores, jobs/s", "per_second", 1),
    ("cli_end_to_end_2_cores",
     "(c) hpcq, one `hpcq submit` per job, then `hpcq wait`, 4 nodes x 2 cores, jobs/s",
     "per_second", 1),
    ("slurm_cli_end_to_end_2_cores",
     "(c) Slurm 22.05 tuned, one `sbatch` per job, 4 nodes x 2 cores, jobs/s, same invocation",
     "e2e_jobs_per_s", 1),
    ("array_end_to_end_2_cores",
     "(d) hpcq, one array (`--array=1-N`), then `hpcq wait` on it, 4 nodes x 2 cores, jobs/s",
     "per_second", 1),
    ("slurm_array_end_to_end_2_cores",
     "(d) Slurm 22.05 tuned, one `sbatch --array`, 4 nodes x 2 cores, jobs/s, same invocation",
     "per_second", 1),
]


def throughput_invocations():
    """throughput.py appends its lines in a fixed order, starting with
    submit_rate_1_clients: each such line starts an invocation."""
    invocations = []
    for r in load("throughput"):
        if r["measurement"] == "submit_rate_1_clients" or not invocations:
            invocations.append({})
        invocations[-1][r["measurement"]] = r
    out = []
    for inv in invocations:
        first = inv["submit_rate_1_clients"]
        # Lines since rounds were added record the load average each began at.
        recorded = "load" in first
        out.append({"when": first["when"], "label": first.get("label", ""),
                    "load": (RECORDED if recorded else
                             THROUGHPUT_LOAD.get(first["when"], NOT_RECORDED)),
                    "loads": [r["load"] for r in inv.values() if "load" in r],
                    "host": first.get("host"), "commit": first.get("commit"), "by": inv})
    return out


def throughput_kinds():
    """Invocations of one kind: the same label, day and load."""
    kinds = {}
    for inv in throughput_invocations():
        kinds.setdefault((inv["when"][:10], inv["label"], inv["load"]), []).append(inv)
    return kinds


def kind_title(day, label, load_, n, invs=()):
    if load_ == RECORDED:
        loads = [x for inv in invs for x in inv["loads"]]
        load_ = f"load average {span(loads, 2)} as each measurement began"
    jobs = sorted({inv["by"][m]["jobs"] for inv in invs for m in ("api_end_to_end_2_cores",)
                   if m in inv["by"]})
    of = f" of {' and '.join(num(j) for j in jobs)} jobs" if jobs else ""
    return f"{day}, {label or 'no label'}, {load_} ({runs_word(n)}{of})"


def invocation_machine(inv):
    """The host a line names (recorded since rounds were added), else the
    machine of its date."""
    return f"host {inv['host']}, commit {inv['commit']}" if inv.get("host") else machine(
        inv["when"])


def ratio_cells(invs, hpcq="cli_end_to_end_2_cores", slurm="slurm_cli_end_to_end_2_cores",
                slurm_field="e2e_jobs_per_s"):
    """hpcq / Slurm for each invocation that ran both measurements."""
    ratios = [inv["by"][hpcq]["per_second"] / inv["by"][slurm][slurm_field]
              for inv in invs if hpcq in inv["by"] and slurm in inv["by"]]
    return (min_median(ratios, 1) + "x") if ratios else "-"


def fig_throughput():
    kinds = throughput_kinds()
    header = ["measurement"] + [kind_title(day, label, load_, len(invs), invs)
                                for (day, label, load_), invs in kinds.items()]
    rows = []
    for measurement, title, field, d in MEASUREMENTS:
        row = [title]
        for invs in kinds.values():
            values = [inv["by"][measurement][field] for inv in invs if measurement in inv["by"]]
            row.append(min_median(values, d) if values else "not run")
        rows.append(row)
    rows.append(["(c) hpcq / Slurm, same invocation"] + [ratio_cells(invs)
                                                         for invs in kinds.values()])
    rows.append(["(d) hpcq / Slurm, same invocation"] + [
        ratio_cells(invs, "array_end_to_end_2_cores", "slurm_array_end_to_end_2_cores",
                    "per_second") for invs in kinds.values()])
    notes = []
    for (day, label, load_), invs in kinds.items():
        times = ", ".join(inv["when"][11:16] for inv in invs)
        slurm = [inv for inv in invs if "slurm_cli_end_to_end_2_cores" in inv["by"]]
        extra = ""
        if slurm:
            reps = ", ".join(str(inv["by"]["slurm_cli_end_to_end_2_cores"].get("rep", "?"))
                             for inv in slurm)
            extra = f"; Slurm ran in the same invocation, once (`rep` {reps})"
        notes.append(f"- {kind_title(day, label, load_, len(invs), invs)}: started at {times}; "
                     f"{invocation_machine(invs[0])}{extra}.")
    # A run without Slurm against the latest earlier run with it on the same
    # day (once): what the issue quotes, said with its load.
    for (day, label, load_), invs in kinds.items():
        lone = [i for i in invs if "slurm_cli_end_to_end_2_cores" not in i["by"]]
        quiet = [o for key, others in kinds.items() if key[0] == day
                 for o in others if "slurm_cli_end_to_end_2_cores" in o["by"]
                 and o["when"] <= invs[0]["when"]]
        if lone and quiet:
            base = max(quiet, key=lambda o: o["when"])
            h = median([i["by"]["cli_end_to_end_2_cores"]["per_second"] for i in lone])
            s = base["by"]["slurm_cli_end_to_end_2_cores"]["e2e_jobs_per_s"]
            notes.append(f"- {day}, {label or 'no label'}: the one-call-per-job loop gave "
                         f"{num(h, 1)} jobs/s (median), {h / s:.1f}x the Slurm figure of "
                         f"{base['label'] or 'the unlabelled run'} ({base['when'][11:16]}); "
                         f"Slurm was not measured beside it.")
    with_slurm = [inv for invs in kinds.values() for inv in invs
                  if "slurm_cli_end_to_end_2_cores" in inv["by"]]
    newest = max((inv["when"] for invs in kinds.values() for inv in invs
                  if "slurm_cli_end_to_end_2_cores" not in inv["by"]), default="none")
    if with_slurm:
        last = with_slurm[-1]
        which = (f"commit {last['commit']}" if last.get("commit") else
                 "its lines carry no commit id")
        notes.append(f"- The newest comparison with Slurm is of {last['when'][:10]} ({which}) and "
                     f"was not re-run since; the newest hpcq-only run is of {newest[:10]}.")
    else:
        notes.append("- No run holds a Slurm figure.")
    # Lines record their load and commit from the first run of efc5a28 on.
    unrecorded = [inv["when"] for invs in kinds.values() for inv in invs
                  if inv["load"] != RECORDED]
    recorded = [inv["when"] for invs in kinds.values() for inv in invs
                if inv["load"] == RECORDED]
    if not recorded:
        loads = "no line records a load."
    elif unrecorded:
        loads = (f"the lines record the load average and the commit from "
                 f"{min(recorded)[:16].replace('T', ' ')} on, and the {len(unrecorded)} runs "
                 f"before record neither.")
    else:
        loads = "every line records the load average and the commit."
    return "\n".join([
        table(header, rows), "",
        "Each cell: the value of one run, or min / median over the runs of that column. "
        "Command: `bench/throughput.py [--label L] [--skip-slurm]` (as root). Results: "
        "`bench/results/throughput.jsonl`. Rows: every line; a line with "
        "`submit_rate_1_clients` starts an invocation, and a column holds the invocations "
        "of one day, label and load. The loads of the 2026-11-22 runs are as the issue "
        "\"Trustworthy figures\" gives them; " + loads,
        "", *notes])


# ---------------------------------------------------------------- launch latency

LAUNCH_CASES = [("outside", "1_task", "`run -n 1 true`"),
                ("outside", "4_nodes_4_tasks", "`run -N 4 -n 4 true`"),
                ("step", "1_task", "`run -n 1 true`, a step of a batch job"),
                ("step", "4_nodes_4_tasks", "`run -N 4 -n 4 true`, a step")]


def latest_label(name):
    """The label of the last line of results file `name`, and its lines."""
    rows = load(name)
    label = rows[-1].get("label", "")
    return label, [r for r in rows if r.get("label", "") == label]


def launch_stats(rows, system, where, case):
    return [r["median_ms"] for r in rows
            if r["system"] == system and r["where"] == where and r["case"] == case]


def fig_run_latency():
    label, rows = latest_label("run_latency")
    out = []
    for where, case, title in LAUNCH_CASES:
        h, s = (launch_stats(rows, sys_, where, case) for sys_ in ("hpcq", "slurm"))
        out.append([title, min_median(h, 1), min_median(s, 1) if s else "-",
                    f"{median(h) / median(s):.2f}" if s else "-"])
    runs = max(r["run"] for r in rows)
    when = rows[0]["when"]
    return "\n".join([
        table(["launch", "hpcq (ms)", "Slurm `srun` (ms)", "hpcq / Slurm (medians)"], out), "",
        f"Command to exit of `true`: each run's figure is the median of "
        f"{rows[0]['launches']} launches; each cell min / median of {runs} runs. hpcq with 4 "
        f"agents of 2 cores, Slurm 22.05 (4 x 2 CPUs) in the same session. Command: "
        f"`bench/run_latency.py --label {label}` (as root). Results: "
        f"`bench/results/run_latency.jsonl`, rows: the latest label in the file ({label}, "
        f"{when[:10]}); {machine(when)}; {NOT_RECORDED}."])


# ---------------------------------------------------------------- one CLI call

CLI_CASES = [("true", "`/bin/true` (starting any process)", "`/bin/true`"),
             ("help", "`hpcq --help`", "`sbatch --help`"),
             ("submit", "`hpcq submit -o /dev/null -- true`", "`sbatch -o /dev/null --wrap true`"),
             ("submit_deferred", "the same with `--begin now+3600`", "the same with `--begin now+3600`"),
             ("queue", "`hpcq queue`", "`squeue`"),
             ("submit_wait", "`hpcq submit --wait -o /dev/null -- true` (to its end)",
              "`sbatch -W -o /dev/null --wrap true`")]


def cli_stats(rows, system, case):
    return [r["median_ms"] for r in rows if r["system"] == system and r["case"] == case]


def fig_cli_latency():
    label, rows = latest_label("cli_latency")
    before = any(r["system"] == "hpcq-before" for r in rows)
    # hpcq's own Slurm commands (compat/slurm) against the same hpcqd.
    compat = any(r["system"] == "hpcq-slurm" for r in rows)
    out = []
    for case, hpcq_title, slurm_title in CLI_CASES:
        h, b, c, s = (cli_stats(rows, x, case) for x in ("hpcq", "hpcq-before", "hpcq-slurm", "slurm"))
        if not h:
            continue  # a case the run did not have
        out.append([hpcq_title, min_median(h, 1)] + ([min_median(b, 1)] if before else []) +
                   [slurm_title] + ([min_median(c, 1) if c else "-"] if compat else []) +
                   [min_median(s, 1) if s else "-",
                    f"{median(s) / median(h):.1f}x" if s else "-"] +
                   ([f"{median(s) / median(c):.1f}x" if s and c else "-"] if compat else []))
    runs = max(r["run"] for r in rows)
    first = rows[0]
    return "\n".join([
        table(["hpcq command", "hpcq (ms)"] + (["the command before (ms)"] if before else []) +
              ["Slurm command"] + (["hpcq's Slurm command (ms)"] if compat else []) +
              ["Slurm (ms)", "Slurm / hpcq (medians)"] +
              (["Slurm / hpcq's Slurm command"] if compat else []), out), "",
        f"Command to exit: each run's figure is the median of {first['calls']} calls one after "
        f"another; each cell min / median of {runs} runs. `hpcq submit` answers once the job "
        f"is committed to SQLite; the submitted `true` jobs run meanwhile (on Slurm too). "
        f"hpcq with 4 agents of 2 cores, Slurm 22.05 (4 x 2 CPUs) in the same session"
        + (", and \"the command before\" (an earlier `hpcq` speaking gRPC) against the same "
           "hpcqd, interleaved run by run" if before else "")
        + (", and hpcq's Slurm commands (compat/slurm: the same words as Slurm's, `sbatch`, "
           "`squeue`) against the same hpcqd, interleaved run by run; `--wait` and `-W` "
           "return once the job has ended" if compat else "") +
        f". Command: `bench/cli_latency.py --label {label}` (as root). Results: "
        f"`bench/results/cli_latency.jsonl`, rows: the latest label in the file ({label}, "
        f"{first['when'][:10]}, commit {first['commit']}); host {first['host']}; load average "
        f"{span([r['load'] for r in rows], 2)} as the runs' cases began."])


# ---------------------------------------------------------------- CPU per job

def fig_launch_cost():
    rows = load("launch_cost")
    labels = list(dict.fromkeys(r.get("label", "") for r in rows))
    out = []
    for label in labels:
        mine = [r for r in rows if r.get("label", "") == label]
        floor = [r["cpu_ms_per_job"] for r in mine if r["system"] == "floor"]
        hpcq = [r for r in mine if r["system"] == "hpcq"]
        part = lambda key: min_median([r[key] for r in hpcq], 1)
        total = [r["cpu_ms_per_job"] for r in hpcq]
        slurm = [r["cpu_ms_per_job"] for r in mine if r["system"] == "slurm"]
        out.append([f"{label} ({mine[0]['commit']}, {mine[0]['when'][:10]})", min_median(floor, 1),
                    part("leader_ms_per_job"), part("agent_ms_per_job"),
                    part("shell_ms_per_job"), min_median(total, 1),
                    f"{median(total) / median(floor):.1f}x",
                    min_median(slurm, 1) if slurm else "-",
                    f"{median(slurm) / median(total):.1f}x" if slurm else "-"])
    first = rows[-1]
    return "\n".join([
        table(["label (commit, date)", "floor", "hpcq leader", "agent", "shells and tasks",
               "hpcq in all", "hpcq / floor (medians)", "Slurm 22.05, contained",
               "Slurm / hpcq (medians)"], out), "",
        f"CPU ms per job (user + system), min / median of each label's runs. Floor: "
        f"`hpcq-launch-floor --jobs {first['jobs']}` (bench/launch_floor.cc: a cgroup per "
        f"controller made and removed, `true` cloned into a new PID namespace, waited for). "
        f"hpcq: {first['jobs']} `true` jobs through the API (8 clients) on `hpcq start --agents "
        f"4` (2 cores a node); hpcqd's and the agents' CPU from /proc, the shells' and tasks' as "
        f"the agents' reaped children. Slurm, in the same invocation where shown: the same "
        f"number of `true` jobs as one `sbatch --array` on the peer of ../shared/peers/slurm "
        f"(4 nodes x 2 CPUs, steps in cgroups), the CPU of its daemons and all they start "
        f"(slurmstepd, the job scripts, `true`) from a CPU accounting cgroup they were started "
        f"in, submit to empty queue. Command: `bench/launch_cost.py --label L` (as root). "
        f"Results: `bench/results/launch_cost.jsonl`, every label in the file, oldest first; "
        f"host {first['host']}."])


# ---------------------------------------------------------------- failover

def fig_failover():
    label, rows = latest_label("failover")
    kills = [r for r in rows if r["measurement"] == "failover"][-1]
    times = kills["failover_seconds"]
    loads = [r for r in rows if r["measurement"] == "load"]
    out = [["failover after kill -9 of the active leader, s (median / max)",
            "none: no standby", f"{num(median(times), 2)} / {num(max(times), 2)}", ""]]
    for key, what in (("submit_per_second_1_client", "acknowledged submissions/s, 1 client"),
                      ("submit_per_second_8_clients", "acknowledged submissions/s, 8 clients"),
                      ("end_to_end_per_second_8_clients", "jobs/s end to end, 8 clients")):
        by = {s: [r[key] for r in loads if r["store"] == s] for s in ("sqlite", "etcd")}
        out.append([what, min_median(by["sqlite"]), min_median(by["etcd"]),
                    f"{median(by['etcd']) / median(by['sqlite']):.2f}"])
    first = rows[0]
    return "\n".join([
        table(["measurement", "SQLite (one leader)", "etcd, 3 members (3 candidates)",
               "etcd / SQLite (medians)"], out), "",
        f"Failover: {len(times)} kills of the active hpcqd of `hpcq start --agents 4 --leaders 3` "
        f"(three candidates, an etcd of three members, one host) while a job runs: from the kill "
        f"until another candidate leads and answers `hpcq queue` (lease 3 s); the job ran on "
        f"({kills['job_state_after']} after the last). Cost: `hpcq-submit-load` with "
        f"{loads[0]['jobs']} `true` jobs on `hpcq start --agents 4` (2 cores a node) against "
        f"`--leaders 3`, alternating, min / median of {runs_word(len(loads) // 2)}; the three "
        f"etcd members share this host's 2 cores with everything else. Command: "
        f"`bench/failover.py --label L` (as root). Results: `bench/results/failover.jsonl`, "
        f"label {label} ({first['when'][:10]}, commit {first['commit']}); host {first['host']}."])


# ---------------------------------------------------------------- replication engines (failover.md)

REPLICATION_ROWS = [  # (measurement, row title)
    ("fsync_4k", "this disk: 4 KiB append + fdatasync"),
    ("sqlite_batch1_1", "SQLite WAL+FULL, 1 row/commit, 1 writer"),
    ("sqlite_batch1_8", "SQLite WAL+FULL, 1 row/commit, 8 writers"),
    ("sqlite_batch100_1", "SQLite WAL+FULL, 100 rows/commit, 1 writer"),
    ("sqlite_batch100_8", "SQLite WAL+FULL, 100 rows/commit, 8 writers"),
    ("etcd_put_1", "etcd x3, put via JSON gateway, 1 client"),
    ("etcd_put_8", "etcd x3, put via JSON gateway, 8 clients"),
    ("etcd_txn_batch1_1", "etcd x3, lease-conditional Txn, 1 put, 1 client"),
    ("etcd_txn_batch1_8", "etcd x3, lease-conditional Txn, 1 put, 8 clients"),
    ("etcd_txn_batch100_1", "etcd x3, lease-conditional Txn, 100 puts, 1 client"),
    ("etcd_txn_batch100_8", "etcd x3, lease-conditional Txn, 100 puts, 8 clients"),
    ("dqlite_demo_put_1", "dqlite x3, dqlite-demo HTTP PUT, 1 client"),
    ("dqlite_demo_put_8", "dqlite x3, dqlite-demo HTTP PUT, 8 clients"),
    ("dqlite_native_1", "dqlite x3, dqlite-benchmark kvwrite, 1 worker"),
    ("dqlite_native_8", "dqlite x3, dqlite-benchmark kvwrite, 8 workers"),
]
# What replication_engines.py's lines do not record, keyed by the time of an
# invocation's first line, as docs/failover.md gave it with the run (commit
# adf4fde): what made the load (its figure is recorded), and the kind of the
# errors dqlite-benchmark counted (SQLITE_BUSY; the lines count errors only).
REPLICATION_LOAD = {"2026-11-28T10:56:14": "mostly the benchmark's own 3 members and client "
                                           "on 2 cores"}
REPLICATION_ERRORS = {("2026-11-28T10:56:14", "dqlite_native_8"): "busy"}


def fig_replication():
    label, rows = latest_label("replication_engines")
    first = rows[0]
    by = lambda m: [r for r in rows if r["measurement"] == m]
    cell = lambda rs, key, d: min_median([r[key] for r in rs if r.get(key) is not None], d)
    out = []
    for measurement, title in REPLICATION_ROWS:
        rs = by(measurement)
        if not rs:
            continue
        # The client's and all members' CPU over the counted window, per write.
        cpu = [1e3 * (r["client_cpu_s"] + r["server_cpu_s"]) / r["acked"]
               for r in rs if r.get("acked") and "client_cpu_s" in r]
        errors = num(sum(r["errors"] for r in rs))
        busy = sum(r.get("busy_retries", 0) for r in rs)
        kind = REPLICATION_ERRORS.get((first["when"], measurement))
        errors += (f" (+{num(busy)} busy retries)" if busy else f" ({kind})" if kind else "")
        out.append([title, cell(rs, "per_second", 0), cell(rs, "p50_ms", 2),
                    cell(rs, "p99_ms", 2), f"{median(cpu):.2f}" if cpu else "-", errors])
    kills = [r for r in rows if r["measurement"].endswith("_failover")]
    fo = []
    for engine in ("etcd", "dqlite"):
        for deadline in sorted({r["deadline_s"] for r in kills if r["engine"] == engine}):
            rs = [r for r in kills if r["engine"] == engine and r["deadline_s"] == deadline]

            def med_max(key):
                x = [r[key] for r in rs if r[key] is not None]
                never = len(rs) - len(x)
                return ((f"{median(x):.2f} s / {max(x):.2f} s" if x else "never") +
                        (f" ({never} of {len(rs)} never)" if never and x else ""))
            fo.append([engine, f"{deadline:g} s", med_max("new_leader_s"),
                       med_max("recovery_s"),
                       f"{sum(r['lost'] for r in rs)} of {num(sum(r['acked'] for r in rs))}"])
    rounds = max(r["round"] for r in rows)
    seconds = by("sqlite_batch1_1")[0]["seconds"]
    per_kind = {len([r for r in kills if (r["engine"], r["deadline_s"]) == k])
                for k in {(r["engine"], r["deadline_s"]) for r in kills}}
    n_kills = " or ".join(str(n) for n in sorted(per_kind))
    fsync = by("fsync_4k")
    load_ = REPLICATION_LOAD.get(first["when"])
    # What the README's headline gives for acknowledged submissions today.
    invs = list(throughput_kinds().values())[-1]
    readme = min_median([i["by"]["submit_rate_8_clients"]["per_second"] for i in invs
                         if "submit_rate_8_clients" in i["by"]], 0)
    txn100 = [r["per_second"] for r in by("etcd_txn_batch100_1")]
    return "\n".join([
        table(["measurement", "acked writes/s", "p50 ms", "p99 ms", "CPU ms per write", "errors"],
              out), "",
        f"Min / median of {rounds} rounds of {seconds} s. All on 127.0.0.1, the 3 members sharing "
        f"one disk (a 4 KiB append + fdatasync: {num(median([r['p50_ms'] for r in fsync]), 2)} "
        f"ms, median p50); 1 KiB values; each engine with its defaults (etcd: heartbeat 100 ms, "
        f"election 1 s; dqlite: 500 ms, 3 s). \"CPU ms per write\" is the client's and all "
        f"members' CPU over the counted window, divided by the writes acknowledged in it "
        f"(median of the rounds; not recorded for the disk probe, nor for dqlite-benchmark, "
        f"whose workers run inside a member); \"errors\" sums the rounds'.",
        "",
        table(["failover", "client deadline", "a live member names a new leader",
               "next acknowledged put", "acked puts lost"], fo), "",
        f"Failover: one client writes back to back; the engine's leader gets kill -9; on an "
        f"error or after the client's deadline the client sends the next write to the next "
        f"member; the killed member is restarted and caught up between kills. Median / max over "
        f"{n_kills} kills of each engine and deadline; lost: acknowledged puts that could not be "
        f"read back, of all acknowledged.",
        "",
        f"Command: `bench/replication_engines.py --label {label}` ({rounds} rounds of "
        f"{seconds} s; {n_kills} kills per engine and client deadline; data under the default "
        f"`--tmp` /var/tmp, a file system `stat -f` names {first['fs']}). Results: "
        f"`bench/results/replication_engines.jsonl`, rows: the latest label in the file "
        f"({len(rows)} lines, label {label}, {first['when'][:10]}, commit {first['commit']}); "
        f"host \"{first['host']}\"; 1-minute load {span([r['load'] for r in rows], 1)} as each "
        f"measurement began" + (f", {load_}" if load_ else "") + ".",
        "",
        f"- A submit is 2 keys (job row, event; the id high-water mark once per batch), so a "
        f"group-commit writer on etcd would give roughly "
        f"{num(round(median(txn100) / 2, -2))} submits/s (half the 100-put Txn's median from "
        f"one writer), against the {readme} acknowledged submissions/s (min / median, 8 clients) of the README's "
        f"headline on SQLite: an estimate, not measured through hpcqd."])


# ---------------------------------------------------------------- MPI wire-up

def latest_mpi_wireup():
    """(label, rows) of the latest published mpi_wireup.py invocation. Rows
    labelled "trial" (a few launches to check the script or one size) are
    kept, never published."""
    rows = [r for r in load("mpi_wireup") if r.get("label") != "trial"]
    label = rows[-1].get("label", "")
    return label, [r for r in rows if r.get("label", "") == label]


# mpi_wireup.py recorded the host name alone until 2026-11-29 afternoon;
# these runs, that day, were on this machine.
MPI_WIREUP_HOSTS = {"vm769-turns": "vm 6.18.44-fc-v769 2 CPUs",
                    "vm769-turns-cgroups": "vm 6.18.44-fc-v769 2 CPUs"}


def mpi_machine(label, rows):
    host = rows[0].get("host", "")
    host = host if " " in host else MPI_WIREUP_HOSTS.get(label)
    return f"host {host}" if host else machine(rows[0]["when"])


def mpi_rows(rows, system, pmi, ranks, tls=None):
    return [r for r in rows if r["system"] == system and r.get("pmi", "pmi1") == pmi and
            r["ranks"] == ranks and r.get("ucx_tls") == tls]


def mpi_wireups(rows, system, pmi, ranks, tls=None):
    return [r["wireup_s"] for r in mpi_rows(rows, system, pmi, ranks, tls)]


def fig_mpi_wireup():
    label, rows = latest_mpi_wireup()
    # Rows with ucx_tls come from the script as of 2026-11-29 afternoon: MPICH
    # with UCX_TLS set too, the two systems taking turns launch by launch.
    same = next((r["ucx_tls"] for r in rows if r.get("ucx_tls")), None)
    kinds = [("hpcq", "pmi1", "slurm", "pmi2", None)] + (
        [("hpcq", "pmi1", "slurm", "pmi2", same)] if same else []) + [
        ("hpcq", "pmix", "slurm", "pmix", None)]
    out = []
    for n in sorted({r["ranks"] for r in rows}):
        line = [str(n)]
        for hpcq, hpcq_pmi, slurm, slurm_pmi, tls in kinds:
            h, s = (mpi_wireups(rows, hpcq, hpcq_pmi, n, tls),
                    mpi_wireups(rows, slurm, slurm_pmi, n, tls))
            line += [min_median(h, 2) if h else "-", min_median(s, 2) if s else "-",
                     f"{median(h) / median(s):.2f}" if h and s else "-"]
        out.append(line)
    header = ["ranks (4 nodes)", "hpcq PMI-1, MPICH (s)", "Slurm `--mpi=pmi2`, MPICH (s)",
              "hpcq / Slurm"]
    if same:
        header += [f"hpcq, MPICH, `UCX_TLS={same}` (s)", "Slurm, same (s)", "hpcq / Slurm"]
    header += ["hpcq PMIx, Open MPI (s)", "Slurm `--mpi=pmix`, Open MPI (s)", "hpcq / Slurm"]
    runs = max(r["run"] for r in rows)
    first = rows[0]
    launch, slurm_launch = ([r["wireup_s"] - r["init_s"] for r in mpi_rows(rows, system, pmi, 64)
                             if "init_s" in r]
                            for system, pmi in (("hpcq", "pmi1"), ("slurm", "pmi2")))
    method = ""
    if same:
        method += (
            "Both clusters up at once, taking turns launch by launch (which goes first "
            "alternating), the same number of ranks on each node under both" +
            (", Slurm's steps in cgroups as hpcq's jobs are (proctrack/cgroup, task/cgroup "
             "with ConstrainRAMSpace)" if any(r.get("peer_cgroups") for r in rows) else "") +
            ". "
            f"MPICH runs twice: with the transports its UCX picks, and with `UCX_TLS={same}` "
            "under both, so that neither uses a transport the other cannot: Slurm's nodes "
            "share this host's PID namespace, so its ranks on different nodes reach each other "
            "by CMA, which separate machines cannot; hpcq's nodes have a PID namespace each, so "
            "its ranks pair across nodes over TCP. ")
    for system, name in (("hpcq", "hpcq's"), ("slurm", "Slurm's")):
        again = sum(1 for r in rows if r["system"] == system and r.get("failed_attempts"))
        if again:
            method += (f"{again} of {name} launches failed once and were made again (the "
                       f"results file has each one's failed_attempts). ")
    if launch and slurm_launch:
        method += (
            "Of the 64-rank MPICH wire-up, the launch (until the first rank enters MPI_Init) "
            f"took {min_median(launch, 3)} s under hpcq and {min_median(slurm_launch, 3)} s "
            f"under Slurm; the rest is MPI_Init. ")
    return "\n".join([
        table(header, out), "",
        "From the launch command until every rank is past MPI_Init, for one program "
        "(examples/mpi/mpi_ring.c) built with MPICH 4.0 and with Open MPI 4.1 (ratios of "
        "medians). " + method +
        f"Open MPI's ranks run niced and told to yield while they wait under both "
        f"(and keep shared memory in a directory of their node's: the job's TMPDIR under hpcq, "
        f"one per slurmd under srun, as emulated nodes need); hpcq's nodes are declared down "
        f"after 60 s without a heartbeat, Slurm's after its default 300 s; Slurm's "
        f"slurmds each run in a mount namespace of their own so that its PMIx plugin's per-step "
        f"directories do not collide on one host; each cell min / median of {runs} runs. hpcq with "
        f"{first['nodes']} agents of {first['cores_per_node']} emulated cores, Slurm 22.05 "
        f"declaring {first['cores_per_node']} CPUs per node, in the same session, on 2 host "
        f"CPUs, ranks unbound on both. Command: `bench/mpi_wireup.py --label {label}` (as "
        f"root). Results: `bench/results/mpi_wireup.jsonl`, rows: the latest label in the file "
        f"({label}, {first['when'][:10]}, commit {first['commit']}); {mpi_machine(label, rows)}; "
        f"{MPI_WIREUP_LOAD.get(first['when'], NOT_RECORDED)}."])


# ---------------------------------------------------------------- scale

SCALE_REPEATS = 3  # scale.py's method since commit 932c07b: 3 interleaved repeats per size


# scale.py recorded no host before 2026-11-29's change: these runs of that
# day were made on this host, as their labels say.
SCALE_HOSTS = {"vm769-4c626cd": "vm 6.18.44-fc-v769 2 CPUs",
               "vm769-journal-dbeb7cb": "vm 6.18.44-fc-v769 2 CPUs"}


def scale_machine(day, label, rows):
    host = rows[0].get("host") or SCALE_HOSTS.get(label)
    return f"host {host}" if host else machine(day)


def scale_runs():
    """Lines of one label and one day are one run of scale.py."""
    runs = {}
    for r in load("scale"):
        runs.setdefault((r["when"][:10], r.get("label", "")), []).append(r)
    return runs


def repeats(rows):
    """The fewest repeats of any size in one run."""
    return min(sum(1 for r in rows if r["queued"] == q) for q in {r["queued"] for r in rows})


def scale_full_runs():
    """The runs made as scale.py makes them now: every size repeated."""
    return {k: rows for k, rows in scale_runs().items() if repeats(rows) >= SCALE_REPEATS}


def fig_scale():
    full = scale_full_runs()
    out, flat = [], []
    for (day, label), rows in full.items():
        for q in sorted({r["queued"] for r in rows}):
            rs = [r for r in rows if r["queued"] == q]
            col = lambda k, d: min_median([r[k] for r in rs], d)
            out.append([f"{day}, {label or 'no label'}", f"{q:,} x {len(rs)}",
                        col("agents_up_s", 1), col("drain_s", 2), col("jobs_per_second", 0),
                        col("steady_jobs_per_second", 0), col("bytes_per_queued_job", 0)])
        by = {q: [r["jobs_per_second"] for r in rows if r["queued"] == q] for q in (10000, 100000)}
        if all(by.values()):
            flat.append(f"{median(by[100000]) / median(by[10000]):.2f}x ({day}, "
                        f"{label or 'no label'})")
    left_out = [f"{day} ({label or 'no label'}, {runs_word(repeats(rows))} per size)"
                for (day, label), rows in scale_runs().items() if (day, label) not in full]
    machines = sorted({f"{day}: {scale_machine(day, label, rows)}"
                       for (day, label), rows in full.items()})
    notes = [
        "Each cell: min / median over the run's repeats (`x N` in the second column). "
        "Command: `bench/scale.py [--label L]` (as root; 256 agents, fan-out 16, "
        f"`--executor test`; sizes interleaved, {SCALE_REPEATS} repeats). Results: "
        "`bench/results/scale.jsonl`; rows: the lines of one day and label are one run, "
        f"and every run with at least {SCALE_REPEATS} repeats of each size is shown. "
        f"Machines ({'; '.join(machines)}); {NOT_RECORDED}.",
        "",
        "Median jobs/s with 100,000 queued against 10,000: " + ", ".join(flat) + "."]
    if left_out:
        notes += ["", "Not shown, fewer repeats than the method asks: " +
                  ", ".join(left_out) + "."]
    return "\n".join([table(["run", "jobs queued x repeats", "256 agents up (s)",
                             "resume to last end (s)", "jobs/s", "jobs/s, 10-90% of ends",
                             "leader bytes per queued job"], out), "", *notes])


# ---------------------------------------------------------------- queue memory

def fig_queue_memory():
    rows = load("queue_memory")
    kinds = {}
    for r in rows:
        kinds.setdefault((r["when"][:10], r.get("label", "")), []).append(r)
    out = [[f"{day}, {label or 'no label'}", len(rs),
            min_median([r["bytes_per_submitted_job"] for r in rs]),
            min_median([r["bytes_per_array_task"] for r in rs])]
           for (day, label), rs in kinds.items()]
    r0 = rows[0]
    return "\n".join([
        table(["run", "runs", "bytes per submitted job", "bytes per array task"], out), "",
        f"Growth of hpcqd's VmRSS divided by the jobs queued: {r0['jobs']:,} separate "
        f"`hpcq submit` calls from a shell carrying a {r0['environment_bytes']:,}-byte "
        f"environment, then one array of {r0['array_size']:,} tasks. Each cell: min / median. "
        "Command: `bench/queue_memory.py --build B1 --build B2 --label L1 --label L2` (as "
        "root). Results: `bench/results/queue_memory.jsonl`; rows: every line, grouped by day "
        f"and label. Machine by date ({', '.join(sorted({machine(r['when']) for r in rows}))}); "
        f"{NOT_RECORDED}."])


# ---------------------------------------------------------------- churn

def fig_churn():
    rows = load("churn")
    out = [[f"{r['jobs']:,}", r["agents"], r["kills"], num(r["baseline_per_second"], 1),
            num(r["churn_per_second"], 1), f"{r['ratio']:.2f}",
            f"{r['churn_completed']:,} of {r['churn_acked']:,}"] for r in rows]
    return "\n".join([
        table(["jobs", "agents", "kills of rank 1", "baseline jobs/s", "with kills jobs/s",
               "ratio", "completed (the rest NODE_FAIL on rank 1)"], out), "",
        "Command: `bench/churn.py --jobs N` (as root; `hpcq start --agents 16 --fanout 4`, "
        "rank 1 killed with -9 and restarted every 10 s). Results: `bench/results/churn.jsonl`, "
        f"every line (one run each, {', '.join(r['time'][:10] for r in rows)}); "
        f"{', '.join(sorted({machine(r['time']) for r in rows}))}; {NOT_RECORDED}."])


# ---------------------------------------------------------------- checkpoint and migration

def migrate_by_machine():
    seen, out = {}, []
    for r in load("migrate_cost"):
        k = (r["executor"], r["mb"])
        i = seen.get(k, 0)
        seen[k] = i + 1
        while len(out) <= i:
            out.append([])
        out[i].append(r)
    return out


def migrate_machine(i):
    return MIGRATE_MACHINES[i] if i < len(MIGRATE_MACHINES) else "machine not recorded"


def fig_migrate():
    out = []
    for i, rows in enumerate(migrate_by_machine()):
        for executor in ("process", "container"):
            rs = {r["mb"]: r for r in rows if r["executor"] == executor}
            out.append([migrate_machine(i), executor] +
                        [f"{rs[mb]['resumed_s']:.2f} ({rs[mb]['dump_s']:.2f})" if mb in rs else "-"
                         for mb in (10, 100, 1000)])
    runs = sorted({r["runs"] for rows in migrate_by_machine() for r in rows})
    return "\n".join([
        table(["machine", "executor", "10 MB", "100 MB", "1000 MB"], out), "",
        "Seconds from `hpcq migrate` to the job counting on at its new node (in brackets: "
        f"the dump alone); each figure is the median of {'/'.join(map(str, runs))} runs "
        "that migrate_cost.py keeps (it does not store the single runs, so no min is "
        "given). Command: `bench/migrate_cost.py --sizes 10,100,1000 --runs 3` (as root, 2 "
        "agents). Results: `bench/results/migrate_cost.jsonl`; rows: every line. The lines "
        "name no machine: the first line of each executor and size is the earlier VM's "
        "(commit ebda142), the second the PVM guest's (commit bc4555b)."])


def checkpoint_rows():
    return load("checkpoint_cost")


def fig_checkpoint():
    rows = checkpoint_rows()
    runs = {}
    out = []
    for r in sorted(rows, key=lambda r: r["mb"]):
        runs[r["mb"]] = runs.get(r["mb"], 0) + 1
        out.append([f"{r['mb']:,}", runs[r["mb"]], f"{r['dump_s']:.3f}",
                    f"{r['transfer_s']:.3f}" if "transfer_s" in r else "not timed",
                    f"{r['restore_s']:.3f}", num(r["image_mb"], 1),
                    "yes" if r["counts_on"] else "no"])
    return "\n".join([
        table(["MB held", "run", "criu dump s", "copy of the images s", "criu restore s",
               "images MB", "counts on"], out), "",
        "CRIU alone, one task held as the process executor holds a job; the copy goes to a "
        "second directory on the same disk, fsynced (a lower bound for a shared file system). "
        "Command: `bench/checkpoint_cost.py --sizes 10,100,1000` (as root); the script prints "
        "its lines on stdout only, and these were added to `bench/results/checkpoint_cost.jsonl` "
        "by hand. Rows: every line, in file order within a size (runs before the script timed "
        f"the copy have none). CRIU {', '.join(sorted({r['criu'] for r in rows}))}; "
        f"{EARLIER_VM} (commits f43a63a and da060cb, 2026-11-23/24)."])


def fig_container():
    r = load("container_slowdown")[-1]
    out = [["native (processes)", num(r["native_median_s"], 3), span(r["native_s"], 3),
            num(r["true_native_median_s"], 3)],
           ["runc container (`--image`)", num(r["container_median_s"], 3),
            span(r["container_s"], 3), num(r["true_container_median_s"], 3)]]
    return "\n".join([
        table(["how the job runs", "median s", f"range of {r['reps']} runs, s",
               "`true` job, median s"], out), "",
        f"c = native median / container median = {r['c']:.4f}; the start-up overhead of a "
        f"container is {1000 * r['overhead_s']:.0f} ms. c cannot be told from 1: the two "
        "medians differ by less than the spread of either. A CPU-bound busybox job counting "
        f"to {r['count_to']:,}, one task on one core, native and in a container alternately. "
        "Command: `bench/container_slowdown.py` (as root). Results: "
        "`bench/results/container_slowdown.jsonl`, the latest line "
        f"({r['time'][:10]}; {machine(r['time'])})."])


# ---------------------------------------------------------------- gap queue (paper 004)

def gap_rows():
    return load("gap_paper")


def gap_30_days():
    """The rows `gap_paper.py --seeds 2 --mode both` writes now (lomonosov-like,
    30 days, 2 seeds, with the kill_at_limit field), the latest per p and mode."""
    rows = [r for r in gap_rows() if r["source"] == "lomonosov-like" and r["days"] == 30
            and r["seeds"] == 2 and r.get("kill_at_limit") is False and not r.get("merged")]
    return latest_by(rows, lambda r: (r["p"], r["mode"]))


def gap_180_days():
    """The --merge rows of `--days 180 --seeds 10 --mode b`, the latest per p."""
    rows = [r for r in gap_rows() if r["source"] == "lomonosov-like" and r["days"] == 180
            and r["seeds"] == 10 and r.get("merged") and r["mode"] == "b"]
    return latest_by(rows, lambda r: r["p"])


def wait_cell(r):
    before, after = num(r["wait_s"]), num(r["wait_with_gap_s"])
    return before if before == after else f"{before} -> {after}"


def checkpoint_t():
    """The measured t: dump, copy and restore of 1 GB (the latest checkpoint_cost
    line of 1000 MB with a copy), over a one-hour slot."""
    r = [r for r in checkpoint_rows() if r["mb"] == 1000 and "transfer_s" in r][-1]
    return r["dump_s"] + r["transfer_s"] + r["restore_s"]


def fig_gap():
    short, long_ = gap_30_days(), gap_180_days()
    ps = sorted({p for p, _ in short})
    out = []
    for p in ps:
        b, a = short[(p, "b")], short[(p, "a")]
        l = long_.get(p)
        out.append([p, pct(b["load"]), pct(b["load_with_gap"]), pct(a["load_with_gap"]),
                    wait_cell(b) if wait_cell(b) == wait_cell(a) else
                    f"{wait_cell(b)} / {wait_cell(a)}",
                    f"{num(b['checkpointed'])} / {num(a['checkpointed'])}"] +
                   ([pct(l["load"]), pct(l["load_with_gap"]), wait_cell(l)] if l else
                    ["-", "-", "-"]))
    share = lambda rows: [r["gain"] / r["ceiling"] for r in rows]
    seed_loads = [s["load"] for r in long_.values() for s in r.get("per_seed", [])]
    seeds = sorted({s["seed"] for r in long_.values() for s in r.get("per_seed", [])})
    r0 = next(iter(short.values()))
    t_bench = 2 * r0["checkpoint_s"] / 3600
    t_meas = checkpoint_t()
    elapsed = [r["elapsed_s"] / 60 for r in long_.values()]
    short_elapsed = [r["elapsed_s"] for r in short.values()]
    return "\n".join([
        table(["p", "load", "Mode B", "Mode A", "wait s", "checkpoints B / A",
               "180 days: load", "Mode B", "wait s"], out), "",
        "Load over the arrival window without the gap queue, then with it (Modes B and A); "
        "the regular jobs' mean wait (one figure where it is the same with and without the "
        "gap queue); checkpoints (means over the seeds). Commands: `bench/gap_paper.py "
        f"--seeds 2 --mode both` (30 days) and `bench/gap_paper.py --days 180 --seeds 10 "
        "--mode b`, run in two parts (`--first-seed 0 --seeds 3`, `--first-seed 3 --seeds "
        "7`) and combined by the same command with `--merge`. Results: "
        "`bench/results/gap_paper.jsonl`; rows: for 30 days the latest line of each p and mode "
        "with source lomonosov-like, 30 days, 2 seeds and `kill_at_limit` false; for 180 days "
        "the latest `--merge` line (10 seeds) of each p. Simulations: the machine does not "
        f"change the figures. The rows' elapsed_s: {span(short_elapsed, 0)} s a seed, p and "
        f"mode for 30 days; {span(elapsed, 1)} min a seed and p for 180 days, on one core.",
        "",
        f"- The gap queue gains {span([100 * x for x in share(short.values())])}% of the "
        f"paper's ceiling (1-l)(1-t)c in 30 days and "
        f"{span([100 * x for x in share(long_.values())])}% over 180 days "
        f"({span([r['checkpointed'] / 1000 for r in long_.values()])} thousand checkpoints), "
        f"with the bench's t ({r0['checkpoint_s']} s save + {r0['checkpoint_s']} s restore of "
        "a one-hour slot).",
        f"- Over 180 days the baseline loads of the seeds whose loads the rows keep "
        f"({seeds[0]}-{seeds[-1]}) range over {span([100 * x for x in seed_loads], 1)}%."
        if seed_loads else "- The 180-day rows keep no per-seed loads.",
        f"- The ceiling from 90%, 0.1(1-t)c with c = {r0['c']}, is "
        f"{0.1 * (1 - t_meas / 3600) * r0['c']:.4f} with the measured t ({t_meas:.2f} s for "
        "the dump, copy and restore of 1 GB in `bench/results/checkpoint_cost.jsonl`, on "
        f"{EARLIER_VM}) and {0.1 * (1 - t_bench) * r0['c']:.3f} with the bench's "
        f"{r0['checkpoint_s']} + {r0['checkpoint_s']} s."])


def trace_name(source):
    return re.sub(r"(-\d{4}-[^/]*)?\.swf(\.gz)?$", "", source)


def fig_gap_traces():
    """The rows `gap_paper.py --trace T --cores N --mode both [--kill-at-limit]`
    writes now (with the kill_at_limit field), the latest per trace, setting
    and mode; --kill-at-limit rows only where they differ from the default."""
    rows = [r for r in gap_rows() if r["source"] != "lomonosov-like" and "kill_at_limit" in r]
    latest = latest_by(rows, lambda r: (r["source"], r["kill_at_limit"], r["mode"]))
    keys = ("load", "load_with_gap", "wait_s", "wait_with_gap_s", "checkpointed",
            "started_later", "started_earlier")
    out, same = [], []
    for source in dict.fromkeys(r["source"] for r in rows):
        for kill in (False, True):
            b, a = latest.get((source, kill, "b")), latest.get((source, kill, "a"))
            if not (b and a):
                continue
            if kill:
                d = latest.get((source, False, "b")), latest.get((source, False, "a"))
                if all(x and all(x[k] == y[k] for k in keys) for x, y in zip(d, (b, a))):
                    same.append(trace_name(source))
                    continue
            out.append([trace_name(source) + (", `--kill-at-limit`" if kill else ""),
                        b["cores"], pct(b["load"]),
                        f"{100 * b['load_with_gap']:.1f} / {pct(a['load_with_gap'])}",
                        wait_cell(b), f"{num(b['checkpointed'])} / {num(a['checkpointed'])}",
                        f"{num(b['started_later'])} / {num(b['started_earlier'])}"])
    return "\n".join([
        table(["trace", "cores", "load", "Mode B / A", "wait s", "checkpoints B / A",
               "started later / earlier (Mode B)"], out), "",
        "Command: `bench/gap_paper.py --trace ../shared/traces/T --cores N --mode both "
        "[--kill-at-limit]`. Results: `bench/results/gap_paper.jsonl`; rows: the latest line "
        "of each trace, mode and `kill_at_limit` among the lines that record "
        "`kill_at_limit`; a `--kill-at-limit` row is shown only where it differs from the "
        "default" + (f" (the same for {', '.join(same)})" if same else "") +
        f". The rows' elapsed_s: {span([r['elapsed_s'] for r in latest.values()], 0)} s a run."])


# ---------------------------------------------------------------- granularity (paper 000)

def fig_granularity():
    rows = load("granularity_paper")
    out = []
    for r in rows:
        paper = r.get("paper", {})
        def cell(vs_cm, vs_none, pk_cm, pk_none):
            if r["scenario"] == "NONE":
                return ""
            left = "-" if r["scenario"] == "CM" else f"{r[vs_cm]:.1f}"
            text = f"{left} \\| {r[vs_none]:.1f}"
            if pk_cm in paper:
                text += f" ({paper[pk_cm]} \\| {paper[pk_none]})"
            return text
        out.append([r["scenario"], num(r["mean_overall_response_s"]), num(r["mean_makespan_s"]),
                    cell("response_less_than_cm_pct", "response_less_than_none_pct",
                         "response_vs_cm", "response_vs_none"),
                    cell("makespan_less_than_cm_pct", "makespan_less_than_none_pct",
                         "makespan_vs_cm", "makespan_vs_none")])
    r0 = rows[0]
    return "\n".join([
        table(["scenario", "overall response s", "makespan s", "response -%", "makespan -%"],
              out), "",
        f"Means over {r0['reps']} random job sets (seed {r0['seed']}); the -% columns are % "
        "less than CM \\| NONE, the paper's in brackets. Base times are in assumed ratios, "
        f"scaled (BASE_S = {r0['base_s']} s) so that CM's makespan comes near the paper's "
        "Table III (2,529 s): CM's agreement with the paper is by construction. Command: "
        "`bench/granularity_paper.py` (`--reps 100`). Results: "
        "`bench/results/granularity_paper.jsonl` (rewritten by each run); rows: every line."])


# ---------------------------------------------------------------- elastic jobs

def fig_resize():
    latest = latest_by(load("resize_overhead"), lambda r: r["kind"])
    out = []
    for kind in ("shrink", "expand"):
        r = latest[kind]
        ms = lambda k: f"{r[k]['median']:.2f} / {r[k]['p90']:.2f} ms"
        a, b = r["nodes"].split("->")
        out.append([f"{kind} {a} -> {b}", ms("app_ms"), ms("leader_ms"), ms("cli_ms")])
    r = latest["shrink"]
    it = r["app_iteration_ms"]
    return "\n".join([
        table(["resize", "app: notice to ack (agent's clock)", "leader: decision to outcome",
               "`hpcq resize` wall time"], out), "",
        f"Median / p90 over {r['resizes']} resizes of each kind; {r['agents']} agents with "
        f"16-core emulated nodes on one {r['host_cpus']}-CPU VM; the app polls its socket once "
        f"per iteration ({it['at_4_nodes']:g}-{it['at_2_nodes']:g} ms here). Command: "
        "`bench/resize_overhead.py --rounds 20` (as root, after `ninja -C build`). Results: "
        "`bench/results/resize_overhead.jsonl`; rows: the latest line of each kind; "
        f"{EARLIER_VM} (commit b639b37, 2026-11-23)."])


ELASTIC_COMPRESS = 30.0  # the command the table names: --compress 30
ELASTIC_POLICIES = ("rigid-min", "rigid-max", "moldable", "elastic")


def fig_elastic_cluster():
    rows = load("elastic_cluster")
    same = [r for r in rows if r["compress"] == ELASTIC_COMPRESS]
    latest = latest_by(same, lambda r: r["policy"])
    out = []
    for p in ELASTIC_POLICIES:
        r = latest[p]
        real, sim = r["real"], r["simulated"]
        pair = lambda k, d=0: f"{num(real[k], d)} \\| {num(sim[k], d)}"
        out.append([p, pair("total_s"), pair("utilization_pct", 1),
                    pair("weighted_response_s"), pair("weighted_completion_s"),
                    f"{real['resizes']} \\| {sim['resizes']}"])
    total = lambda p: latest[p]["real"]["total_s"]
    off_total = max(abs(latest[p]["real"]["total_s"] / latest[p]["simulated"]["total_s"] - 1)
                    for p in ELASTIC_POLICIES)
    off_util = max(abs(latest[p]["real"]["utilization_pct"] -
                       latest[p]["simulated"]["utilization_pct"]) for p in ELASTIC_POLICIES)
    notes = [
        f"- The real run is within {100 * off_total:.0f}% of the simulation on total time and "
        f"{off_util:.0f} points on utilisation for every policy. Elastic's total time is "
        + ", ".join(f"{total('elastic') / total(p):.2f}x {p}"
                    for p in ELASTIC_POLICIES if p != "elastic") + "."]
    for p in ELASTIC_POLICIES:
        rs = [r for r in same if r["policy"] == p]
        if len(rs) > 1:
            real = lambda k, d=0: span([r["real"][k] for r in rs], d)
            notes.append(f"- {p} ran {len(rs)} times with `--compress {ELASTIC_COMPRESS:g}` "
                         f"(the table shows the latest): total {real('total_s')} s, utilisation "
                         f"{real('utilization_pct', 1)}%, w. response {real('weighted_response_s')}"
                         f" s, w. completion {real('weighted_completion_s')} s, resizes "
                         f"{real('resizes')}.")
    other = [r for r in rows if r["compress"] != ELASTIC_COMPRESS]
    if other:
        notes.append(f"- Not shown: {runs_word(len(other))} with another `--compress` (" +
                     ", ".join(f"{r['policy']} at {r['compress']:g}" for r in other) + ").")
    r0 = latest["elastic"]
    return "\n".join([
        table(["policy", "total s", "utilisation %", "w. response s", "w. completion s",
               "resizes"], out), "",
        f"Real \\| simulated (x {ELASTIC_COMPRESS:g}). Seed {r0['seed']}, serial fraction s = "
        f"{r0['serial_fraction']}, submission gap {r0['submit_gap_s']} s, rescale gap "
        f"{r0['rescale_gap_s']} s. Command: `bench/elastic_cluster.py --compress "
        f"{ELASTIC_COMPRESS:g}` (as root; 64 one-core agents; the four policies took "
        f"{sum(latest[p]['wall_s'] for p in ELASTIC_POLICIES) / 60:.1f} min of wall time). "
        "Results: `bench/results/elastic_cluster.jsonl`; rows: the latest line of each policy "
        f"with `--compress {ELASTIC_COMPRESS:g}`; {machine(r0['time'])} "
        f"({r0['time'][:10]}); {NOT_RECORDED}.", "", *notes])


# ---------------------------------------------------------------- README headline

def fig_headline():
    kinds = throughput_kinds()

    def conditions(key, invs):
        title = kind_title(*key, len(invs), invs)  # day, label, load (runs)
        return f"{title}, {invocation_machine(invs[-1])}"

    key, invs = list(kinds.items())[-1]
    tp = lambda m, d: min_median([i["by"][m]["per_second"] for i in invs if m in i["by"]], d)
    latest_cond = conditions(key, invs)
    slurm_key, slurm_invs = [(k, [i for i in v if "slurm_cli_end_to_end_2_cores" in i["by"]])
                             for k, v in kinds.items()
                             if any("slurm_cli_end_to_end_2_cores" in i["by"] for i in v)][-1]
    hs = [i["by"]["cli_end_to_end_2_cores"]["per_second"] for i in slurm_invs]
    ss = [i["by"]["slurm_cli_end_to_end_2_cores"]["e2e_jobs_per_s"] for i in slurm_invs]
    ratios = [h / s for h, s in zip(hs, ss)]
    with_arrays = [(k, [i for i in v if "slurm_array_end_to_end_2_cores" in i["by"]])
                   for k, v in kinds.items()
                   if any("slurm_array_end_to_end_2_cores" in i["by"] for i in v)]
    arrays = []
    if with_arrays:
        array_key, array_invs = with_arrays[-1]
        ha = [i["by"]["array_end_to_end_2_cores"]["per_second"] for i in array_invs]
        sa = [i["by"]["slurm_array_end_to_end_2_cores"]["per_second"] for i in array_invs]
        arrays = [["one array of `true` jobs (`--array=1-N` / `sbatch --array`), then wait, "
                   "4 nodes x 2 cores, jobs/s", min_median(ha, 1),
                   f"{min_median(sa, 1)} (hpcq {min_median([h / s for h, s in zip(ha, sa)], 1)}x)",
                   conditions(array_key, array_invs) + ", hpcq and Slurm in the same invocation"]]
    rl_label, rl = latest_label("run_latency")
    cl_label, cl = latest_label("cli_latency")
    ch, cs = (cli_stats(cl, x, "submit") for x in ("hpcq", "slurm"))
    rh, rs = (launch_stats(rl, x, "outside", "1_task") for x in ("hpcq", "slurm"))
    (sday, slabel), srows = list(scale_full_runs().items())[-1]
    big = [r["jobs_per_second"] for r in srows if r["queued"] == 100000]
    mpi_label, mpi = latest_mpi_wireup()
    same = next((r["ucx_tls"] for r in mpi if r.get("ucx_tls")), None)

    def wireup_row(what, hpcq_pmi, slurm_pmi):
        h, s = mpi_wireups(mpi, "hpcq", hpcq_pmi, 64), mpi_wireups(mpi, "slurm", slurm_pmi, 64)
        note = ""
        if same and hpcq_pmi == "pmi1":
            hs, ss = (mpi_wireups(mpi, x, p, 64, same) for x, p in (("hpcq", "pmi1"),
                                                                    ("slurm", "pmi2")))
            note = f"; {median(hs) / median(ss):.2f}x with the same UCX transports"
        return [f"64 {what} ranks on 4 nodes, launch until all are past MPI_Init, s",
                min_median(h, 2), f"{min_median(s, 2)} (hpcq {median(h) / median(s):.2f}x{note})",
                f"{mpi[0]['when'][:10]}, {mpi_label}, {runs_word(max(r['run'] for r in mpi))}, "
                f"{mpi_machine(mpi_label, mpi)}, hpcq and Slurm in the same invocation"]
    out = [
        ["submissions acknowledged per second (8 gRPC clients; each committed to SQLite first)",
         tp("submit_rate_8_clients", 0), "-", latest_cond],
        ["`true` jobs end to end through the API, 4 nodes x 2 cores, jobs/s",
         tp("api_end_to_end_2_cores", 1), "-", latest_cond],
        ["one `hpcq submit` / `sbatch` per job, then wait, 4 nodes x 2 cores, jobs/s",
         min_median(hs, 1), f"{min_median(ss, 1)} (hpcq {min_median(ratios, 1)}x)",
         conditions(slurm_key, slurm_invs) + ", hpcq and Slurm in the same invocation"],
        *arrays,
        ["one `hpcq submit` / `sbatch`, command to exit (hpcq's answer is durable), ms",
         min_median(ch, 1), min_median(cs, 1),
         f"{cl[0]['when'][:10]}, {cl_label}, {runs_word(max(r['run'] for r in cl))} of "
         f"{cl[0]['calls']}, host {cl[0]['host']}"],
        ["`hpcq run -n 1 true` / `srun -n 1 true`, command to exit, ms",
         min_median(rh, 1), min_median(rs, 1),
         f"{rl[0]['when'][:10]}, {rl_label}, {runs_word(max(r['run'] for r in rl))} of "
         f"{rl[0]['launches']}, {machine(rl[0]['when'])}"],
        ["control plane alone: 100,000 jobs queued at once on 256 agents, jobs/s",
         min_median(big, 0), "-",
         f"{sday}, {slabel or 'no label'}, {runs_word(len(big))}, "
         f"{scale_machine(sday, slabel, srows)}, "
         f"{NOT_RECORDED}"],
        wireup_row("MPICH (hpcq's PMI-1 / `srun --mpi=pmi2`)", "pmi1", "pmi2"),
        wireup_row("Open MPI (hpcq's PMIx / `srun --mpi=pmix`)", "pmix", "pmix"),
    ]
    return "\n".join([
        table(["figure", "hpcq", "Slurm 22.05", "runs, date, machine, load"], out), "",
        "min / median where there are several runs; each row is the latest run of its kind "
        "in `bench/results/` (throughput.jsonl, cli_latency.jsonl, run_latency.jsonl, scale.jsonl, "
        "mpi_wireup.jsonl). The rows "
        "ran on different dates and machines: compare figures within a row only. Method, "
        "command, the other runs and their conditions: [docs/benchmarks.md]"
        "(docs/benchmarks.md)."])


# ---------------------------------------------------------------- driver

TABLES = {  # name: (file, generator)
    "headline": ("README.md", fig_headline),
    "throughput": ("docs/benchmarks.md", fig_throughput),
    "cli-latency": ("docs/benchmarks.md", fig_cli_latency),
    "run-latency": ("docs/benchmarks.md", fig_run_latency),
    "launch-cost": ("docs/benchmarks.md", fig_launch_cost),
    "mpi-wireup": ("docs/benchmarks.md", fig_mpi_wireup),
    "failover": ("docs/benchmarks.md", fig_failover),
    "replication": ("docs/failover.md", fig_replication),
    "scale": ("docs/benchmarks.md", fig_scale),
    "queue-memory": ("docs/benchmarks.md", fig_queue_memory),
    "churn": ("docs/benchmarks.md", fig_churn),
    "migrate": ("docs/benchmarks.md", fig_migrate),
    "checkpoint": ("docs/benchmarks.md", fig_checkpoint),
    "container": ("docs/benchmarks.md", fig_container),
    "gap": ("docs/benchmarks.md", fig_gap),
    "gap-traces": ("docs/benchmarks.md", fig_gap_traces),
    "granularity": ("docs/benchmarks.md", fig_granularity),
    "resize": ("docs/benchmarks.md", fig_resize),
    "elastic-cluster": ("docs/benchmarks.md", fig_elastic_cluster),
}
FILES = ("README.md", "docs/benchmarks.md", "docs/failover.md")
MARKER = re.compile(r"<!-- figures:([a-z0-9-]+) -->\n(.*?)<!-- /figures:\1 -->", re.S)
OPENING = re.compile(r"<!-- (/?)figures:([a-z0-9-]+) -->")


def block(name):
    return ("\n<!-- generated by bench/readme_figures.py: edit the script, not this text -->\n\n"
            + TABLES[name][1]() + "\n\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="the default")
    mode.add_argument("--write", action="store_true")
    a = ap.parse_args()
    problems = []
    for path in FILES:
        full = os.path.join(ROOT, path)
        with open(full) as f:
            text = f.read()
        found = [m.group(1) for m in MARKER.finditer(text)]
        for closing, name in OPENING.findall(text):
            if name not in TABLES:
                problems.append(f"{path}: markers for an unknown table '{name}'")
            elif TABLES[name][0] != path:
                problems.append(f"{path}: table '{name}' belongs in {TABLES[name][0]}")
            elif not closing and found.count(name) != 1:
                problems.append(f"{path}: table '{name}': its markers are unpaired or repeated")
        for name, (where, _) in TABLES.items():
            if where == path and name not in found:
                problems.append(f"{path}: table '{name}' has no markers "
                                f"(<!-- figures:{name} --> ... <!-- /figures:{name} -->)")

        def replace(m):
            name = m.group(1)
            if name not in TABLES or TABLES[name][0] != path:
                return m.group(0)
            new = block(name)
            if m.group(2) != new and not a.write:
                problems.append(f"{path}: table '{name}' differs from what bench/results/ gives "
                                f"(bench/readme_figures.py --write)")
            return f"<!-- figures:{name} -->\n{new}<!-- /figures:{name} -->"

        new_text = MARKER.sub(replace, text)
        if a.write and new_text != text:
            with open(full, "w") as f:
                f.write(new_text)
    for p in dict.fromkeys(problems):
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
