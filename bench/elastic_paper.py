#!/usr/bin/env python3
"""Paper 001's simulated experiment (Bhosale, Kale, Kokkila-Schumacher: an
elastic job scheduler for Charm++ on Kubernetes, section 4.3.1 and Table 1)
through `hpcq simulate --jobs`.

Setup, as in the paper: 64 slots (here 64 nodes of one core: one replica =
one node, the unit the "elastic" action grows and shrinks by); 16 jobs drawn
at random from four classes with random priorities 1-5; 100 repetitions;
the gap between consecutive submissions swept over 0-300 s; rescale_gap
swept at a fixed submission gap. Classes (min..max replicas): small 2-8,
medium 4-16, large 8-32 (40,000 Jacobi2D steps each), xlarge 16-64 (10,000
steps).

The four policies are the same scheduler ("elastic" policy: actions
enqueue, elastic, allocate, backfill; the same priority logic for all, as
in the paper) over four versions of each job set, as the paper emulates
them on its cluster:
  rigid-min  min = max = the class minimum
  rigid-max  min = max = the class maximum
  moldable   the range, not elastic (size picked at start, then fixed)
  elastic    the range, elastic (shrink/expand; rescale gap honoured)

What the paper does not give, and what is chosen here instead:
  - Its runtime model is a piecewise-linear fit of Jacobi2D strong-scaling
    measurements with no values printed (the grid sizes are missing from
    the text too). Here: Amdahl, runtime(n) = T1 * (s + (1 - s)/n)
    (lib/sim/elastic_model.h), with T1 per class chosen so that a job at its
    class maximum takes 300 s (small, medium, large) or 150 s (xlarge, a
    quarter of the steps on a larger grid): a calibration choice, not the
    paper's data. Two serial fractions are run: s = 0.05 (the simulator's
    default) and s calibrated on Table 1 itself (table1_serial(): rigid-max
    used only 1.124 times the core-seconds of rigid-min, which needs
    s = 0.0046 with these classes; s = 0.05 gives 1.87).
  - Its rescale overhead (also a fit without values) is not modelled:
    resizes are free.
  - The paper's fixed rescaleGap and its Table 1 submission gap are lost
    from the text (math not extracted); its real run used a 90 s gap, so
    the Table 1 setting here is a 90 s gap with rescale gap 60 s.
  - Metrics as the paper defines them: total time = first start to last
    end (here last end - first submit, the same since the first job starts
    at once), utilisation = used core-seconds / (64 x total time),
    priority-weighted mean response (start - submit) and completion (end -
    submit).

Measured 2026-11-23 (build-elastic, 100 job sets, seed 1, about 50 s),
Table 1 setting, ours | paper's simulation column:
  s = 0.0046 (calibrated)  total s        util %          w.resp s    w.compl s
  rigid-min               2483 | 2402    59.37 | 60.88     39 | 207   1018 | 915
  rigid-max               2213 | 1914    74.79 | 85.86    259 | 196    523 | 327
  moldable                2121 | 2078    74.02 | 78.39     53 | 122    445 | 326
  elastic                 1805 | 1813    87.11 | 92.26     34 |  33    391 | 241
  s = 0.05 (default)
  rigid-min               2154 | 2402    41.39 | 60.88      1 | 207    659 | 915
  rigid-max               2213 | 1914    74.79 | 85.86    259 | 196    523 | 327
  moldable                1739 | 2078    74.96 | 78.39     23 | 122    330 | 326
  elastic                 1673 | 1813    81.97 | 92.26     13 |  33    312 | 241
Elastic is best on total time and utilisation under both models, as in
the paper. Where ours differs: rigid-max packs worse than the paper's (total
1.23x elastic's against 1.06x; utilisation 75 % against 86 %): a rigid
xlarge job takes all 64 slots and, with no reservation in this policy
(the paper's pseudo-code has none either), waits while smaller jobs keep
starting out of order (measured with --events, calibrated s: rigid xlarge
jobs wait 1036 s on average, small ones 16 s, large 96 s); the paper's simulator may differ there (its
pseudo-code keeps a slot for the launcher pod, which a 64-replica job could
never get, so its rigid xlarge cannot be exactly this). Weighted completion
is higher than the paper's for every policy: our classes' runtimes are a
guess. With calibrated s, rigid-min is not faster than rigid-max at small
submission gaps (the paper's Fig. 7 says it is); with s = 0.05 it is: the
two figures of the paper pull s in opposite directions. The rescale-gap
sweep reproduces the paper's trends: total time grows monotonically with
the gap and elastic becomes moldable as the gap grows (100000 s: exactly
moldable's figures).

Writes one JSON line per (sweep, policy, x) to bench/results/elastic_paper.jsonl
and prints the tables. Exit status 2 when hpcq cannot be run, 1 when elastic
is not the best of the four on total time and utilisation in the Table 1
setting (the paper's headline), else 0.

Usage: bench/elastic_paper.py [--hpcq build/cli/hpcq] [--reps 100] [--seed 1]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SLOTS = 64
JOBS = 16
DEFAULT_SERIAL = 0.05  # lib/sim/elastic_model.h: the paper gives none
SERIAL = DEFAULT_SERIAL  # the model being run
# class: (min replicas, max replicas, seconds at max replicas)
CLASSES = {
    "small": (2, 8, 300),
    "medium": (4, 16, 300),
    "large": (8, 32, 300),
    "xlarge": (16, 64, 150),  # a quarter of the steps of the others, on a bigger grid
}
POLICIES = ["rigid-min", "rigid-max", "moldable", "elastic"]
GAPS = [0, 30, 60, 90, 120, 180, 240, 300]
RESCALE_GAPS = [0, 30, 60, 120, 300, 600, 100000]
TABLE_GAP = 90
DEFAULT_RESCALE = 60

# Table 1, simulation column: total s, utilisation %, weighted response s,
# weighted completion s.
PAPER = {
    "rigid-min": (2402, 60.88, 207.21, 915.08),
    "rigid-max": (1914, 85.86, 195.79, 326.68),
    "moldable": (2078, 78.39, 122.40, 326.15),
    "elastic": (1813, 92.26, 32.96, 241.29),
}


def amdahl(n, serial=None):
    s = SERIAL if serial is None else serial
    return s + (1 - s) / n


def table1_serial():
    """The serial fraction at which a job set's work (core-seconds) at the
    class maxima is as much above its work at the minima as Table 1 says:
    rigid-max used 1914 s x 85.86 % of the cluster, rigid-min 2402 s x
    60.88 %, 1.124 times as much. Classes weighted equally (drawn uniformly)."""
    target = (PAPER["rigid-max"][0] * PAPER["rigid-max"][1]) / (
        PAPER["rigid-min"][0] * PAPER["rigid-min"][1])

    def ratio(s):
        at_max = at_min = 0.0
        for lo, hi, t in CLASSES.values():
            t1 = t / amdahl(hi, s)
            at_max += t1 * amdahl(hi, s) * hi
            at_min += t1 * amdahl(lo, s) * lo
        return at_max / at_min

    lo, hi = 0.0, 0.5
    for _ in range(60):  # ratio grows with s
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ratio(mid) < target else (lo, mid)
    return lo


def draw(rng):
    """One random job set: (class, priority) per job, in submission order."""
    return [(rng.choice(sorted(CLASSES)), rng.randint(1, 5)) for _ in range(JOBS)]


def job_file(drawn, policy, gap):
    jobs = []
    for i, (cls, priority) in enumerate(drawn):
        lo, hi, at_max = CLASSES[cls]
        t1 = at_max / amdahl(hi)
        if policy == "rigid-min":
            lo_n, hi_n = lo, lo
        elif policy == "rigid-max":
            lo_n, hi_n = hi, hi
        else:
            lo_n, hi_n = lo, hi
        runtime_at_min = round(t1 * amdahl(lo_n))
        jobs.append({
            "id": i + 1,
            "submit_s": i * gap,
            "runtime_s": runtime_at_min,
            "min_nodes": lo_n,
            "max_nodes": hi_n,
            "elastic": policy == "elastic",
            "priority": priority,
            "serial_fraction": SERIAL,
        })
    return jobs


def simulate(hpcq, path, rescale_gap):
    cmd = [hpcq, "simulate", "--jobs", path, "--nodes", str(SLOTS), "--cores-per-node", "1",
           "--policy", "elastic", "--estimates", "exact", "--json",
           "--option", f"elastic.rescale_gap_s={rescale_gap}"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip()}")
    r = json.loads(out.stdout)
    return (r["makespan_s"], 100.0 * r["utilization"], r["weighted_mean_response_s"],
            r["weighted_mean_completion_s"], r["shrinks"] + r["expands"])


def mean_over(hpcq, sets, policy, gap, rescale_gap, tmp):
    sums = [0.0] * 5
    path = os.path.join(tmp, "jobs.json")
    for drawn in sets:
        with open(path, "w") as f:
            json.dump(job_file(drawn, policy, gap), f)
        for k, v in enumerate(simulate(hpcq, path, rescale_gap)):
            sums[k] += v
    return [s / len(sets) for s in sums]


def run_model(hpcq, sets, tmp):
    rows = []
    for gap in GAPS:
        for policy in POLICIES:
            m = mean_over(hpcq, sets, policy, gap, DEFAULT_RESCALE, tmp)
            rows.append({"sweep": "submit_gap", "policy": policy, "submit_gap_s": gap,
                         "rescale_gap_s": DEFAULT_RESCALE, "metrics": m})
    for rescale in RESCALE_GAPS:
        m = mean_over(hpcq, sets, "elastic", TABLE_GAP, rescale, tmp)
        rows.append({"sweep": "rescale_gap", "policy": "elastic", "submit_gap_s": TABLE_GAP,
                     "rescale_gap_s": rescale, "metrics": m})
    return rows


def report(rows, model, reps, seed):
    """Prints the tables; True when elastic is best on total time and utilisation."""
    def at(policy, gap):
        return next(r["metrics"] for r in rows
                    if r["sweep"] == "submit_gap" and r["policy"] == policy
                    and r["submit_gap_s"] == gap)

    print(f"== runtime model: Amdahl, serial fraction {SERIAL:.4f} ({model})")
    print(f"Table 1 setting: submission gap {TABLE_GAP} s, rescale gap {DEFAULT_RESCALE} s, "
          f"{reps} job sets (seed {seed}); ours | paper's simulation column")
    print(f"{'policy':10} {'total s':>15} {'util %':>15} {'w.resp s':>15} {'w.compl s':>15}"
          f" {'resizes':>8}")
    for p in POLICIES:
        m = at(p, TABLE_GAP)
        cells = [f"{m[k]:7.0f} | {PAPER[p][k]:5.0f}" if k != 1 else
                 f"{m[k]:6.2f} | {PAPER[p][k]:5.2f}" for k in range(4)]
        print(f"{p:10} " + " ".join(f"{c:>15}" for c in cells) + f" {m[4]:8.1f}")
    print("Ratios to elastic (ours | paper):")
    e = at("elastic", TABLE_GAP)
    for p in POLICIES[:-1]:
        m = at(p, TABLE_GAP)
        cells = [f"{m[k] / e[k]:5.2f} | {PAPER[p][k] / PAPER['elastic'][k]:5.2f}"
                 if e[k] > 0 else "  -" for k in range(4)]
        print(f"{p:10} " + " ".join(f"{c:>15}" for c in cells))
    print(f"Submission-gap sweep (rescale gap {DEFAULT_RESCALE} s): "
          "total s, utilisation %, w.resp s, w.compl s")
    print(f"{'gap s':>6} " + " ".join(f"{p:>28}" for p in POLICIES))
    for gap in GAPS:
        print(f"{gap:6d} " + " ".join(
            "{:6.0f} {:5.1f} {:6.0f} {:6.0f}".format(*at(p, gap)[:4]).rjust(28) for p in POLICIES))
    print(f"Rescale-gap sweep (elastic, submission gap {TABLE_GAP} s):")
    print(f"{'rescale s':>9} {'total s':>8} {'util %':>7} {'w.resp s':>9} {'w.compl s':>9}"
          f" {'resizes':>8}")
    for r in rows:
        if r["sweep"] == "rescale_gap":
            m = r["metrics"]
            print(f"{r['rescale_gap_s']:9d} {m[0]:8.0f} {m[1]:7.2f} {m[2]:9.1f} {m[3]:9.1f}"
                  f" {m[4]:8.1f}")
    best_total = min(POLICIES, key=lambda p: at(p, TABLE_GAP)[0])
    best_util = max(POLICIES, key=lambda p: at(p, TABLE_GAP)[1])
    print(f"best total time: {best_total}; best utilisation: {best_util}\n")
    return best_total == "elastic" and best_util == "elastic"


def main():
    global SERIAL
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hpcq", default=os.path.join(ROOT, "build", "cli", "hpcq"))
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "elastic_paper.jsonl"))
    args = ap.parse_args()
    if not os.access(args.hpcq, os.X_OK):
        print(f"elastic_paper: cannot run {args.hpcq} (build it, or give --hpcq)", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    sets = [draw(rng) for _ in range(args.reps)]
    models = [("default s", DEFAULT_SERIAL), ("s calibrated on Table 1", table1_serial())]
    ok = True
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, serial in models:
            SERIAL = serial
            try:
                rows = run_model(args.hpcq, sets, tmp)
            except RuntimeError as e:
                print(f"elastic_paper: {e}", file=sys.stderr)
                return 2
            ok = report(rows, model, args.reps, args.seed) and ok
            for r in rows:
                total, util, resp, compl, resizes = r["metrics"]
                lines.append(json.dumps({
                    "bench": "elastic_paper", "model": model, "serial_fraction": round(serial, 5),
                    "sweep": r["sweep"], "policy": r["policy"],
                    "submit_gap_s": r["submit_gap_s"], "rescale_gap_s": r["rescale_gap_s"],
                    "reps": args.reps, "seed": args.seed, "slots": SLOTS, "jobs": JOBS,
                    "total_s": round(total, 1), "utilization_pct": round(util, 2),
                    "weighted_response_s": round(resp, 1),
                    "weighted_completion_s": round(compl, 1), "resizes": round(resizes, 2),
                }))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
