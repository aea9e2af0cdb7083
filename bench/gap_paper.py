#!/usr/bin/env python3
"""Paper 004's simulation (Polyakov & Dubenskaya: improving the load of
supercomputers with a migratable gap queue), through `hpcq simulate`.

Setup, as in the paper: conservative backfilling on 512 CPU slots (here one
node of 512 cores), 1-minute time units, a synthetic Lomonosov-like
workload, several seeds; the baseline load as a function of the estimate
accuracy p; then the same workload with a gap queue of serial, checkpointable
jobs filling the holes (Mode B: run until a reservation comes within the
save deadline, then checkpoint and requeue; the job is restored in the next
hole it fits).

The workload (what the paper gives: job size mean 7.5 / sd 16.7 / max 512
slots; runtime mean 255 min / sd 1204 min / max 15 days; the family is not
stated): lognormals fitted to those means and deviations, capped at the
maxima, sizes rounded to whole slots and runtimes to whole minutes (at least
one); Poisson arrivals at --offered load (work offered / capacity; default
0.95). Estimates by the paper's model: with probability p the exact runtime,
with p(1-p) the runtime rounded up to the nearest of the 20 round values
(1, 2, 5, 10, 20, 30 min; 1, 2, 3, 6, 8, 12 h; 1, 1.5, 2, 3, 5, 7, 10, 15
days), otherwise the next round value above that.

Gap jobs (the paper: "non-parallel, arbitrary-runtime"): one slot, runtime
uniform in 2-24 h, submitted as a Poisson stream offering --gap-offered of
the capacity (default 0.15: more than the holes, so the queue is never
empty), in SWF queue 9 (--gap-queue q9); their estimates are exact (they
never need to be: they are never reserved for).

Reported per p (means over seeds): the baseline load (busy slot-time /
capacity over the baseline's span), the load with the gap queue (busy
slot-time, runs cut short by checkpoints included, over the same span), the
gain, the regular jobs' mean wait with and without the gap queue, each
regular job's start against its start without the gap queue (how many start
later, by how much, how many beyond the save deadline: a gap job gives its
cores back as its save begins, so none should), checkpoints, and work lost
(none with checkpoints). The
paper's bound: going from load l to 1 gains at least (1 - l)(1 - t)c of
peak, 0.1(1 - t)c from 90%, with t the share of a slot spent starting and
saving (here checkpoint seconds / the one-hour slot the paper's estimate
uses) and c the container efficiency (bench/container_slowdown.py:
c = 0.998 here; bench/checkpoint_cost.py: dump + restore of a serial job
well under 1 s; --checkpoint-s default 30 is deliberately pessimistic).

Also --trace FILE (an SWF trace from ../shared/traces) instead of the
generator: the same gap stream is added to it. Real traces have jobs that
run past their requested time; conservative backfilling counts such a job
as ending 1 s after each cycle, so its choices depend on when cycles run,
and the gap run has more cycles: some regular jobs then start earlier and
some later for that reason alone. --kill-at-limit ends every job at its
requested time (in both runs), which leaves only what the gap queue does.

Usage: bench/gap_paper.py [--build build] [--days 30] [--seeds 3]
       [--first-seed 0] [--ps 0.1,0.5,0.9] [--offered 0.95] [--gap-offered 0.15]
       [--checkpoint-s 30] [--efficiency 0.998] [--deadline-s 600]
       [--trace FILE --cores N [--kill-at-limit]] [--jobs N] [--merge]
Defaults keep a run to a few minutes on a 2-core VM; the paper's own
setting is --days 180 --seeds 10.
Results: one JSON line per p appended to bench/results/gap_paper.jsonl and
a table on stdout. A long run can go in parts (--first-seed 0 --seeds 3,
then --first-seed 3 --seeds 7); the same command with --merge and the whole
range (--seeds 10) then simulates nothing: it combines the parts' rows into
one per p (means weighted by seeds) and appends it.
"""
import argparse
import concurrent.futures
import json
import math
import os
import random
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUND_MIN = [1, 2, 5, 10, 20, 30, 60, 120, 180, 360, 480, 720,
             1440, 2160, 2880, 4320, 7200, 10080, 14400, 21600]
