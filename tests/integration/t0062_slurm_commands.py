#!/usr/bin/env python3
"""Issue 47 item 7: tools that drive Slurm run unchanged on hpcq's Slurm
commands (compat/slurm). As a workflow manager's Slurm executor and a
portal's Slurm adapter do: submit with `sbatch --parsable`, poll `sacct -P
-n --format=JobIdRaw,State -j ID` and `squeue -h -o ...`, hold and release
with scontrol, cancel with scancel, list partitions with `sinfo -o %P`, and
run the job's work with srun inside the allocation. And what a batch
script sees: #SBATCH directives honoured, SLURM_* set in Slurm's forms,
output files named by Slurm's patterns, exit codes as sacct's N:S."""
import os
import re
import select
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=4, fanout=2, topology="pack:1 numa:1 core:2 pu:1")

SLURM_BIN = os.path.join(os.environ.get("HPCQ_BUILD_ROOT", ""), "compat", "slurm", "bin")
# The batch scripts call srun: the job's PATH is the submitter's.
os.environ["PATH"] = SLURM_BIN + os.pathsep + os.environ["PATH"]
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def slurm(command, *args, rc=0, cwd=None, input=None):
    return t.run([os.path.join(SLURM_BIN, command), *args], check_rc=rc, cwd=cwd, input=input)


def sbatch(*args, cwd=None, input=None):
    p = slurm("sbatch", "--parsable", *args, cwd=cwd, input=input)
    t.check(re.fullmatch(r"\d+\n", p.stdout), f"sbatch --parsable printed {p.stdout!r}")
    return p.stdout.strip()


def sacct_state(job, raw=None):
    """The executor's poll: sacct -P -n --format=JobIdRaw,State -j ID (an
    array's element is ARRAY_INDEX, its raw id its own)."""
    p = slurm("sacct", "-P", "-n", "-X", "--format=JobIdRaw,State,ExitCode", "-j", job)
    rows = [line.split("|") for line in p.stdout.splitlines()]
    t.check(len(rows) == 1 and rows[0][0] == (raw or job), f"sacct -j {job}: {p.stdout!r}")
    return rows[0][1], rows[0][2]


def wait_ended(job, timeout=60, raw=None):
    deadline = time.monotonic() + timeout
    while True:
        state, code = sacct_state(job, raw)
        if state.split()[0] in ENDED:
            return state, code
        t.check(time.monotonic() < deadline, f"job {job} still {state} after {timeout} s")
        time.sleep(0.1)


def read_env(path):
    with open(path) as f:
        return dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)


def test_a_wrapped_command_runs_and_sacct_reports_it():
    work = t.workdir()
    job = sbatch("--wrap", "echo job=$SLURM_JOB_ID", cwd=work)
    state, code = wait_ended(job)
    t.check((state, code) == ("COMPLETED", "0:0"), f"job {job}: {state} {code}")
    with open(os.path.join(work, f"slurm-{job}.out")) as f:
        t.check(f.read() == f"job={job}\n", "the output of sbatch --wrap")


