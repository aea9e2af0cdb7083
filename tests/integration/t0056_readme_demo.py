#!/usr/bin/env python3
"""README command 1 in the suite. The README's first command is
examples/local-cluster.sh: it installs and builds, then runs
`hpcq start ... -- examples/demo.sh`. This test runs that last line as the
script has it (the cluster's options are read from the script, not copied)
against the build tree, and checks what the demo prints: the 4 nodes up,
the sample job's 4 tasks on 2 nodes with their cores, memory nodes and
hostfile, its status, the batch script's two steps and the history with
steps. The install half (meson install, ldconfig) changes the machine and
is not run here."""
import os
import re
import shlex
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The host's NUMA nodes, counted as the agents count them (agent.cc).
HOST_NUMA = max(1, len([n for n in os.listdir("/sys/devices/system/node")
                        if n.startswith("node") and n[4:5].isdigit()]))


def readme_command_1():
    """The README's first command: the first line of its first sh block."""
    with open(os.path.join(ROOT, "README.md")) as f:
        block = re.search(r"```sh\n(.*?)```", f.read(), re.S)
    return block.group(1).strip().splitlines()[0] if block else None


def cluster_line(script):
    """The `hpcq start` line of `script`: its options (a dict, plus the
    others in order) and the command it runs in the cluster."""
    with open(os.path.join(ROOT, script)) as f:
        lines = [l for l in f.read().splitlines() if l.startswith("hpcq start ")]
    t.check(len(lines) == 1, f"{script}: {len(lines)} `hpcq start` lines, expected one")
    words = shlex.split(lines[0])[2:]
    at = words.index("--")
    options, command = words[:at], words[at + 1:]
    named = dict(zip(options[0::2], options[1::2]))
    return named, command


COMMAND_1 = readme_command_1()
if COMMAND_1 != "examples/local-cluster.sh":
    # Said before any cluster starts: the test must follow a new command 1.
    print(f"FAIL the README's first command is {COMMAND_1!r}, not examples/local-cluster.sh: "
          f"update this test to run what it runs", flush=True)
    sys.exit(1)
START, DEMO = cluster_line(COMMAND_1)
OTHER = [w for k, v in START.items() if k not in ("--agents", "--fanout", "--topology")
         for w in (k, v)]
t.within_cluster(agents=int(START["--agents"]), fanout=int(START["--fanout"]),
                 topology=START["--topology"], extra=OTHER)


def sections(text):
    """The demo's output cut at its "== " headers: {header: [lines]}."""
    out, header = {}, None
    for line in text.splitlines():
        if line.startswith("== "):
            header = line[3:]
            out[header] = []
        elif header is not None:
            out[header].append(line)
    return out


def section(parts, prefix):
    found = [h for h in parts if h.startswith(prefix)]
    t.check(len(found) == 1, f"a section '{prefix}...': {list(parts)}")
    return found[0], parts[found[0]]


TASK = re.compile(r"task (\d+)/4 on (node\d+) \(node (\d+) of 2: (\S+)\): "
                  r"cores (\S+) -> host CPUs (\S+), memory nodes (\S+)$")


def test_readme_command_1_runs_the_demo_on_the_cluster():
    agents = int(START["--agents"])
    p = t.run(DEMO, cwd=ROOT)
    work = re.search(r"^== output \((/tmp/hpcq-demo-[^/]+)/", p.stdout, re.M)
    try:
        t.check(p.returncode == 0, f"{' '.join(DEMO)}: exit {p.returncode}\n"
                f"stdout: {p.stdout}\nstderr: {p.stderr}")
        check_output(p.stdout, agents)
    finally:
        if work:
            shutil.rmtree(work.group(1), ignore_errors=True)


