#!/usr/bin/env python3
"""MPICH's mpiexec through hpcq-rsh where the machine's own host name does
not resolve, as in a fresh minimal root (issue 45 item 17): hydra tells its
proxies to connect back to `--control-port HOST:PORT`, HOST being that
name, and mpiexec does not watch its launcher's exit: the proxies failed at
once and the job hung until its time limit. hpcq-rsh now gives them a
numeric address of the node instead, and the world forms; a HOST that
resolves is passed on as it was. The whole cluster runs in a mount and UTS
namespace of this test's own, whose host name its /etc/hosts does not know
(nor DNS, which nsswitch.conf there does not ask): the machine's own name
and files are untouched. 2 emulated nodes of 2 cores."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

NAME = "hpcq-t0061-nowhere"  # the host name in the namespace
INSIDE = "HPCQ_T0061_HOST_NAME"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "mpi",
                      "mpi_ring.c")


def skip_all(why):
    print(f"skip: {why}", flush=True)
    sys.exit(77)


def files_that_do_not_know(name):
    """An /etc/hosts without `name` and an nsswitch.conf that looks host
    names up in files only (no DNS to wait for): the machine's own, else."""
    d = tempfile.mkdtemp(prefix="hpcq-t0061-")
    hosts = os.path.join(d, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 localhost\n::1 localhost\n")
    try:
        with open("/etc/nsswitch.conf") as f:
            lines = [l for l in f.read().splitlines() if not l.startswith("hosts:")]
    except FileNotFoundError:
        lines = []
    nsswitch = os.path.join(d, "nsswitch.conf")
    with open(nsswitch, "w") as f:
        f.write("\n".join(lines + ["hosts: files"]) + "\n")
    return hosts, nsswitch


def run_where_the_host_name_does_not_resolve():
    """Runs this script again (and with it the cluster, hpcq start) in a
    mount and UTS namespace whose host name is NAME, which does not resolve
    there; returns at once when already in it."""
    if os.environ.get(INSIDE) == NAME:
        return
    for program in ("mpicc.mpich", "mpiexec.mpich"):
        if shutil.which(program) is None:
            skip_all(f"needs {program} (Debian's mpich and libmpich-dev)")
    if shutil.which("unshare") is None:
        skip_all("needs unshare (util-linux)")
    hosts, nsswitch = files_that_do_not_know(NAME)
    enter = (f"hostname {NAME} && mount --bind {hosts} /etc/hosts && "
             f"mount --bind {nsswitch} /etc/nsswitch.conf && ")
    unshare = ["unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c"]
    probe = subprocess.run([*unshare, enter + f"! getent hosts {NAME} >/dev/null"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        skip_all("cannot make a mount and UTS namespace whose host name does not resolve: "
                 f"{probe.stderr.strip() or f'exit {probe.returncode}'}")
    env = dict(os.environ, **{INSIDE: NAME})
    os.execvpe("unshare", [*unshare, enter + 'exec "$@"', "sh", sys.executable, *sys.argv], env)


run_where_the_host_name_does_not_resolve()
t.within_cluster(agents=2, fanout=2, topology="pack:1 numa:1 core:2 pu:1")


def batch(d, script, limit="2:00"):
    """Runs `script` as a 2-node, 4-task batch job; returns its status and output."""
    path = os.path.join(d, "job.sh")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\n#HPCQ -N 2 -n 4 -t {limit}\n" + script)
    os.chmod(path, 0o755)
    job = int(t.hpcq("batch", "-o", "out-%j", path, cwd=d).stdout.strip())
    s = t.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=150)
    with open(os.path.join(d, f"out-{job}")) as f:
        return s, f.read()


def test_hpcq_rsh_replaces_only_a_control_host_that_does_not_resolve():
    d = t.workdir()
    s, out = batch(d, "hostname\n"
                      f"hpcq-rsh node2 echo proxy --control-port {NAME}:4711 --retries 10\n"
                      "hpcq-rsh node2 echo proxy --control-port localhost:4712\n")
    t.check(s["state"] == "COMPLETED", f"job {s}\n{out}")
    t.check(out.startswith(NAME + "\n"), f"the job's host name is not {NAME}:\n{out}")
    m = re.search(r"^proxy --control-port (\S+):4711 --retries 10$", out, re.M)
    t.check(m and re.fullmatch(r"\d+\.\d+\.\d+\.\d+", m.group(1)),
            f"{NAME} not replaced by an address:\n{out}")
    t.check("proxy --control-port localhost:4712\n" in out, f"localhost changed:\n{out}")


def test_mpiexec_starts_its_proxies_through_hpcq_rsh():
    d = t.workdir()
    app = os.path.join(d, "mpi_ring")
    subprocess.run(["mpicc.mpich", "-O2", "-o", app, SOURCE], check=True)
    # timeout: before the fix mpiexec waited for its proxies until killed.
    s, out = batch(d, "timeout 60 mpiexec.mpich -launcher ssh -launcher-exec hpcq-rsh "
                      f"-f \"$HPCQ_HOSTFILE_MPICH\" -n 4 {app}\n")
    t.check(s["state"] == "COMPLETED", f"job {s}\n{out}")
    t.check("world 4 sum 6 expected 6 ring ok" in out, f"output:\n{out}")
    proxies = [x for x in s["steps"] if "hydra_pmi_proxy" in " ".join(x["command"])]
    t.check(sorted(x["nodes"][0] for x in proxies) == ["node1", "node2"], f"steps {s['steps']}")
    t.check(not any(NAME in " ".join(x["command"]) for x in proxies), f"steps {s['steps']}")


if __name__ == "__main__":
    t.main([
        test_hpcq_rsh_replaces_only_a_control_host_that_does_not_resolve,
        test_mpiexec_starts_its_proxies_through_hpcq_rsh,
    ])