def test_a_batch_script_gets_its_directives_and_slurms_variables():
    work = t.workdir()
    script = os.path.join(work, "job.sh")
    with open(script, "w") as f:
        f.write("#!/bin/bash\n"
                "#SBATCH --job-name=envdump\n"
                "#SBATCH -N 2 -n 3\n"
                "#SBATCH -o %x-%j.out\n"
                "#SBATCH --time=00:05:00\n"
                "env | grep ^SLURM_ | sort > batch.env\n"
                "srun bash -c 'echo $SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURM_STEP_ID "
                "$SLURM_NTASKS' | sort\n")
    job = sbatch(script, cwd=work)
    state, code = wait_ended(job)
    t.check((state, code) == ("COMPLETED", "0:0"), f"job {job}: {state} {code}")
    env = read_env(os.path.join(work, "batch.env"))
    want = {"SLURM_JOB_ID": job, "SLURM_JOBID": job, "SLURM_JOB_NAME": "envdump",
            "SLURM_NNODES": "2", "SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS": "3",
            "SLURM_NPROCS": "3", "SLURM_TASKS_PER_NODE": "2,1", "SLURM_JOB_CPUS_PER_NODE": "2,1",
            "SLURM_NODEID": "0", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
            "SLURM_SUBMIT_DIR": work}
    for name, value in want.items():
        t.check(env.get(name) == value, f"{name}={env.get(name)!r}, want {value!r}")
    t.check(re.fullmatch(r"node\[\d+-\d+\]|node\d+,node\d+", env.get("SLURM_JOB_NODELIST", "")),
            f"SLURM_JOB_NODELIST={env.get('SLURM_JOB_NODELIST')!r}")
    t.check(env.get("SLURMD_NODENAME", "") in env["SLURM_JOB_NODELIST"] or
            env.get("SLURMD_NODENAME", "").startswith("node"), "SLURMD_NODENAME")
    t.check("SLURM_STEP_ID" not in env, "a batch script is no step")
    with open(os.path.join(work, f"envdump-{job}.out")) as f:
        tasks = f.read().splitlines()
    t.check(tasks == ["0 0 0 0 3", "1 1 0 0 3", "2 0 1 0 3"],
            f"srun's tasks said {tasks} (PROCID LOCALID NODEID STEP_ID NTASKS)")
    rows = slurm("sacct", "-P", "-n", "--format=JobID,State,ExitCode,NTasks", "-j", job).stdout
    t.check(rows.splitlines() == [f"{job}|COMPLETED|0:0|", f"{job}.batch|COMPLETED|0:0|1",
                                  f"{job}.0|COMPLETED|0:0|3"], f"sacct's rows: {rows!r}")


def test_held_pending_then_released_as_squeue_and_scontrol_show():
    job = sbatch("-H", "--wrap", "true", "-o", "/dev/null")
    p = slurm("squeue", "-h", "-j", job, "-o", "%i|%T|%r|%D")
    t.check(p.stdout == f"{job}|PENDING|JobHeldUser|1\n", f"squeue: {p.stdout!r}")
    shown = slurm("scontrol", "show", "job", job).stdout
    t.check(f"JobId={job} " in shown and "JobState=PENDING" in shown, f"scontrol: {shown!r}")
    slurm("scontrol", "release", job)
    t.check(wait_ended(job) == ("COMPLETED", "0:0"), "released, it runs")
    p = slurm("squeue", "-h", "-j", job, "-o", "%i")
    t.check(p.stdout == "", f"an ended job left squeue: {p.stdout!r}")


def test_scancel_a_running_job_and_exit_codes():
    job = sbatch("--wrap", "sleep 300", "-o", "/dev/null")
    deadline = time.monotonic() + 30
    while slurm("squeue", "-h", "-j", job, "-o", "%t").stdout.strip() != "R":
        t.check(time.monotonic() < deadline, f"job {job} did not start")
        time.sleep(0.1)
    slurm("scancel", "-t", "running", job)  # a state in lower case, as Slurm takes it
    state, _ = wait_ended(job)
    t.check(state.startswith("CANCELLED"), f"scancel'd job is {state}")
    failing = sbatch("--wrap", "exit 3", "-o", "/dev/null")
    t.check(wait_ended(failing) == ("FAILED", "3:0"), "exit 3 is FAILED 3:0")
    p = slurm("sbatch", "-W", "--wrap", "exit 4", "-o", "/dev/null", rc=4)
    t.check(p.stdout.startswith("Submitted batch job "), f"sbatch's words: {p.stdout!r}")


