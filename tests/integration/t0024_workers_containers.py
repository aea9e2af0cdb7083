#!/usr/bin/env python3
"""Workers enforced on the agents, in both executors (papers/000).

With `[sched.granularity] policy = "granularity"`, a cpu job of 16 ranks
with --workers 8 is cut over the 4 nodes (Algorithm 1) into 8 workers of 2
ranks dealt round-robin (Algorithm 2), two per node in two groups. Every
task reads its own Cpus_allowed_list, Mems_allowed_list and cgroup: they
must equal its worker's allocation (on these emulated nodes logical core i
of rank r is host CPU (i + r) mod the host's CPUs, as status shows) and its
worker's own cgroup (a job holding NUMA domain 0 of every node meanwhile
puts the workers in domain 1, whose memory node on a host of two, as the
guest's, is not 0); the hostfile at HPCQ_HOSTFILE has one "node slots=2"
line per worker. The same job with --image runs each worker in an OCI container (runc) of a busybox
root file system, as the submitting user; run with `hpcq run`, the
containers' output (two per node, on one channel) reaches the caller. Two
concurrent jobs never share a core."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

CONFIG = "/tmp/hpcq-t0024.toml"
if not os.environ.get("HPCQ_TEST_INSIDE"):
    with open(CONFIG, "w") as f:
        f.write("""