def check_output(text, agents):
    parts = sections(text)
    # The nodes, as hpcq start made them.
    _, nodes = section(parts, "hpcq nodes")
    rows = [l.split() for l in nodes[1:] if l.strip()]
    t.check([r[0] for r in rows] == [f"node{i}" for i in range(1, agents + 1)] and
            all(r[2] == "up" for r in rows), f"hpcq nodes: {nodes}")
    t.check(all(l.rstrip().endswith(f"synthetic:{START['--topology']}  -") for l in nodes[1:]
                if l.strip()), f"the topology hpcq start was given: {nodes}")
    # The sample job: submitted, then ended COMPLETED on 2 nodes, 4 tasks.
    submitted, _ = section(parts, "submitted job ")
    job = int(submitted.split()[-1])
    s = t.status(job)
    t.check(s["state"] == "COMPLETED" and s["exit_code"] == 0 and len(s["nodes"]) == 2 and
            s["ntasks"] == 4 and s["name"] == "hello", f"job {job}: {s}")
    _, queue = section(parts, "hpcq queue --all")
    t.check(any(l.split()[:5] == [str(job), "-", "root", "hello", "COMPLETED"] for l in queue),
            f"hpcq queue --all: {queue}")
    _, status = section(parts, f"hpcq status {job}")
    t.check(any("State=COMPLETED ExitCode=0" in l for l in status) and
            any("NumNodes=2 NumTasks=4 CPUs/Task=2" in l for l in status), f"status: {status}")
    # Its output: one line per task, 2 tasks on each of its 2 nodes, each with
    # 2 cores of its node and that node's place in the job; then the hostfile.
    _, output = section(parts, "output (")
    tasks = [TASK.match(l) for l in output if l.startswith("task ")]
    t.check(len(tasks) == 4 and all(tasks), f"the task lines: {output}")
    t.check([int(m.group(1)) for m in tasks] == [0, 1, 2, 3], f"ranks: {output}")
    placed = {a["node"]: a for a in s["allocation"]}
    for m in tasks:
        rank, node, index, cores = (int(m.group(1)), m.group(2), int(m.group(3)),
                                    t.parse_list(m.group(5)))
        part = placed.get(node, {"cores": [], "host_cpus": [], "numa": []})
        t.check(node == s["nodes"][rank // 2] and index == rank // 2,
                f"task {rank} on {node} (node {index}), the job's nodes {s['nodes']}")
        t.check(len(cores) == 2 and cores <= set(part["cores"]),
                f"task {rank}: cores {sorted(cores)}, {node} gave {part['cores']}")
        # Bound to its cores' host CPUs, its memory from its node part's NUMA
        # domains, folded onto the host's as the agent does.
        host_of = dict(zip(part["cores"], part["host_cpus"]))
        t.check(t.parse_list(m.group(6)) == {host_of[c] for c in cores},
                f"task {rank}: host CPUs {m.group(6)}, its cores' are "
                f"{sorted({host_of[c] for c in cores})}")
        t.check(t.parse_list(m.group(7)) == {n % HOST_NUMA for n in part["numa"]},
                f"task {rank}: memory nodes {m.group(7)}, its part's NUMA {part['numa']}")
    hostfile = output[output.index(next(l for l in output if l.startswith("hostfile "))) + 1:]
    t.check([l.split() for l in hostfile] == [[n, "slots=2"] for n in s["nodes"]],
            f"the hostfile: {hostfile}")
    # The batch script: step 1's 4 tasks on both nodes, then step 2's one task.
    _, steps = section(parts, "a batch script with two steps")
    step_lines = [l for l in steps if re.match(r"^(\d+: )?step \d+: ", l)]
    history = {l.split()[0]: l.split() for l in steps if re.match(r"^\d+(\.\d+)? ", l)}
    batch = next((int(k) for k, row in history.items() if row[2] == "steps.sh"), None)
    t.check(batch is not None, f"no steps.sh job in hpcq history --steps: {steps}")
    b = t.status(batch)
    t.check(b["state"] == "COMPLETED", f"the batch job {batch}: {b}")
    want = sorted([f"{r}: step 1: task {r} on {b['nodes'][r // 2]}" for r in range(4)] +
                  [f"step 2: one task on {b['nodes'][0]}"])
    t.check(step_lines == want, f"the steps' output {step_lines}, expected {want}")
    # The history with steps: both jobs and the batch job's two steps ended
    # COMPLETED with exit 0.
    for key in (str(job), str(batch), f"{batch}.1", f"{batch}.2"):
        t.check(key in history and "COMPLETED" in history[key] and
                history[key][history[key].index("COMPLETED") + 1] == "0",
                f"hpcq history --steps, {key}: {steps}")


t.main([test_readme_command_1_runs_the_demo_on_the_cluster])
