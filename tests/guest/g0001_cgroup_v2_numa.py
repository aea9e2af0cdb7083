#!/usr/bin/env python3
"""cgroup v2 and real NUMA on one node that uses the host's own topology
(issue 26). Meant for the guest of run_guest.py: two CPUs in two NUMA nodes
and the unified hierarchy alone; elsewhere it skips, saying why.

- hwloc finds the two NUMA nodes;
- two one-task jobs at once (one with --mem, one with --mem-per-cpu) each
  get one NUMA domain: their tasks read back Cpus_allowed_list and
  Mems_allowed_list equal to their allocation, and their memory lands on
  that node (/proc/self/numa_maps) within the limit asked for;
- the job's cgroup (from /proc/PID/cgroup) has the cpuset, memory.max and
  pids.max the agent set, below the agent's hpcq/<instance>;
- a batch job's shell sits in a leaf of its own (no process beside child
  cgroups), its steps in step-<n>;
- a job over its --mem is killed by the kernel's OOM killer and the end says
  so (memory.events);
- nothing of the jobs is left in /sys/fs/cgroup once they end.
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "integration"))
import hpcqtest as t  # noqa: E402

CGROUP2 = "/sys/fs/cgroup"


def why_not_here():
    try:
        if os.statvfs(CGROUP2) and open("/proc/mounts").read().find(f" {CGROUP2} cgroup2 ") < 0:
            return f"{CGROUP2} is not cgroup2 (this test is for the guest of tests/guest/run_guest.py)"
    except OSError as e:
        return f"{CGROUP2}: {e}"
    nodes = glob.glob("/sys/devices/system/node/node[0-9]*")
    if len(nodes) < 2:
        return f"{len(nodes)} NUMA node(s) here; this test needs two (the guest has them)"
    return None


if not os.environ.get("HPCQ_SOCKET"):
    why = why_not_here()
    if why:
        print(f"SKIP: {why}")
        print("0 passed, 0 failed, 1 skipped")
        sys.exit(77)

t.within_cluster(agents=1, fanout=2, topology="host")

# Each task reports where it runs and what its memory is made of, then waits
# for the test to let it go (the gate file).
# The second job asks for its memory per CPU (one CPU: the same 96M).
TASK = r"""#!/bin/bash
#HPCQ -n 1
#HPCQ --numa-policy single-numa-node
#HPCQ MEMORY_OPTION
#HPCQ -o out-%j.txt
cpus=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
mems=$(awk '/^Mems_allowed_list/ {print $2}' /proc/self/status)
cg=$(cut -d: -f3- /proc/self/cgroup)
echo "cpus=$cpus mems=$mems cgroup=$cg"
python3 - <<'EOF'
import re
block = bytearray(48 << 20)
for i in range(0, len(block), 4096):
    block[i] = 1
pages = {}
for line in open("/proc/self/numa_maps"):
    if " anon=" not in line or " file=" in line:  # this process's own memory
        continue
    for node, n in re.findall(r" N(\d+)=(\d+)", line):
        pages[int(node)] = pages.get(int(node), 0) + int(n)
