#!/usr/bin/env python3
"""How `hpcq simulate`'s time grows with the trace (and queue) length.

Runs EASY and conservative backfilling on 512 cores (README block A's
setting) over prefixes of CTC-SP2 (10k, 20k, 40k and all 77k jobs) and over
a ~232k-job trace made by concatenating CTC-SP2 three times, each copy's
submit times shifted past the end of the copy before it (job ids renumbered).
There is no real 200k-job trace on this machine and no internet to fetch
one: the concatenation keeps CTC-SP2's load and queue lengths, so it shows
how cost grows with the number of jobs, not with a deeper queue.

A size "all/K" is the whole trace with submit times divided by K: K times
the offered load, so the queue grows long (thousands of jobs): that row shows
how a cycle's cost grows with the queue's length rather than the trace's.

Prints, per policy and size: wall seconds of the simulation itself (the
`elapsed_s` hpcq reports, without reading the trace), jobs/s, cycles, and
the mean queue-length proxy (mean wait x jobs / makespan, Little's law), so
that the growth can be read against the queue's length. Exit status 2 when
hpcq cannot be run; otherwise 0 (a measurement, not a check).

Measured 2026-11-23 (build/, the default debugoptimized build, a shared
2-core machine, after the planner and node-index work; seconds of the
simulation itself):
  policy        size     jobs   seconds  jobs/s  mean queue
  easy          10k     10000     0.13   76341      3.6
  easy          40k     40000     0.47   85779      2.9
  easy          all     77222     0.95   81623      3.4
  easy          x3     231666     2.77   83762      3.4
  easy          all/2   77222     4.55   16954    899.6
  easy          all/4   77222    22.18    3481   7078.3
  conservative  10k     10000     0.52   19190      5.0
  conservative  40k     40000     1.50   26695      3.8
  conservative  all     77222     3.31   23365      4.7
  conservative  x3     231666     9.98   23202      4.7
  conservative  all/2   77222   > 240 s (timed out)
Reading: at CTC-SP2's own load the queue stays a few jobs long and time is
linear in the number of jobs (0.012 ms per job for EASY, 0.04 ms for
conservative, the same at 10k and 232k jobs). What grows is the cost per
cycle with the queue's length: EASY's cycle goes from 0.009 ms (queue ~3)
to 0.15 ms (queue ~7,000), about linear in the queue (the backfill pass
looks at every queued job once); conservative, which plans a reservation for
every queued job (one profile sweep each), is quadratic in the queue and
becomes the bottleneck once the queue is long (the simulator shows the
scheduler the whole queue, no queue_depth; hpcqd bounds it with
scheduler.queue_depth).

Usage: bench/sim_scaling.py [--hpcq build/cli/hpcq] [--trace PATH]
                            [--policies easy,conservative] [--sizes 10000,20000,40000,all,x3]
                            [--timeout SECONDS]   (also sizes like all/2)
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_TRACE = os.path.join(ROOT, "..", "shared", "traces", "CTC-SP2-1996-3.1-cln.swf.gz")
CORES = 512


def read_rows(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [l for l in f if l.strip() and not l.lstrip().startswith(";")]


def concatenated(rows, copies):
    """`copies` of the trace back to back: ids renumbered, each copy's submit
    times shifted past the previous copy's last submit + longest runtime."""
    out = []
    shift = 0
    next_id = 1
    for _ in range(copies):
        last = 0
        for row in rows:
            f = row.split()
            submit = int(f[1])
            f[0] = str(next_id)
            next_id += 1
            if submit >= 0:
                f[1] = str(submit + shift)
                last = max(last, submit + shift + max(int(f[3]), 0))
            out.append(" ".join(f) + "\n")
        shift = last + 1
    return out


def compressed(rows, k):
    """The trace with submit times divided by k (k times the load)."""
    out = []
    for row in rows:
        f = row.split()
        if int(f[1]) >= 0:
            f[1] = str(int(f[1]) // k)
        out.append(" ".join(f) + "\n")
    return out


def simulate(hpcq, path, policy, timeout):
    cmd = [hpcq, "simulate", path, "--cores", str(CORES), "--policy", policy, "--json"]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", "") or str(e)
        print(f"sim_scaling: {' '.join(cmd)} failed: {detail.strip()}", file=sys.stderr)
        sys.exit(2)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hpcq", default=os.path.join(ROOT, "build", "cli", "hpcq"))
    ap.add_argument("--trace", default=DEFAULT_TRACE)
    ap.add_argument("--policies", default="easy,conservative")
    ap.add_argument("--sizes", default="10000,20000,40000,all,x3",
                    help="job counts (prefixes), 'all', or 'xK' for K concatenated copies")
    ap.add_argument("--timeout", type=float, default=1800,
                    help="seconds per run; a run past it is reported as such")
    args = ap.parse_args()

    rows = read_rows(args.trace)
    print(f"trace {args.trace}: {len(rows)} jobs; {CORES} cores")
    print(f"{'policy':<13} {'size':>8} {'seconds':>9} {'jobs/s':>9} {'cycles':>9} "
          f"{'mean queue':>10} {'s/1k jobs':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        inputs = []
        for size in args.sizes.split(","):
            if size == "all":
                subset = rows
            elif size.startswith("all/"):
                subset = compressed(rows, int(size[4:]))
            elif size.startswith("x"):
                subset = concatenated(rows, int(size[1:]))
            else:
                subset = rows[:int(size)]
            path = os.path.join(tmp, f"trace_{size.replace('/', '_')}.swf")
            with open(path, "w") as f:
                f.writelines(subset)
            inputs.append((size, path))
        for policy in args.policies.split(","):
            for size, path in inputs:
                r = simulate(args.hpcq, path, policy, args.timeout)
                if r is None:
                    print(f"{policy:<13} {size:>8} {'> ' + str(int(args.timeout)):>9}  (timed out)",
                          flush=True)
                    continue
                secs = r["elapsed_s"]
                queue = r["mean_wait_s"] * r["jobs"] / max(r["makespan_s"], 1)
                print(f"{policy:<13} {size:>8} {secs:>9.2f} {r['jobs'] / secs:>9.0f} "
                      f"{r['cycles']:>9} {queue:>10.1f} {1000 * secs / r['jobs']:>10.3f}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
