#!/usr/bin/env python3
"""hpcq throughput benchmark; produces the README's figures.

  (a) acknowledged submissions per second through gRPC, 1 and 8 concurrent
      clients, on a leader with no agents (jobs stay queued: the durable
      submit path alone);
  (b) end-to-end throughput of 2,000 trivial jobs (`true`) through the API
      (8 clients) on `hpcq start --agents 4`, first submit to last end;
  (c) the same 2,000 jobs with one CLI call per job (`hpcq submit`, one after
      another, as a user's loop would), on hpcq and on Slurm 22.05 from
      Debian's packages (slurmctld + 4 slurmd on loopback, the recipe in
      ../shared/peers/slurm, tuned profile), run in the same session; both
      clusters have 4 nodes x 2 cores. Reports hpcq / Slurm;
  (d) the same 2,000 jobs as one array (`hpcq submit --array=1-2000 true`,
      then `hpcq wait` on the array's id, which waits for every element), on
      4 nodes x 2 cores, and Slurm's `sbatch --array=1-2000 --wrap true`
      polled with squeue until it is empty, as (c) polls it. Reports hpcq /
      Slurm.

Usage: bench/throughput.py [--jobs 2000] [--reps 3] [--skip-slurm] [--build build]
Run as root on an idle machine; never two benchmarks at once. Each of the
--reps rounds measures (a), (b) and (c) once, hpcq then Slurm, so that the two
share the machine's state; both log at info (Slurm's peer recipe sets
SlurmctldDebug=info). Prints one JSON line per measurement (with its round,
the commit, the host and the load average when it began) and a summary table
of min / median; appends the lines to bench/results/throughput.jsonl.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from contextlib import nullcontext

from slurm_peer import run_array, slurm_cluster

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# The level Slurm's daemons log at in the peer recipe (SlurmctldDebug=info).
LOG_LEVEL = "info"


def commit():
    """The measured tree: its commit, '+' when it has uncommitted changes
    (other than bench/results, which every run appends to)."""
    git = lambda *a: subprocess.run(["git", "-C", ROOT, *a], capture_output=True,
                                    text=True).stdout.strip()
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results")
    return git("rev-parse", "--short", "HEAD") + ("+" if dirty else "")


def host():
    u = os.uname()
    return f"{u.nodename} {u.release} {os.cpu_count()} CPUs"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def standalone_leader(build):
    """A leader with no agents: every submitted job stays queued."""
    d = tempfile.mkdtemp(prefix="hpcq-bench-")
    key = os.path.join(d, "leader.key")
    public = subprocess.run([f"{build}/cli/hpcq", "keygen", key], check=True,
                            capture_output=True, text=True).stdout.strip()
    with open(os.path.join(d, "hpcq.toml"), "w") as f:
        f.write(f'[leader]\nstate_dir = "{d}/state"\nsocket = "{d}/hpcqd.sock"\n'
                f'secret_key = "{key}"\n\n[[rank]]\nname = "leader"\n'
                f'endpoint = "tcp://127.0.0.1:{free_port()}"\npublic_key = "{public}"\n')
    log = open(os.path.join(d, "hpcqd.log"), "w")
    p = subprocess.Popen([f"{build}/daemon/hpcqd", "--config", f"{d}/hpcq.toml",
                          "--log-level", LOG_LEVEL], stdout=log, stderr=log)
    env = dict(os.environ, HPCQ_SOCKET=f"{d}/hpcqd.sock")
    for _ in range(400):
        if subprocess.run([f"{build}/cli/hpcq", "queue"], env=env,
                          capture_output=True).returncode == 0:
            return p, env, d
        time.sleep(0.05)
    raise SystemExit("hpcqd did not start")


def submit_rate(build, clients, jobs):
    p, env, d = standalone_leader(build)
    try:
        out = subprocess.run([f"{build}/bench/hpcq-submit-load", "-n", str(jobs), "-c", str(clients),
                              "--socket", env["HPCQ_SOCKET"]], check=True, capture_output=True,
                             text=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


def in_cluster(build, script, topology):
    """Runs a shell snippet inside `hpcq start --agents 4`; returns its last stdout line."""
    out = subprocess.run([f"{build}/cli/hpcq", "start", "--agents", "4", "--topology", topology,
                          "--log-level", LOG_LEVEL, "--", "bash", "-c", script],
                         check=True, capture_output=True, text=True,
                         env=dict(os.environ, PATH=f"{build}/cli:{build}/bench:" + os.environ["PATH"]))
    return out.stdout.strip().splitlines()[-1]


def api_end_to_end(build, jobs, topology):
    line = in_cluster(build, f"hpcq-submit-load -n {jobs} -c 8 --wait", topology)
    return json.loads(line)


def cli_end_to_end(build, jobs, topology):
    script = f"""
set -e
cd "$(mktemp -d)"
t0=$(date +%s.%N)
for i in $(seq {jobs}); do hpcq submit -o /dev/null true >> ids; done
t1=$(date +%s.%N)
hpcq wait $(cat ids) > /dev/null
t2=$(date +%s.%N)
python3 -c "import json; n={jobs}; s=$t1-$t0; e=$t2-$t0; print(json.dumps(dict(jobs=n, submit_seconds=round(s,3), submit_per_second=round(n/s,1), seconds=round(e,3), per_second=round(n/e,1))))"
"""
    return json.loads(in_cluster(build, script, topology))


def array_end_to_end(build, jobs, topology):
    script = f"""
