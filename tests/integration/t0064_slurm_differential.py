#!/usr/bin/env python3
"""Issue 47 item 6: the differential test against real Slurm. The corpus of
tests/slurm_corpus (batch scripts as sites publish them) runs through hpcq's
Slurm commands (compat/slurm) and what a user observes (SLURM_* values,
output file names and contents, sacct states and exit codes, node and task
counts, the shapes of squeue and sacct lines) is compared with what Slurm
22.05 showed for the same corpus, recorded in tests/data/slurm_observed.json
by bench/slurm_differential.py. Every difference is either fixed or listed,
with its reason, in tests/slurm_corpus/known_differences.json; one that is
not listed fails the test. The cluster is the peer's: 4 nodes of 2 CPUs, a
default partition `debug` and an account `physics`."""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hpcqtest as t  # noqa: E402
import slurm_observe  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(ROOT, "tests", "slurm_corpus")
RECORDED = os.path.join(ROOT, "tests", "data", "slurm_observed.json")
CONFIG = os.path.join(tempfile.gettempdir(), "hpcq-t0064.toml")
if not os.environ.get("HPCQ_TEST_INSIDE"):
    with open(CONFIG, "w") as f:
        f.write('[[queue]]\nname = "debug"\ndefault = true\n[[account]]\nname = "physics"\n')
t.within_cluster(agents=4, fanout=2, topology="pack:1 numa:1 core:2 pu:1",
                 extra=("--config", CONFIG))

SLURM_BIN = os.path.join(os.environ.get("HPCQ_BUILD_ROOT", ""), "compat", "slurm", "bin")


def test_the_corpus_shows_what_slurm_shows():
    env = dict(os.environ, PATH=SLURM_BIN + os.pathsep + os.environ["PATH"])
    work = t.workdir()
    raw = {}
    observed = slurm_observe.observe(CORPUS, env, work, raw=raw)
    with open(os.path.join(work, "observed.json"), "w") as f:
        json.dump(observed, f, indent=1, sort_keys=True)
    with open(RECORDED) as f:
        expected = json.load(f)
    known = slurm_observe.load_known_differences(os.path.join(CORPUS, "known_differences.json"))
    differences = slurm_observe.compare(expected, observed, known)
    for line in differences:
        print(line, flush=True)
    print(f"{len(expected)} scripts; {len(differences)} differences not listed in "
          f"known_differences.json (observed: {work}/observed.json)", flush=True)
    t.check(not differences, f"{len(differences)} differences from Slurm (above)")


t.main([test_the_corpus_shows_what_slurm_shows])