[sched.granularity]
policy = "granularity"
""")
t.within_cluster(agents=4, fanout=2, topology="pack:2 numa:2 core:4 pu:1",
                 extra=("--config", CONFIG))

HOST_CPUS = os.cpu_count()
# The host's NUMA nodes, counted as the agents count them (agent.cc).
HOST_NUMA = max(1, len([n for n in os.listdir("/sys/devices/system/node")
                        if n.startswith("node") and n[4:5].isdigit()]))

# Each task writes what it sees to out.<rank> in the job's directory.
TASK = r"""
f=$PWD/out.$HPCQ_TASK_RANK
{
  echo "cpus $(grep Cpus_allowed_list /proc/self/status | cut -f2)"
  echo "mems $(grep Mems_allowed_list /proc/self/status | cut -f2)"
  echo "cgroup $(grep -E '(cpuset|^0::)' /proc/self/cgroup | head -1 | cut -d: -f3)"
  memcg=$(grep -E '(:memory:|^0::)' /proc/self/cgroup | head -1 | cut -d: -f3)
  echo "memcg $memcg"
  echo "memlimit $(cat /sys/fs/cgroup/memory$memcg/memory.limit_in_bytes 2>/dev/null ||
                   cat /sys/fs/cgroup$memcg/memory.max 2>/dev/null)"
  echo "uid $(id -u)"
  echo "debian $(test -e /etc/debian_version && echo yes || echo no)"
  echo "hostfile $(cat $HPCQ_HOSTFILE | tr '\n' ';')"
} > $f.tmp
mv $f.tmp $f
"""


def read_outputs(d, ntasks):
    out = {}
    for rank in range(ntasks):
        with open(os.path.join(d, f"out.{rank}")) as f:
            out[rank] = dict(line.rstrip("\n").split(" ", 1) for line in f if " " in line)
    return out


def run_split_job(d, extra=(), user=None):
    with open(os.path.join(d, "task.sh"), "w") as f:
        f.write(TASK)
    # NUMA domain 0 of every node taken first: the workers then lie in another
    # domain, whose memory node differs from 0 wherever the host has more than
    # one (the guest's two): a worker given memory node 0 regardless shows.
    gate = t.Gate(d)
    blocker = t.submit("-N", "4", "-n", "16", "--", *gate.command, cwd=d)
    try:
        held = t.wait_state(blocker, "RUNNING")
        t.check(all(a["numa"] == [0] for a in held["allocation"]),
                f"the blocker should hold NUMA domain 0 of each node: {held['allocation']}")
        job = t.submit("-n", "16", "--profile", "cpu", "--workers", "8", "--mem", "400M", *extra,
                       "--", "sh", "task.sh", cwd=d, user=user)
        s = t.wait_state(job, ("COMPLETED", "FAILED"), timeout=90, user=user)
    finally:
        gate.open()
    t.wait_state(blocker, "COMPLETED")
    t.check(s["state"] == "COMPLETED", f"job {job}: {s['state']} {s.get('reason')}")
    # On a host of one NUMA node every memory node is 0 and the mems check
    # cannot tell; on more, some worker's must not be node 0.
    t.check(HOST_NUMA == 1 or any({n % HOST_NUMA for n in w["numa"]} != {0} for w in s["workers"]),
            f"every worker's memory is the host's node 0: {s['workers']}")
    return s, read_outputs(d, 16)


def check_workers(s, out, executor):
    workers = s["workers"]
    # Algorithm 1 (granularity, user N_w = 8): 4 nodes, 8 workers, 4 groups.
    t.check(len(workers) == 8, f"{len(workers)} workers: {workers}")
    t.check(len({w["node"] for w in workers}) == 4, f"nodes {workers}")
    t.check(len({w["group"] for w in workers}) == 4, f"groups {workers}")
    # Algorithm 2: ranks dealt round-robin, 2 slots each.
    for w in workers:
        t.check(w["ranks"] == [w["id"], w["id"] + 8], f"worker {w}")
        t.check(w["executor"] == executor, f"worker {w}")
        # pack:2 numa:2 core:4: cores 4k..4k+3 are NUMA domain k.
        t.check(sorted(w["numa"]) == sorted({c // 4 for c in w["cores"]}),
                f"worker {w}: NUMA domains {w['numa']} are not its cores'")
    host_of = {}
    for a in s["allocation"]:
        host_of[a["node"]] = dict(zip(a["cores"], a["host_cpus"]))
    lines = None
    for w in workers:
        allowed = {host_of[w["node"]][c] for c in w["cores"]}
        for rank in w["ranks"]:
            o = out[rank]
            cpus = t.parse_list(o["cpus"])
            # Each task is bound to its own core's CPU, inside its worker's.
            t.check(len(cpus) == 1 and cpus <= allowed,
                    f"rank {rank}: CPUs {o['cpus']}, worker {w['id']} has {sorted(allowed)}")
            # Memory from its worker's NUMA domains only, folded onto the
            # host's as its CPUs are (launch_message.cc, mems_of).
            mems = {n % HOST_NUMA for n in w["numa"]}
            t.check(t.parse_list(o["mems"]) == mems,
                    f"rank {rank}: mems {o['mems']}, worker {w['id']} has NUMA {w['numa']}: "
                    f"host nodes {sorted(mems)}")
            t.check(o["cgroup"].endswith(f"/job-{s['id']}/worker-{w['id']}"),
                    f"rank {rank}: cgroup {o['cgroup']}, worker {w['id']}")
            lines = lines or o["hostfile"]
            t.check(o["hostfile"] == lines, f"rank {rank}: hostfile {o['hostfile']}")
    entries = [e for e in lines.split(";") if e]
    t.check(len(entries) == 8 and all(e.endswith(" slots=2") for e in entries),
            f"hostfile {lines}")
    by_id = sorted(workers, key=lambda w: w["id"])
    t.check([e.split()[0] for e in entries] == [w["node"] for w in by_id],
            f"hostfile {entries} vs workers {by_id}")


def test_process_workers_get_their_own_cgroups():
    d = t.workdir()
    s, out = run_split_job(d)
    check_workers(s, out, "process")
    # Each worker's memory limit is its node part's, in proportion to its cores.
    part = {a["node"]: a for a in s["allocation"]}
    for w in s["workers"]:
        a = part[w["node"]]
        want = a["memory_bytes"] * len(w["cores"]) // len(a["cores"])
        for rank in w["ranks"]:
            got = int(out[rank]["memlimit"] or -1)  # as the task read it while it ran
            t.check(out[rank]["memcg"].endswith(f"/worker-{w['id']}") and abs(got - want) < 4096,
                    f"rank {rank}: memory cgroup {out[rank]['memcg']} limit {got}, want {want} "
                    f"({len(w['cores'])} of the part's {len(a['cores'])} cores)")
    t.check(all(o["uid"] == "0" and o["debian"] == "yes" for o in out.values()), f"{out[0]}")


def test_image_job_runs_each_worker_in_a_container():
    uid = t.ensure_user()
    root = t.busybox_rootfs()
    d = t.workdir()
    s, out = run_split_job(d, extra=("--image", root), user="hpcqtest")
    check_workers(s, out, "oci")
    t.check(s["image"] == root, f"image {s['image']}")
    for rank, o in out.items():
        t.check(o["uid"] == str(uid), f"rank {rank} ran as uid {o['uid']}, not {uid}")
        t.check(o["debian"] == "no", f"rank {rank} saw the host's root, not the image")
    # The outputs the tasks wrote are the user's.
    t.check(os.stat(os.path.join(d, "out.0")).st_uid == uid, "out.0 is not the user's")


def test_run_in_an_image_forwards_every_containers_output():
    # 8 containers, two per node: each shell inside writes its tasks' output
    # frames to the node's one channel; each task's lines arrive whole.
    root = t.busybox_rootfs()
    r = t.run([t.HPCQ, "run", "-n", "16", "--profile", "cpu", "--workers", "8", "-l",
               "--image", root, "--", "sh", "-c",
               'for i in 1 2 3; do echo "rank $HPCQ_TASK_RANK line $i of $HPCQ_NODENAME"; done; '
               'read line; echo "input $line"'],
              input="hello\n", cwd=t.workdir())
    t.check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    lines = r.stdout.splitlines()
    for rank in range(16):
        mine = [line for line in lines if line.startswith(f"{rank}: rank {rank} line ")]
        t.check([m.split()[4] for m in mine] == ["1", "2", "3"], f"rank {rank}'s lines: {mine}")
    t.check(lines.count("0: input hello") == 1 and sum("input" in x for x in lines) == 16,
            f"input: {[x for x in lines if 'input' in x]}")
    nodes = {line.split()[-1] for line in lines if " line " in line}
    t.check(nodes == {"node1", "node2", "node3", "node4"}, f"nodes {nodes}")


def test_bad_image_fails_the_job_with_a_reason():
    d = t.workdir()
    job = t.submit("--image", "/nonexistent/image", "--", "true", cwd=d)
    s = t.wait_state(job, ("FAILED", "COMPLETED"))
    t.check(s["state"] == "FAILED" and "/nonexistent/image" in s["reason"],
            f"{s['state']}: {s['reason']}")
    p = t.hpcq("submit", "--image", "", "--", "true", rc=2)
    t.check("--image" in p.stderr, p.stderr)


def test_concurrent_jobs_never_share_a_core():
    d = t.workdir()
    jobs = [t.submit("-n", "24", "--", "sleep", "3", cwd=d) for _ in range(2)]
    states = [t.wait_state(j, "RUNNING") for j in jobs]
    used = {}
    for s in states:
        for a in s["allocation"]:
            for c in a["cores"]:
                key = (a["node"], c)
                t.check(key not in used, f"core {key} given to jobs {used.get(key)} and {s['id']}")
                used[key] = s["id"]
    for j in jobs:
        t.hpcq("cancel", str(j))


t.main([test_process_workers_get_their_own_cgroups,
        test_image_job_runs_each_worker_in_a_container,
        test_run_in_an_image_forwards_every_containers_output,
        test_bad_image_fails_the_job_with_a_reason,
        test_concurrent_jobs_never_share_a_core])