def test_arrays_and_a_script_on_stdin():
    work = t.workdir()
    first = sbatch("--array=0-2", "--wrap", "echo $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID "
                   "$SLURM_ARRAY_TASK_COUNT", cwd=work)
    for i in range(3):
        t.check(wait_ended(f"{first}_{i}", raw=str(int(first) + i)) == ("COMPLETED", "0:0"),
                f"array element {i}")
        with open(os.path.join(work, f"slurm-{first}_{i}.out")) as f:
            t.check(f.read() == f"{first} {i} 3\n", f"array element {i}")
    p = slurm("sacct", "-P", "-n", "-X", "--format=JobID,JobIDRaw", "-j", first)
    t.check(p.stdout.split() == [f"{first}_{i}|{int(first) + i}" for i in range(3)],
            f"sacct -j ARRAY lists its elements: {p.stdout!r}")
    job = sbatch(cwd=work, input="#!/bin/sh\n#SBATCH -J fromstdin\necho $SLURM_JOB_NAME\n")
    wait_ended(job)
    with open(os.path.join(work, f"slurm-{job}.out")) as f:
        t.check(f.read() == "fromstdin\n", "a script on stdin")


def test_signal_goes_to_the_steps_or_with_b_to_the_script_alone():
    """sbatch's --signal warns a batch job's steps, not its script; with B:
    the script alone (its own process: not its step's client either)."""
    work = t.workdir()
    script = os.path.join(work, "warned.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n"
                "#SBATCH -t 0:20 -o %x.out\n"
                "trap 'echo script warned' USR1\n"
                "srun sh -c 'trap \"echo step warned; exit 0\" USR1; i=0; "
                "while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; echo step not warned'\n"
                "echo script done\n")
    steps = sbatch("-J", "steps", "--signal=USR1@15", script, cwd=work)
    only_script = sbatch("-J", "script", "--signal=B:USR1@15", script, cwd=work)
    for job in (steps, only_script):
        t.check(wait_ended(job) == ("COMPLETED", "0:0"), f"job {job}")
    def said(name):
        # A step's signal reaches all its processes, as Slurm's: the shell
        # may report its `sleep` killed by it.
        with open(os.path.join(work, name)) as f:
            return [line for line in f.read().splitlines() if line != "User defined signal 1"]
    t.check(said("steps.out") == ["step warned", "script done"],
            f"--signal=USR1@15 warns the step only: {said('steps.out')}")
    t.check(said("script.out") == ["step not warned", "script warned", "script done"],
            f"--signal=B:USR1@15 warns the script only: {said('script.out')}")


def test_partitions_nodes_and_hostnames():
    # A line per partition and node state: other tests' jobs may still hold nodes.
    p = slurm("sinfo", "-h", "-o", "%P %D %c")
    lines = [line.split() for line in p.stdout.splitlines()]
    t.check(lines and all(re.fullmatch(r"\S+\*", w[0]) and w[0] == lines[0][0] and w[2] == "2"
                          for w in lines) and sum(int(w[1]) for w in lines) == 4,
            f"sinfo -h -o '%P %D %c': {p.stdout!r}")
    t.check(slurm("sinfo", "-h", "-o", "%P").stdout.split()[0] == lines[0][0], "sinfo -o %P")
    t.check(slurm("sinfo", "-N", "-h", "-o", "%N").stdout.split() ==
            ["node1", "node2", "node3", "node4"], "sinfo -N")
    t.check(slurm("scontrol", "show", "hostnames", "node[1-2],node4").stdout == "node1\nnode2\nnode4\n",
            "scontrol show hostnames")
    shown = slurm("scontrol", "show", "node", "node3").stdout
    t.check("NodeName=node3" in shown and "CPUTot=2" in shown, f"scontrol show node: {shown!r}")