set -e
cd "$(mktemp -d)"
t0=$(date +%s.%N)
array=$(hpcq submit -o /dev/null --array=1-{jobs} true)
t1=$(date +%s.%N)
hpcq wait "$array" > /dev/null
t2=$(date +%s.%N)
python3 -c "import json; n={jobs}; s=$t1-$t0; e=$t2-$t0; print(json.dumps(dict(jobs=n, submit_seconds=round(s,3), seconds=round(e,3), per_second=round(n/e,1))))"
"""
    return json.loads(in_cluster(build, script, topology))


def slurm_array_end_to_end(peer_env, jobs):
    env, peer = peer_env
    submit, seconds = run_array(env, jobs, poll_s=0.1)
    return dict(jobs=jobs, submit_seconds=round(submit, 3), seconds=round(seconds, 3),
                per_second=round(jobs / seconds, 1))


def slurm_end_to_end(peer_env, jobs):
    env, peer = peer_env
    out = subprocess.run([sys.executable, os.path.join(peer, "bench.py"), "--n", str(jobs),
                          "--reps", "1", "--tag", "hpcq-bench"], check=True,
                         capture_output=True, text=True, env=env).stdout
    return json.loads(out.splitlines()[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--submit-jobs", type=int, default=5000)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--skip-slurm", action="store_true")
    ap.add_argument("--reps", type=int, default=3, help="rounds of every measurement")
    ap.add_argument("--label", default="",
                    help="kept in each result line: what was measured (e.g. a commit)")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    results = []

    tree, machine = commit(), host()

    def record(name, round_, measure):
        began = dict(when=time.strftime("%Y-%m-%dT%H:%M:%S"), load=round(os.getloadavg()[0], 2))
        value = dict(measure(), measurement=name, round=round_, commit=tree, host=machine, **began)
        if a.label:
            value["label"] = a.label
        print(json.dumps(value), flush=True)
        results.append(value)

    two, sixteen = "pack:1 numa:1 core:2 pu:1", "pack:2 numa:2 core:4 pu:1"
    with (slurm_cluster() if not a.skip_slurm else nullcontext()) as peer:
        for r in range(1, a.reps + 1):
            for clients in (1, 8):
                record(f"submit_rate_{clients}_clients", r,
                       lambda: submit_rate(build, clients, a.submit_jobs))
            record("api_end_to_end_16_cores", r, lambda: api_end_to_end(build, a.jobs, sixteen))
            record("api_end_to_end_2_cores", r, lambda: api_end_to_end(build, a.jobs, two))
            record("cli_end_to_end_2_cores", r, lambda: cli_end_to_end(build, a.jobs, two))
            if peer:
                record("slurm_cli_end_to_end_2_cores", r, lambda: slurm_end_to_end(peer, a.jobs))
            record("array_end_to_end_2_cores", r, lambda: array_end_to_end(build, a.jobs, two))
            if peer:
                record("slurm_array_end_to_end_2_cores", r,
                       lambda: slurm_array_end_to_end(peer, a.jobs))

    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "throughput.jsonl"), "a") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    def values(measurement, field):
        return [r[field] for r in results if r["measurement"] == measurement]

    def cell(measurement, field, digits=0):
        v = values(measurement, field)
        return f"{min(v):.{digits}f} / {statistics.median(v):.{digits}f}" if v else "-"

    print()
    print(f"| measurement ({a.reps} rounds: min / median) | result |")
    print("|---|---|")
    for clients in (1, 8):
        print(f"| (a) acknowledged submissions/s, {clients} client(s) | "
              f"{cell(f'submit_rate_{clients}_clients', 'submit_per_second')} |")
    print(f"| (b) {a.jobs} jobs end to end via API, 4 nodes x 16 cores | "
          f"{cell('api_end_to_end_16_cores', 'per_second')} jobs/s |")
    print(f"| (b) {a.jobs} jobs end to end via API, 4 nodes x 2 cores | "
          f"{cell('api_end_to_end_2_cores', 'per_second')} jobs/s |")
    # (row, hpcq's measurement, what Slurm ran, Slurm's measurement and field)
    for row, hpcq, peer, slurm_name, slurm_field in (
            ("(c)", "cli_end_to_end_2_cores", "one sbatch per job",
             "slurm_cli_end_to_end_2_cores", "e2e_jobs_per_s"),
            ("(d)", "array_end_to_end_2_cores", "one sbatch --array",
             "slurm_array_end_to_end_2_cores", "per_second")):
        what = "one CLI call per job" if row == "(c)" else f"one array of {a.jobs}"
        print(f"| {row} hpcq, {what}, 4 x 2 cores | {cell(hpcq, 'per_second', 1)} jobs/s |")
        slurm = values(slurm_name, slurm_field)
        if slurm:
            print(f"| {row} Slurm 22.05 tuned, {peer}, 4 x 2 cores | "
                  f"{cell(slurm_name, slurm_field, 1)} jobs/s |")
            ratios = [h / s for h, s in zip(values(hpcq, "per_second"), slurm)]
            print(f"| {row} hpcq / Slurm, round by round | {min(ratios):.1f}x / "
                  f"{statistics.median(ratios):.1f}x |")


if __name__ == "__main__":
    main()