print("pages=" + ",".join(f"{k}:{v}" for k, v in sorted(pages.items())), flush=True)
EOF
while [ ! -e GATE ]; do sleep 0.2; done
"""

OOM = """#!/bin/bash
#HPCQ -n 1
#HPCQ --mem 48M
python3 -c 'b = bytearray(400 << 20)
for i in range(0, len(b), 4096): b[i] = 1'
"""

BATCH = """#!/bin/bash
#HPCQ -n 1
#HPCQ -o out-%j.txt
echo "shell=$(cut -d: -f3- /proc/self/cgroup)"
hpcq run -n 1 sh -c 'echo "step=$(cut -d: -f3- /proc/self/cgroup)"'
"""


def read(path):
    with open(path) as f:
        return f.read().strip()


def instance_dir():
    return os.path.join(CGROUP2, "hpcq",
                        t.cgroup_instance(os.path.join(t.cluster_dir(), "agents")) + "-rank_1")


def our_jobs_left():
    return sorted(glob.glob(os.path.join(CGROUP2, "hpcq", "*", "job-*")))


def fields_of(path, prefix):
    for line in open(path).read().splitlines():
        if line.startswith(prefix):
            return dict(kv.split("=", 1) for kv in line.split(" "))
    return None


def test_hwloc_sees_two_numa_nodes():
    nodes = json.loads(t.hpcq("nodes", "--json").stdout)
    t.check(len(nodes) == 1, f"nodes {nodes}")
    n = nodes[0]
    t.check(n["cores"] == 2 and n["numa"] == 2, f"node1: {n['cores']} cores, {n['numa']} NUMA")


def test_each_job_gets_one_numa_domain():
    d = t.workdir()
    jobs = []
    for option in ("--mem 96M", "--mem-per-cpu 96M"):
        with open(os.path.join(d, "job.sh"), "w") as f:
            f.write(TASK.replace("MEMORY_OPTION", option))
        jobs.append(t.submit("job.sh", cwd=d))
    try:
        for j in jobs:
            t.wait_state(j, {"RUNNING"})
        outs = {j: os.path.join(d, f"out-{j}.txt") for j in jobs}
        t.wait_until("both tasks' reports",
                     lambda: all(os.path.exists(p) and "pages=" in open(p).read() for p in outs.values()),
                     timeout=90)
        seen_cpus = set()
        for j in jobs:
            s = t.status(j)
            alloc = s["allocation"][0]
            where = fields_of(outs[j], "cpus=")
            pages = fields_of(outs[j], "pages=")
            cpus, mems = t.parse_list(where["cpus"]), t.parse_list(where["mems"])
            t.check(cpus == set(alloc["host_cpus"]),
                    f"job {j}: Cpus_allowed_list {where['cpus']} != allocation {alloc['host_cpus']}")
            t.check(len(alloc["numa"]) == 1 and mems == set(alloc["numa"]),
                    f"job {j}: Mems_allowed_list {where['mems']} != allocation's NUMA {alloc['numa']}")
            node_cpus = t.parse_list(read(f"/sys/devices/system/node/node{alloc['numa'][0]}/cpulist"))
            t.check(cpus <= node_cpus, f"job {j}: cpus {cpus} not on NUMA node {alloc['numa']}")
            counts = {int(k): int(v) for k, v in (p.split(":") for p in pages["pages"].split(","))}
            t.check(set(counts) == mems and counts[min(mems)] >= (40 << 20) // 4096,
                    f"job {j}: anonymous pages by node {counts}, mems {mems}")
            seen_cpus |= cpus
            # The job's cgroup, as the kernel names it, under the agent's own.
            cg = os.path.join(CGROUP2, where["cgroup"].lstrip("/"))
            t.check(os.path.dirname(cg) == instance_dir() and os.path.basename(cg) == f"job-{j}",
                    f"job {j}: task in {cg}, not {instance_dir()}/job-{j}")
            t.check(t.parse_list(read(cg + "/cpuset.cpus.effective")) == cpus, f"{cg}: cpuset.cpus")
            t.check(t.parse_list(read(cg + "/cpuset.mems.effective")) == mems, f"{cg}: cpuset.mems")
            t.check(read(cg + "/memory.max") == str(96 << 20), f"{cg}: memory.max {read(cg + '/memory.max')}")
            t.check(read(cg + "/pids.max") != "max", f"{cg}: pids.max is not set")
        t.check(seen_cpus == {0, 1}, f"the two jobs' cpus {seen_cpus}: not one NUMA node each")
    finally:
        t.Gate(d, "GATE").open()  # a failed check must not leave the node full
    for j in jobs:
        t.wait_state(j, {"COMPLETED"})
    t.wait_until("the jobs' cgroups removed", lambda: not our_jobs_left())


def test_batch_shell_in_a_leaf_and_steps_beside_it():
    d = t.workdir()
    with open(os.path.join(d, "batch.sh"), "w") as f:
        f.write(BATCH)
    j = int(t.hpcq("batch", "batch.sh", cwd=d).stdout)
    t.hpcq("wait", str(j), rc=None)
    s = t.status(j)
    out = os.path.join(d, f"out-{j}.txt")
    text = open(out).read() if os.path.exists(out) else ""
    t.check(s["state"] == "COMPLETED", f"job {j}: {s['state']} {s.get('reason')}; output: {text}")
    shell = fields_of(os.path.join(d, f"out-{j}.txt"), "shell=")
    step = fields_of(os.path.join(d, f"out-{j}.txt"), "step=")
    t.check(shell and step, f"output: {text}")
    job = f"{instance_dir()[len(CGROUP2):]}/job-{j}"
    t.check(shell["shell"] == job + "/shell", f"batch script in {shell['shell']}, not {job}/shell")
    t.check(step["step"].startswith(job + "/step-"), f"step in {step['step']}, not {job}/step-N")
    t.wait_until("the job's cgroups removed", lambda: not our_jobs_left())


def test_memory_limit_kill_is_reported_as_oom():
    d = t.workdir()
    with open(os.path.join(d, "oom.sh"), "w") as f:
        f.write(OOM)
    j = t.submit("oom.sh", cwd=d)
    t.hpcq("wait", str(j), rc=None)
    s = t.status(j)
    t.check(s["state"] == "FAILED", f"job {j}: {s['state']}")
    t.check("out of memory" in s.get("reason", ""), f"job {j}: reason {s.get('reason')!r}")
    t.wait_until("the job's cgroups removed", lambda: not our_jobs_left())


t.main([test_hwloc_sees_two_numa_nodes, test_each_job_gets_one_numa_domain,
        test_batch_shell_in_a_leaf_and_steps_beside_it, test_memory_limit_kill_is_reported_as_oom])