def test_sstat_and_sattach_on_a_running_step():
    """sstat measures a running job's steps (per node: hpcq has no per-task
    figures); sattach follows a step's output from now on, labelled with -l."""
    work = t.workdir()
    gate = t.Gate(work)
    script = os.path.join(work, "ticks.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n#SBATCH -N 1 -o ticks.out\n"
                f"srun sh -c 'i=0; while [ ! -e {gate.path} ]; do echo tick $i; i=$((i+1)); "
                "sleep 0.1; done; echo bye'\n")
    job = sbatch(script, cwd=work)

    def rows(*args):
        p = slurm("sstat", "-n", "-P", "-j", job, *args)
        return [line.split("|") for line in p.stdout.splitlines()]
    t.wait_until("the job's srun step running", lambda: [r[0] for r in rows("-o", "JobID")] ==
                 [f"{job}.0"])
    measured = rows("-a", "--format=JobID,MaxRSS,MaxRSSNode,AveCPU,NTasks,Nodelist")
    t.check([r[0] for r in measured] == [f"{job}.batch", f"{job}.0"], f"sstat -a: {measured}")
    for r in measured:
        t.check(re.fullmatch(r"\d+K", r[1]) and re.fullmatch(r"node\d", r[2]) and
                re.fullmatch(r"\d\d:\d\d:\d\d", r[3]) and r[4] == "1" and r[5] == r[2],
                f"sstat row {r}")
    table = slurm("sstat", "-j", f"{job}.0").stdout.splitlines()
    t.check(len(table) == 3 and table[0].split()[:2] == ["JobID", "MaxRSS"] and
            set(table[1]) == {"-", " "} and table[2].split()[0] == f"{job}.0",
            f"sstat's table: {table}")

    attach = subprocess.Popen([os.path.join(SLURM_BIN, "sattach"), "-l", f"{job}.0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL)
    first = b""
    deadline = time.monotonic() + 30
    while b"\n" not in first and time.monotonic() < deadline:
        if select.select([attach.stdout], [], [], 1)[0]:
            chunk = os.read(attach.stdout.fileno(), 4096)
            if not chunk:
                break
            first += chunk
    first = first.decode().split("\n")[0]
    t.check(re.fullmatch(r"0: tick \d+", first), f"sattach -l's first line {first!r}")
    gate.open()
    out, err = attach.communicate(timeout=60)
    t.check(attach.returncode == 0 and out.decode().splitlines()[-1] == "0: bye",
            f"sattach: rc {attach.returncode}, {out[-200:]!r} {err!r}")
    t.check(wait_ended(job) == ("COMPLETED", "0:0"), f"job {job}")

    p = slurm("sstat", "-j", job, rc=1)
    t.check(p.stderr == f"sstat: error: no steps running for job {job}\n", f"{p.stderr!r}")
    p = slurm("sstat", "-j", job, "-o", "MaxVMSize", rc=1)
    t.check(p.stderr.count("\n") == 1 and "MaxVMSize" in p.stderr, f"{p.stderr!r}")
    p = slurm("sattach", job, rc=1)
    t.check(p.stderr.count("\n") == 1 and "JOB.STEP" in p.stderr, f"{p.stderr!r}")


def test_what_hpcq_cannot_honour_is_refused_in_one_line():
    p = slurm("sbatch", "--mail-type=END", "--wrap", "true", rc=1)
    t.check(p.stderr == "sbatch: error: --mail-type: not honoured by hpcq (docs/slurm.md)\n",
            f"stderr: {p.stderr!r}")
    for command in ("squeue", "sacct", "sinfo", "scancel", "sstat", "sattach"):
        p = slurm(command, "--help")
        t.check(p.stdout.startswith(f"Usage: {command} [OPTIONS]") and "\n  -" in p.stdout and
                p.stdout.endswith("docs/slurm.md says which it refuses and how the rest differ.\n"),
                f"{command} --help: {p.stdout!r}")
    t.check(slurm("squeue", "--usage").stdout == slurm("squeue", "--help").stdout, "--usage")
    p = slurm("squeue", "--frobnicate", rc=1)
    t.check(p.stderr.count("\n") == 1 and "--frobnicate" in p.stderr, f"stderr: {p.stderr!r}")
    p = slurm("scancel", "999999", rc=1)
    t.check(p.stderr.startswith("scancel: error: Kill job error on job id '999999'"), p.stderr)


t.main([test_a_wrapped_command_runs_and_sacct_reports_it,
        test_a_batch_script_gets_its_directives_and_slurms_variables,
        test_held_pending_then_released_as_squeue_and_scontrol_show,
        test_scancel_a_running_job_and_exit_codes,
        test_arrays_and_a_script_on_stdin,
        test_signal_goes_to_the_steps_or_with_b_to_the_script_alone,
        test_partitions_nodes_and_hostnames,
        test_sstat_and_sattach_on_a_running_step,
        test_what_hpcq_cannot_honour_is_refused_in_one_line])