GAP_QUEUE = 9
REGULAR_QUEUE = 1
# What one seed measures (one()); a row holds their means over its seeds.
RUN_KEYS = ("load", "load_with_gap", "wait_s", "wait_with_gap_s", "checkpointed", "migrated",
            "lost_core_seconds", "gap_jobs", "jobs", "started_later", "started_earlier",
            "mean_delay_s", "max_delay_s", "later_than_deadline", "elapsed_s")
RESULTS = os.path.join(ROOT, "bench", "results", "gap_paper.jsonl")


def lognormal(rng, mean, sd):
    sigma2 = math.log(1 + (sd / mean) ** 2)
    mu = math.log(mean) - sigma2 / 2
    return rng.lognormvariate(mu, math.sqrt(sigma2))


def estimate(rng, runtime_min, p):
    u = rng.random()
    if u < p:
        return runtime_min
    up = next((i for i, v in enumerate(ROUND_MIN) if v >= runtime_min), len(ROUND_MIN) - 1)
    if u < p + p * (1 - p):
        return ROUND_MIN[up]
    return ROUND_MIN[min(up + 1, len(ROUND_MIN) - 1)]


def swf_line(job_id, submit_s, runtime_s, size, requested_s, queue, user):
    return (f"{job_id} {submit_s} -1 {runtime_s} {size} -1 -1 {size} {requested_s} -1 1 "
            f"{user} -1 -1 {queue} -1 -1 -1")


def regular_jobs(rng, days, slots, offered, p):
    mean_work = 7.5 * 255  # slot-minutes per job
    rate = offered * slots / mean_work  # jobs per minute
    t, jobs = 0.0, []
    while True:
        t += rng.expovariate(rate)
        if t >= days * 1440:
            return jobs
        size = min(slots, max(1, round(lognormal(rng, 7.5, 16.7))))
        runtime = min(21600, max(1, round(lognormal(rng, 255, 1204))))
        jobs.append((int(t * 60), runtime * 60, size, estimate(rng, runtime, p) * 60,
                     REGULAR_QUEUE, rng.randrange(1, 200)))


def gap_jobs(rng, span_s, slots, offered):
    mean_work = 13 * 60  # minutes: uniform 2-24 h
    rate = offered * slots / mean_work
    t, jobs = 0.0, []
    while True:
        t += rng.expovariate(rate)
        if t * 60 >= span_s:
            return jobs
        runtime = rng.randint(120, 1440) * 60
        jobs.append((int(t * 60), runtime, 1, runtime, GAP_QUEUE, 999))


def write_swf(path, jobs):
    """Job i of the list gets id i + 1 (lines in submit order): a regular job
    has the same id with the gap stream appended to the list and without."""
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i][0], i))
    with open(path, "w") as f:
        f.write("; hpcq bench/gap_paper.py synthetic workload\n")
        for i in order:
            f.write(swf_line(i + 1, *jobs[i]) + "\n")


def read_swf(path):
    import gzip
    opener = gzip.open if path.endswith(".gz") else open
    jobs = []
    with opener(path, "rt") as f:
        for line in f:
            if line.startswith(";") or not line.strip():
                continue
            v = line.split()
            submit, runtime, size, req = int(float(v[1])), int(float(v[3])), int(v[4]), int(float(v[8]))
            if runtime <= 0 or size <= 0:
                continue
            size = size if size > 0 else int(v[7])
            jobs.append((submit, runtime, size, req if req > 0 else runtime, REGULAR_QUEUE,
                         int(v[11]) if int(v[11]) > 0 else 1))
    return jobs


