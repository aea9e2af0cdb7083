#!/usr/bin/env python3
"""Isolation on a node (issue 24, item 5). Each task opens only its own GPUs:
two agents emulate tests/unit/resource/gpu_node.xml's node (4 GPUs) and
[agent] gpu_devices names four device files made here (char major 240, kept
for local use: no driver answers it, so a task allowed to open one gets
ENXIO, a task denied it by its cgroup EPERM). A task of --gpus-per-task
opens its GPU and no other; a job without GPUs opens none; a batch script
opens its node's GPUs and a step inside it its own; an --image job's
container gets its GPU's file and no other. With [agent] private_tmp =
"tmpfs" each job has its own /tmp and /dev/shm, shared by its tasks and
steps on a node, hidden from other jobs and the host, and gone with the
job. The cluster lives under /var/tmp: the job directories may not be under
the /tmp each job hides."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XML = os.path.join(ROOT, "tests", "unit", "resource", "gpu_node.xml")
DEV = "/dev/hpcq-t0044"  # under /dev: a container makes its files in its own /dev
CONFIG = "/var/tmp/hpcq-t0044.toml"
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}

if not os.environ.get("HPCQ_TEST_INSIDE"):
    shutil.rmtree(DEV, ignore_errors=True)
    os.makedirs(DEV)
    for g in range(4):
        os.mknod(f"{DEV}/gpu{g}", 0o666 | 0o020000, os.makedev(240, g))
        os.chmod(f"{DEV}/gpu{g}", 0o666)
    with open(CONFIG, "w") as f:
        devices = ", ".join(f'"{DEV}/gpu{g}"' for g in range(4))
        f.write(f'[agent]\ngpu_devices = [{devices}]\nprivate_tmp = "tmpfs"\n')
    os.environ["TMPDIR"] = "/var/tmp"
t.within_cluster(agents=2, fanout=2, topology="xml:" + XML, extra=("--config", CONFIG))

# Prints the task's rank, its CUDA_VISIBLE_DEVICES and, for each GPU, what
# opening its file gave.
PROBE = ("import errno, os\n"
         "seen = []\n"
         "for g in range(4):\n"
         "    try:\n"
         f"        os.close(os.open('{DEV}/gpu%d' % g, os.O_RDONLY))\n"
         "        seen.append('%d:open' % g)\n"
         "    except OSError as e:\n"
         "        seen.append('%d:%s' % (g, errno.errorcode[e.errno]))\n"
         "print(os.environ.get('HPCQ_TASK_RANK'), "
         "'gpus=' + os.environ.get('CUDA_VISIBLE_DEVICES', ''), *seen)\n")


def probe_file(d):
    path = os.path.join(d, "probe.py")
    with open(path, "w") as f:
        f.write(PROBE)
    return path


def check_opens(line):
    """One probe line: its own GPUs open (ENXIO: past the cgroup, no driver),
    every other refused (EPERM)."""
    fields = line.split()
    gpus = fields[1].split("=")[1]
    mine = {int(g) for g in gpus.split(",")} if gpus else set()
    for seen in fields[2:]:
        g, result = seen.split(":")
        expected = "ENXIO" if int(g) in mine else "EPERM"
        t.check(result == expected, f"GPU {g} gave {result}, expected {expected}: {line}")
    return mine


def output_lines(path):
    with open(path) as f:
        return [l for l in f.read().splitlines() if l.strip()]


def test_each_task_opens_only_its_own_gpu():
    d = t.workdir()
    job = t.submit("-N", "1", "-n", "3", "-c", "4", "--gpus-per-task", "1", "--",
                   "python3", probe_file(d), cwd=d)
    s = t.wait_state(job, ENDED)
    lines = output_lines(s["stdout"])
    t.check(s["state"] == "COMPLETED" and len(lines) == 3, f"{s['state']} {s['reason']}: {lines}")
    owned = [check_opens(line) for line in lines]
    t.check(all(len(m) == 1 for m in owned) and len(set().union(*owned)) == 3,
            f"each task one GPU of its own: {lines}")


def test_a_job_without_gpus_opens_none():
    d = t.workdir()
    job = t.submit("-n", "1", "--", "python3", probe_file(d), cwd=d)
    s = t.wait_state(job, ENDED)
    lines = output_lines(s["stdout"])
    t.check(s["state"] == "COMPLETED" and len(lines) == 1, f"{s['state']} {s['reason']}: {lines}")
    t.check(check_opens(lines[0]) == set(), lines[0])


def test_a_batch_script_and_its_step():
    d = t.workdir()
    script = os.path.join(d, "job.sh")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\n#HPCQ -N 1 -n 2 -c 4 --gpus-per-node 2\n"
                f"python3 {probe_file(d)}\n"
                f"hpcq run -n 1 -- python3 {d}/probe.py\n")
    job = int(t.hpcq("batch", script, cwd=d).stdout)
    s = t.wait_state(job, ENDED)
    lines = output_lines(os.path.join(d, f"hpcq-{job}.out"))
    t.check(s["state"] == "COMPLETED" and len(lines) == 2, f"{s['state']} {s['reason']}: {lines}")
    script_gpus = check_opens(lines[0])
    step_gpus = check_opens(lines[1])
    t.check(len(script_gpus) == 2, f"the script has its node's 2 GPUs: {lines[0]}")
    t.check(step_gpus <= script_gpus, f"the step's GPUs are the job's: {lines}")


def test_an_image_job_gets_its_gpu_file_and_no_other():
    root = t.busybox_rootfs()
    d = t.workdir()
    # busybox cat: "can't open '...': No such device or address" (allowed,
    # no driver) or "Operation not permitted" (denied); or the file is not
    # in the container at all.
    job = t.submit("-n", "1", "--gpus-per-task", "1", "--image", root, "--", "sh", "-c",
                   "echo gpus=$CUDA_VISIBLE_DEVICES; "
                   f"for g in 0 1 2 3; do cat {DEV}/gpu$g 2>&1 | head -n 1; done", cwd=d)
    s = t.wait_state(job, ENDED)
    lines = output_lines(s["stdout"])
    t.check(s["state"] == "COMPLETED" and len(lines) == 5, f"{s['state']} {s['reason']}: {lines}")
    mine = int(lines[0].split("=")[1])
    for g, line in enumerate(lines[1:]):
        if g == mine:
            t.check("No such device or address" in line, f"GPU {g} (its own): {line}")
        else:
            t.check("No such file" in line or "not permitted" in line, f"GPU {g}: {line}")


def test_each_job_has_its_own_tmp_and_shm():
    d = t.workdir()
    gate = t.Gate(d)
    # Two jobs at once on one node: each writes a file named after itself to
    # its /tmp and /dev/shm, and lists both once the other has written too.
    script = ("echo $HPCQ_JOB_ID > /tmp/mine-$HPCQ_JOB_ID; "
              "echo $HPCQ_JOB_ID > /dev/shm/mine-$HPCQ_JOB_ID; "
              f"touch {d}/wrote-$HPCQ_JOB_ID; "
              f"while [ ! -e {gate.path} ]; do sleep 0.05; done; "
              "echo tmp $(ls -A /tmp); echo shm $(ls -A /dev/shm); echo TMPDIR=$TMPDIR")
    jobs = [t.submit("-w", "node1", "-n", "1", "--", "sh", "-c", script, cwd=d) for _ in range(2)]
    t.wait_until("both jobs wrote",
                 lambda: all(os.path.exists(f"{d}/wrote-{j}") for j in jobs))
    gate.open()
    for j in jobs:
        s = t.wait_state(j, ENDED)
        lines = output_lines(s["stdout"])
        t.check(s["state"] == "COMPLETED", f"job {j}: {s['state']} {s['reason']}")
        t.check(lines == [f"tmp mine-{j}", f"shm mine-{j}", "TMPDIR=/tmp"],
                f"job {j} sees only its own files: {lines}")
    for j in jobs:
        for where in ("/tmp", "/dev/shm"):
            t.check(not os.path.exists(f"{where}/mine-{j}"), f"{where}/mine-{j} on the host")
    # Gone with the jobs: no tmpfs of theirs is left mounted.
    with open("/proc/self/mounts") as f:
        left = [l for l in f.read().splitlines() if "/private/" in l and t.cluster_dir() in l]
    t.check(not left, f"private mounts left: {left}")


def test_steps_share_their_jobs_tmp():
    d = t.workdir()
    script = os.path.join(d, "job.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n#HPCQ -N 1 -n 1\n"
                "echo from-script > /tmp/shared; echo shm > /dev/shm/shared\n"
                "hpcq run -n 1 -- sh -c 'cat /tmp/shared /dev/shm/shared; "
                "echo from-step > /tmp/back'\n"
                "cat /tmp/back\n")
    job = int(t.hpcq("batch", script, cwd=d).stdout)
    s = t.wait_state(job, ENDED)
    lines = output_lines(os.path.join(d, f"hpcq-{job}.out"))
    t.check(s["state"] == "COMPLETED", f"{s['state']} {s['reason']}: {lines}")
    t.check(lines == ["from-script", "shm", "from-step"], f"output {lines}")


def test_nodes_with_a_private_tmp_do_not_checkpoint():
    for n in json.loads(t.hpcq("nodes", "--json").stdout):
        t.check(not n["checkpoint"] and "private /tmp" in n["checkpoint_reason"],
                f"{n['name']}: {n['checkpoint']} {n['checkpoint_reason']}")


def test_the_job_directories_may_not_lie_under_tmp():
    bad = "/var/tmp/hpcq-t0044-bad.toml"
    with open(bad, "w") as f:
        f.write('[agent]\nprivate_tmp = "dir"\n')
    env = dict(os.environ, TMPDIR="/tmp")
    r = subprocess.run([t.HPCQ, "start", "--agents", "1", "--config", bad, "--", "true"],
                       capture_output=True, text=True, env=env, timeout=60)
    t.check(r.returncode != 0 and "may not lie under /tmp/" in r.stderr,
            f"rc {r.returncode}: {r.stderr[-600:]}")


if __name__ == "__main__":
    try:
        t.main([test_each_task_opens_only_its_own_gpu, test_a_job_without_gpus_opens_none,
                test_a_batch_script_and_its_step, test_an_image_job_gets_its_gpu_file_and_no_other,
                test_each_job_has_its_own_tmp_and_shm, test_steps_share_their_jobs_tmp,
                test_nodes_with_a_private_tmp_do_not_checkpoint,
                test_the_job_directories_may_not_lie_under_tmp])
    finally:
        shutil.rmtree(DEV, ignore_errors=True)