def simulate(hpcq, swf, cores, args, gap, mode="b"):
    cmd = [hpcq, "simulate", swf, "--cores", str(cores), "--json", "--skip-impossible",
           "--policy", "gap" if gap else "conservative", "--events", swf + ".events"]
    if args.kill_at_limit:
        cmd.append("--kill-at-limit")
    if gap:
        cmd += ["--gap-queue", f"q{GAP_QUEUE}", "--checkpoint-cost", str(args.checkpoint_s),
                "--container-efficiency", str(args.efficiency),
                "--option", f"gap.save_deadline_s={args.deadline_s}",
                "--option", f"gap.mode={mode}", "--option", f"gap.slot_s={args.slot_s}",
                "--option", f"gap.migrate={'false' if args.no_migrate else 'true'}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def cores_of(spec):
    n = 0
    for part in spec:
        for r in part.split(":", 1)[1].split(","):
            a, _, b = r.partition("-")
            n += int(b) - int(a) + 1 if b else 1
    return n


def busy(events_path, queue_of, window_s):
    """Busy core-seconds of regular and gap jobs within [0, window_s], from
    the simulator's event log (every run, those cut short by a checkpoint
    included)."""
    running, regular, gap = {}, 0.0, 0.0
    with open(events_path) as f:
        for line in f:
            v = line.split()
            t, job, kind = int(v[0]), int(v[1]), v[2]
            if kind == "start":
                running[job] = (t, cores_of(v[3:]))
                continue
            start, n = running.pop(job)
            s = max(0, min(window_s, t) - min(window_s, start)) * n
            if queue_of[job] == GAP_QUEUE:
                gap += s
            else:
                regular += s
    for job, (start, n) in running.items():
        s = max(0, window_s - min(window_s, start)) * n
        if queue_of[job] == GAP_QUEUE:
            gap += s
        else:
            regular += s
    return regular, gap


def first_starts(events_path):
    starts = {}
    with open(events_path) as f:
        for line in f:
            v = line.split()
            if v[2] == "start":
                starts.setdefault(int(v[1]), int(v[0]))
    return starts


def queues_of(swf):
    q = {}
    with open(swf) as f:
        for line in f:
            if not line.startswith(";") and line.strip():
                v = line.split()
                q[int(v[0])] = int(v[14])
    return q


def regular_wait(report):
    q = report["queues"].get(f"q{REGULAR_QUEUE}")
    return q["mean_wait_s"] if q else report["mean_wait_s"]


def one(hpcq, cores, args, work, mode, p, seed):
    """One seed: the baseline and the run with the gap queue, in their own
    directory (seeds run in parallel, --jobs)."""
    rng = random.Random(seed * 1000 + int((p or 0) * 100))
    regular = (read_swf(args.trace) if args.trace
               else regular_jobs(rng, args.days, cores, args.offered, p))
    work = os.path.join(work, f"{mode}-{p}-{seed}")
    os.makedirs(work)
    # The load is measured over the arrival window (the paper's 180 days),
    # not the drain after the last arrival.
    window = max(j[0] for j in regular) + 1
    base_swf = os.path.join(work, "base.swf")
    write_swf(base_swf, regular)
    base = simulate(hpcq, base_swf, cores, args, gap=False)
    reg_busy, _ = busy(base_swf + ".events", queues_of(base_swf), window)
    capacity = cores * window
    gap = gap_jobs(rng, window, cores, args.gap_offered)
    gap_swf = os.path.join(work, "gap.swf")
    write_swf(gap_swf, regular + gap)
    withgap = simulate(hpcq, gap_swf, cores, args, gap=True, mode=mode)
    reg_busy2, gap_busy = busy(gap_swf + ".events", queues_of(gap_swf), window)
    # Each regular job's start with the gap queue against its start without
    # (same ids in both files).
    before, after = first_starts(base_swf + ".events"), first_starts(gap_swf + ".events")
    delays = [after[j] - before[j] for j in before if j in after]
    later = [d for d in delays if d > 0]
    return {
        "load": reg_busy / capacity,
        "load_with_gap": (reg_busy2 + gap_busy) / capacity,
        "wait_s": regular_wait(base),
        "wait_with_gap_s": regular_wait(withgap),
        "checkpointed": withgap.get("checkpointed", 0),
        "migrated": withgap.get("migrated", 0),
        "lost_core_seconds": withgap.get("lost_core_seconds", 0.0),
        "gap_jobs": len(gap),
        "jobs": len(regular),
        "started_later": len(later),
        "started_earlier": sum(1 for d in delays if d < 0),
        "mean_delay_s": sum(later) / len(delays) if delays else 0.0,
        "max_delay_s": max(later, default=0),
        "later_than_deadline": sum(1 for d in later if d > args.deadline_s),
        "elapsed_s": base["elapsed_s"] + withgap["elapsed_s"],
    }


def append_result(row):
    with open(RESULTS, "a") as f:
        f.write(json.dumps(row) + "\n")


def combine(parts):
    """Runs or rows of one setting as one: means weighted by seeds, except
    the largest delay, which is the largest."""
    n = sum(w for w, _ in parts)
    mean = {k: sum(w * r[k] for w, r in parts) / n for k in RUN_KEYS}
    mean["max_delay_s"] = max(r["max_delay_s"] for _, r in parts)
    return mean


def seed_range(args):
    return list(range(args.first_seed, args.first_seed + args.seeds)) if not args.trace else [0]


def setting(args, mode):
    """What makes two rows the same experiment, apart from p and their seeds."""
    return {"source": os.path.basename(args.trace) if args.trace else "lomonosov-like",
            "mode": mode, "migrate": not args.no_migrate, "slot_s": args.slot_s,
            "days": args.days, "cores": args.cores, "offered": args.offered,
            "gap_offered": args.gap_offered, "checkpoint_s": args.checkpoint_s,
            "c": args.efficiency, "deadline_s": args.deadline_s,
            "kill_at_limit": args.kill_at_limit}


def summary_row(args, p, mode, mean, seeds, per_seed):
    t = 2 * args.checkpoint_s / 3600.0  # a save and a restore, of a one-hour slot
    return {"p": p, **setting(args, mode), "seeds": len(seeds), "first_seed": seeds[0], **mean,
            "gain": mean["load_with_gap"] - mean["load"],
            "ceiling": (1 - mean["load"]) * (1 - t) * args.efficiency,
            "bound_from_90": 0.1 * (1 - t) * args.efficiency,
            "per_seed": per_seed,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def merged(args, settings, modes):
    """--merge: the rows of earlier runs in parts (--first-seed) that together
    hold exactly seeds first-seed .. first-seed + seeds - 1 of this setting,
    newest first, as one row per p and mode."""
    want = seed_range(args)
    with open(RESULTS) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    out = []
    for (_, p), mode in [(s, m) for s in settings for m in modes]:
        same = setting(args, mode)
        parts, have = [], set()
        for r in reversed(rows):
            first = r.get("first_seed", 0)  # rows from before --first-seed began at 0
            seeds = set(range(first, first + r["seeds"]))
            if (r.get("merged") or r["p"] != p
                    or any(r.get(k) != v for k, v in same.items())
                    or not seeds <= set(want) or seeds & have):
                continue
            parts.append(r)
            have |= seeds
        if have != set(want):
            raise SystemExit(f"gap_paper.py: p={p} mode {mode}: {RESULTS} holds seeds "
                             f"{sorted(have)} of this setting, not {want[0]}..{want[-1]}")
        parts.sort(key=lambda r: r.get("first_seed", 0))
        row = summary_row(args, p, mode, combine([(r["seeds"], r) for r in parts]), want,
                          [s for r in parts for s in r.get("per_seed", [])])
        row["merged"] = [r["time"] for r in parts]
        out.append(row)
    for row in out:  # all or none: a missing seed for one p appends nothing
        append_result(row)
    return out


def seed_loads(per_seed):
    """The spread of the baseline load over the seeds whose loads the row
    keeps (rows from before per_seed keep none)."""
    loads = [s["load"] for s in per_seed]
    return f"{min(loads):.3f}-{max(loads):.3f} ({len(loads)})" if loads else "-"


def simulated(args, hpcq, settings, modes):
    """Each setting's seeds, a row per p and mode, appended to the results as
    each is done."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="hpcq-gap-") as work:
        for (_, p), mode in [(s, m) for s in settings for m in modes]:
            seeds = seed_range(args)
            with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
                runs = list(pool.map(one, *zip(*[(hpcq, args.cores, args, work, mode, p, seed)
                                                 for seed in seeds])))
            # The paper's baseline load varies from seed to seed ("often close
            # to 90%, as low as 70%"): keep each seed's, not only the mean.
            per_seed = [{"seed": seed, "load": r["load"], "load_with_gap": r["load_with_gap"],
                         "wait_s": r["wait_s"]} for seed, r in zip(seeds, runs)]
            row = summary_row(args, p, mode, combine([(1, r) for r in runs]), seeds, per_seed)
            append_result(row)  # as each is done: a long run keeps what it has
            rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--days", type=float, default=30)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="seeds first-seed .. first-seed + seeds - 1: a long run in parts, "
                         "whose rows combine as means weighted by seeds")
    ap.add_argument("--ps", default="0.1,0.5,0.9")
    ap.add_argument("--offered", type=float, default=0.95)
    ap.add_argument("--gap-offered", type=float, default=0.15)
    ap.add_argument("--checkpoint-s", type=int, default=30)
    ap.add_argument("--mode", choices=("a", "b", "both"), default="b")
    ap.add_argument("--slot-s", type=int, default=3600)
    ap.add_argument("--no-migrate", action="store_true")
    ap.add_argument("--efficiency", type=float, default=0.998)
    ap.add_argument("--deadline-s", type=int, default=600)
    ap.add_argument("--trace")
    ap.add_argument("--kill-at-limit", action="store_true",
                    help="end a trace's jobs at their requested time (see above)")
    ap.add_argument("--cores", type=int, default=512)
    ap.add_argument("--jobs", type=int, default=os.cpu_count(),
                    help="seeds simulated at once (default: one per CPU)")
    ap.add_argument("--merge", action="store_true",
                    help="simulate nothing: combine the rows of this setting that earlier "
                         "runs in parts (--first-seed) appended to the results, and append "
                         "the combined rows")
    args = ap.parse_args()
    hpcq = os.path.join(os.path.abspath(args.build), "cli", "hpcq")
    settings = [("trace", None)] if args.trace else [("p", float(p)) for p in args.ps.split(",")]
    modes = ("b", "a") if args.mode == "both" else (args.mode,)
    rows = merged(args, settings, modes) if args.merge else simulated(args, hpcq, settings, modes)
    print(f"{'p':>5} {'mode':>4} {'load':>6} {'+gap':>6} {'gain':>6} {'ceil':>6} {'wait s':>8} "
          f"{'+gap s':>8} {'ckpts':>6} {'moves':>6} {'lost':>5} {'later':>6} {'earlier':>7} {'maxdel':>6} "
          f"{'>dl':>4} {'jobs':>6} {'gapjobs':>7}  seeds' loads")
    for r in rows:
        print(f"{str(r['p']):>5} {r['mode']:>4} {r['load']:6.3f} {r['load_with_gap']:6.3f} "
              f"{r['gain']:6.3f} {r['ceiling']:6.3f} {r['wait_s']:8.0f} "
              f"{r['wait_with_gap_s']:8.0f} {r['checkpointed']:6.0f} {r['migrated']:6.0f} "
              f"{r['lost_core_seconds']:5.0f} {r['started_later']:6.0f} {r['started_earlier']:7.0f} "
              f"{r['max_delay_s']:6.0f} "
              f"{r['later_than_deadline']:4.0f} "
              f"{r['jobs']:6.0f} {r['gap_jobs']:7.0f}  {seed_loads(r['per_seed'])}")


if __name__ == "__main__":
    main()
