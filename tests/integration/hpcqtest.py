"""Helpers for hpcq's integration tests: real hpcqd + real agents on loopback.

Each test script calls `within_cluster(agents=4, fanout=2)` first: outside a
cluster it re-executes itself under `hpcq start --agents N -- python3 SCRIPT`,
so the test body runs with HPCQ_SOCKET pointing at a private leader and the
cluster is torn down afterwards whatever happens. Binaries come from the
build tree named by HPCQ_BUILD_ROOT (set by meson), else from PATH.
"""
import atexit
import glob
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib

BUILD = os.environ.get("HPCQ_BUILD_ROOT", "")


def binary(name, subdir):
    if BUILD:
        path = os.path.join(BUILD, subdir, name)
        if os.access(path, os.X_OK):
            return path
    return name


HPCQ = binary("hpcq", "cli")
HPCQ_RSH = os.path.join(os.path.dirname(HPCQ), "hpcq-rsh")  # a link to hpcq
HPCQD = binary("hpcqd", "daemon")
AGENT = binary("hpcq-agent", "agent")
SUBMIT_LOAD = binary("hpcq-submit-load", "bench")
# Jobs that call hpcq (a batch script's steps) get the one under test: the
# job's environment is the submitter's.
if os.path.dirname(HPCQ):
    os.environ["PATH"] = os.path.dirname(HPCQ) + os.pathsep + os.environ.get("PATH", "")


def metrics_config(path, sections=""):
    """Writes `path`, a `hpcq start --config` file serving hpcqd's metrics on
    a free loopback port, plus `sections`; once, before the cluster starts
    (inside it, the file is already there)."""
    if os.environ.get("HPCQ_TEST_INSIDE"):
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with open(path, "w") as f:
        f.write(f'[metrics]\nlisten = "127.0.0.1:{port}"\n{sections}')


def metrics_url(path):
    """Where the cluster started with metrics_config(path) serves /metrics."""
    with open(path) as f:
        return "http://" + re.search(r'listen = "([^"]+)"', f.read()).group(1) + "/metrics"


def within_cluster(agents=4, fanout=2, topology="pack:2 numa:2 core:4 pu:1", extra=()):
    if os.environ.get("HPCQ_SOCKET") and os.environ.get("HPCQ_TEST_INSIDE") == sys.argv[0]:
        return
    env = dict(os.environ, HPCQ_TEST_INSIDE=sys.argv[0])
    # What the environment adds (tests/guest/inside.sh: a slower node-down).
    # It wins over the test's own value of the same option: hpcq start takes
    # each once, and the environment's are what that machine needs.
    site = shlex.split(os.environ.get("HPCQ_TEST_START_ARGS", ""))
    extra = list(extra)
    for option in (a for a in site if a.startswith("--")):
        if option in extra:
            at = extra.index(option)
            del extra[at:at + 2]
    cmd = [HPCQ, "start", "--agents", str(agents), "--fanout", str(fanout),
           "--topology", topology, *site, *extra, "--", sys.executable, sys.argv[0],
           *sys.argv[1:]]
    os.execvpe(cmd[0], cmd, env)


def cluster_dir():
    """The directory `hpcq start` made: it holds hpcq.toml, keys/ and logs/."""
    return os.path.dirname(os.environ["HPCQ_SOCKET"].split(":")[0])


def agent_pid(rank):
    """The pid of this cluster's agent of `rank`."""
    out = subprocess.run(["pgrep", "-o", "-f",
                          f"hpcq-agent --config {cluster_dir()}/hpcq.toml --rank {rank} "],
                         capture_output=True, text=True).stdout.split()
    check(len(out) == 1, f"agent {rank} pids: {out}")
    return int(out[0])


def agent_argv(rank):
    """The command line of this cluster's agent of `rank`, for start_agent()."""
    with open(f"/proc/{agent_pid(rank)}/cmdline") as f:
        return f.read().split("\0")[:-1]


def start_agent(argv):
    """Starts an agent with `argv` (logging where hpcq start's did), not as
    hpcq start's child: drained (its jobs end) when the test ends."""
    rank = argv[argv.index("--rank") + 1]
    log = open(os.path.join(cluster_dir(), "logs", f"agent-{rank}.log"), "a")
    agent = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
    atexit.register(lambda: (agent.send_signal(signal.SIGUSR1), agent.wait()))
    return agent


def restart_agent(rank, signo):
    """Stops the agent of `rank` with `signo` (SIGKILL, or SIGTERM: both
    leave its jobs running), waits until it is gone and starts it again on
    the same state directory; returns the new one (Popen)."""
    argv = agent_argv(rank)
    os.kill(agent_pid(rank), signo)
    wait_until(f"agent {rank} gone", lambda: subprocess.run(
        ["pgrep", "-f", f"hpcq-agent --config {cluster_dir()}/hpcq.toml --rank {rank} "],
        capture_output=True).returncode != 0)
    return start_agent(argv)


def json_of(*args):
    """`hpcq ARGS --json`, parsed."""
    return json.loads(hpcq(*args, "--json").stdout)


def jobs_dir(rank):
    """Where the agent of `rank` keeps its job directories ([agent] run_dir,
    a tmpfs under hpcq start, or else its state_dir)."""
    with open(os.path.join(cluster_dir(), "hpcq.toml"), "rb") as f:
        agent = tomllib.load(f).get("agent", {})
    root = agent.get("run_dir") or agent["state_dir"]
    return os.path.join(root, f"rank-{rank}", "jobs")


def journaled_ends(rank):
    """The job ids whose ends the agent of `rank` has journaled and not had
    acknowledged: its <state_dir>/rank-N/ends/journal read as the agent reads
    it (agent/run_journal.h: records of u32 length, u32 checksum, then kind,
    u64 seq and, for an end, the JobUpdate, whose field 1 is the job id)."""
    with open(os.path.join(cluster_dir(), "hpcq.toml"), "rb") as f:
        state_dir = tomllib.load(f)["agent"]["state_dir"]
    try:
        with open(os.path.join(state_dir, f"rank-{rank}", "ends", "journal"), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    live, pos = {}, 0
    while pos + 8 <= len(data):
        length = int.from_bytes(data[pos:pos + 4], "little")
        body = data[pos + 8:pos + 8 + length]
        if length < 9 or len(body) < length:
            break
        seq = int.from_bytes(body[1:9], "little")
        if body[:1] == b"E" and body[9:10] == b"\x08":  # field 1, a varint
            job, shift = 0, 0
            for byte in body[10:]:
                job |= (byte & 0x7F) << shift
                shift += 7
                if byte < 0x80:
                    break
            live = {s: j for s, j in live.items() if j != job}
            live[seq] = job
        elif body[:1] == b"F":
            live.pop(seq, None)
        pos += 8 + length
    return [live[s] for s in sorted(live)]


def cgroup_instance(state_dir):
    """The cgroup directory name an agent with this state directory uses
    under hpcq/ (agent.cc, cgroup_instance_name)."""
    name = ""
    for c in os.path.abspath(state_dir):
        if c == "/":
            if name and not name.endswith("-"):
                name += "-"
        else:
            name += c if c.isalnum() or c in "_." else "_"
    return name.rstrip("-")


def job_cgroups(job_id, cluster=None):
    """The cgroups of job `job_id` of this cluster (or of the cluster in
    directory `cluster`) on this host, whichever its agent: every v1
    controller's, or the v2 one. Another cluster's job of the same id (one a
    failed test left) is not counted."""
    prefix = cgroup_instance(os.path.join(cluster or cluster_dir(), "agents")) + "-"
    return [d for d in glob.glob(f"/sys/fs/cgroup/*/hpcq/*/job-{job_id}") +
            glob.glob(f"/sys/fs/cgroup/hpcq/*/job-{job_id}")
            if os.path.basename(os.path.dirname(d)).startswith(prefix)]


def parse_list(text):
    """The set of numbers a kernel list names ("0-3,8" as in Cpus_allowed_list)."""
    out = set()
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1))
        elif part:
            out.add(int(part))
    return out


def job_pids(job_id):
    """The host PIDs in the job's cgroups."""
    pids = set()
    for d in job_cgroups(job_id):
        try:
            with open(os.path.join(d, "cgroup.procs")) as f:
                pids.update(int(p) for p in f.read().split())
        except FileNotFoundError:
            pass  # removed meanwhile
    return pids


class Failure(Exception):
    pass


class Skip(Exception):
    """Raised by a test that cannot run here; its message says why."""


def check(condition, message):
    if not condition:
        raise Failure(message)


def run(args, user=None, check_rc=None, cwd=None, input=None, env=None):
    """Runs a command; returns CompletedProcess with text stdout/stderr."""
    if user is not None:
        args = ["setpriv", "--reuid", user, "--regid", user, "--init-groups", "--", *args]
    p = subprocess.run(args, capture_output=True, text=True, cwd=cwd, input=input,
                       env=env, timeout=120)
    if check_rc is not None and p.returncode != check_rc:
        raise Failure(f"{' '.join(args)}: exit {p.returncode}, expected {check_rc}\n"
                      f"stdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def hpcq(*args, user=None, rc=0, cwd=None):
    return run([HPCQ, *args], user=user, check_rc=rc, cwd=cwd)


def submit(*args, user=None, cwd=None):
    p = hpcq("submit", *args, user=user, cwd=cwd)
    return int(p.stdout.strip())


def status(job_id, user=None):
    return json.loads(hpcq("status", str(job_id), "--json", user=user).stdout)


def wait_state(job_id, states, timeout=60, user=None):
    states = {states} if isinstance(states, str) else set(states)
    deadline = time.monotonic() + timeout
    while True:
        s = status(job_id, user=user)
        if s["state"] in states:
            return s
        if time.monotonic() > deadline:
            raise Failure(f"job {job_id} is {s['state']} after {timeout}s, expected {states}")
        time.sleep(0.05)


def workdir():
    """A fresh directory every user may write to (jobs of a second user run there too)."""
    d = tempfile.mkdtemp(prefix="hpcq-test-")
    os.chmod(d, 0o1777)
    return d


_mpi_programs = {}


def build_mpi_program(source, mpi):
    """`source` built with mpicc.`mpi` (once per test file), in a directory
    every job can read: (that directory, the program). Skips, naming the
    packages, where that MPI is not installed."""
    key = (source, mpi)
    if key not in _mpi_programs:
        compiler = f"mpicc.{mpi}"
        if shutil.which(compiler) is None:
            raise Skip(f"needs {compiler} (Debian's "
                       f"{'mpich and libmpich-dev' if mpi == 'mpich' else 'openmpi-bin and libopenmpi-dev'})")
        d = workdir()
        path = os.path.join(d, os.path.splitext(os.path.basename(source))[0] + "_" + mpi)
        subprocess.run([compiler, "-O2", "-o", path, source], check=True)
        _mpi_programs[key] = (d, path)
    return _mpi_programs[key]

def build_pmi2_client():
    """tests/integration/pmi2_client.c built against Slurm's libpmi2 (Debian's
    libpmi2-0-dev), once per test file, in a directory every job can read:
    (that directory, the program). Skips where the library is missing."""
    key = ("pmi2_client.c", "libpmi2")
    if key not in _mpi_programs:
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            raise Skip("needs a C compiler (cc)")
        source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pmi2_client.c")
        d = workdir()
        path = os.path.join(d, "pmi2_client")
        p = subprocess.run([compiler, "-O2", "-o", path, source, "-lpmi2"],
                           capture_output=True, text=True)
        if p.returncode != 0 and ("slurm/pmi2.h" in p.stderr or "lpmi2" in p.stderr):
            raise Skip("needs Debian's libpmi2-0-dev (Slurm's PMI-2 client library): "
                       + p.stderr.strip().splitlines()[0])
        check(p.returncode == 0, f"cc pmi2_client.c: {p.stderr}")
        _mpi_programs[key] = (d, path)
    return _mpi_programs[key]


def ensure_user(name="hpcqtest"):
    if subprocess.run(["id", "-u", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)
    return int(subprocess.run(["id", "-u", name], capture_output=True, text=True).stdout)


# A job that counts once per 100 ms into its output: checkpoint tests look
# for a count that goes on without a gap or a restart from zero.
COUNTER = "i=0; while :; do i=$((i+1)); echo $i; sleep 0.1; done"


def kill_leader():
    """kill -9 of this cluster's hpcqd; returns its command line for
    restart_leader()."""
    pids = subprocess.run(["pgrep", "-f", f"hpcqd --config {cluster_dir()}/hpcq.toml"],
                          capture_output=True, text=True).stdout.split()
    check(len(pids) == 1, f"hpcqd pids {pids}")
    with open(f"/proc/{pids[0]}/cmdline") as f:
        cmdline = f.read().split("\0")[:-1]
    os.kill(int(pids[0]), signal.SIGKILL)
    return cmdline


def restart_leader(cmdline):
    """Starts hpcqd again (logging where it did) and waits until it answers."""
    log = open(os.path.join(cluster_dir(), "logs", "hpcqd.log"), "a")
    leader = subprocess.Popen(cmdline, stdout=log, stderr=log)
    # Not hpcq start's child: it would outlive the cluster.
    atexit.register(lambda: (leader.terminate(), leader.wait()))
    wait_until("hpcqd answering after its restart", lambda: run([HPCQ, "queue"]).returncode == 0,
               timeout=20)
    return leader


class Gate:
    """A job command that runs until the test opens the gate (a file in `d`
    appears): a job that holds its nodes exactly as long as the test needs
    to see what it caused, however long a loaded machine takes to get
    there (a `sleep 1` can end before a dump it waits for does)."""

    def __init__(self, d, name="gate"):
        self.path = os.path.join(d, name)
        self.command = ("sh", "-c", f"while [ ! -e {self.path} ]; do sleep 0.05; done")

    def open(self):
        with open(self.path, "w"):
            pass


def counts(path):
    """The integers of a counter job's output (none yet: [])."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [int(l) for l in f.read().split()]


def counts_by_task(path):
    """The counts of a job whose tasks each write "RANK N" lines to one
    file: {rank: [N, ...]} (none yet: {})."""
    tasks = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f.read().splitlines():
                rank, n = line.split()
                tasks.setdefault(int(rank), []).append(int(n))
    return tasks


def stop_processes(processes, timeout=30):
    """SIGTERM to each of `processes` (Popen) still running, then waits for
    each, killing one that outlasts `timeout`."""
    for p in processes:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in processes:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()


def wait_until(what, condition, timeout=30):
    """Polls `condition` until it returns something true, which it returns."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise Failure(f"{what} after {timeout}s")
        time.sleep(0.1)


def decision_log(name):
    """A path for hpcqd's decision log ([scheduler] decision_log = PATH in the
    test's config), emptied once before the cluster starts (hpcqd appends)."""
    path = f"/tmp/hpcq-{name}-decisions.jsonl"
    if not os.environ.get("HPCQ_TEST_INSIDE") and os.path.exists(path):
        os.remove(path)
    return path


def wait_cycle_showing(log, job, timeout=30):
    """Waits until a scheduling cycle was shown pending job `job` (its line in
    the decision log `log`). hpcqd writes a cycle's lines out once its
    decisions are applied, so a test that something did not happen to `job`
    (it was not started, it preempted nothing) checks after this, not after
    a sleep."""
    def shown():
        if not os.path.exists(log):
            return False
        with open(log) as f:
            for line in f:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # the line being written
                if event.get("type") == "cycle" and job in event.get("queue", []):
                    return True
        return False
    wait_until(f"a scheduling cycle shown job {job}", shown, timeout)


def leader_log():
    with open(os.path.join(cluster_dir(), "logs", "hpcqd.log"), errors="replace") as f:
        return f.read()


def wait_count(path, n, timeout=30):
    """Waits until the counter in `path` reaches `n`; returns its last value."""
    wait_until(f"{path}: count {n}", lambda: (counts(path) or [0])[-1] >= n, timeout)
    return counts(path)[-1]


def check_numbered_then(lines, last):
    """`lines` (as read, newlines kept) are "line 1", "line 2", ... each once
    and in order, then `last`; returns how many were numbered."""
    text = [line.rstrip("\n") for line in lines]
    check(text[-1:] == [last], f"the last lines: {text[-3:]}")
    numbered = text[:-1]
    check(numbered == [f"line {i}" for i in range(1, len(numbered) + 1)],
          f"{len(numbered)} lines, not each once in order: "
          f"{[x for i, x in enumerate(numbered) if x != f'line {i + 1}'][:5]}")
    return len(numbered)


def stop_leader():
    """SIGSTOPs this cluster's hpcqd: what reaches it meanwhile dies with it
    at the kill_leader() that follows."""
    leader = subprocess.run(["pgrep", "-f", f"hpcqd --config {cluster_dir()}/hpcq.toml"],
                            capture_output=True, text=True).stdout.split()
    check(len(leader) == 1, f"hpcqd pids {leader}")
    os.kill(int(leader[0]), signal.SIGSTOP)


def check_contiguous(path):
    c = counts(path)
    check(c == list(range(1, len(c) + 1)), f"{path}: count not contiguous: {c[:5]}...{c[-5:]}")


def busybox_rootfs(applets=("sh", "cat", "grep", "cut", "id", "test", "tr", "mv", "head",
                            "echo", "sleep")):
    """A root file system of Debian's busybox-static, for --image jobs."""
    busybox = shutil.which("busybox") or "/bin/busybox"
    check(os.path.exists(busybox), "busybox (Debian's busybox-static) is not installed")
    root = tempfile.mkdtemp(prefix="hpcq-rootfs-")
    os.chmod(root, 0o755)
    os.makedirs(os.path.join(root, "bin"))
    shutil.copy(busybox, os.path.join(root, "bin", "busybox"))
    for applet in applets:
        os.symlink("busybox", os.path.join(root, "bin", applet))
    return root


# What an agent's reason says when CRIU is installed and passes `criu check`
# but its trial dump of a process made as jobs are fails or hangs
# (agent/executor/checkpoint.h, criu_trial_dump, kTrialDumpVerdict): a kernel
# that lets no dump finish, or a root where jobs cannot be dumped (a chroot).
TRIAL_DUMP_FAILED = "a trial dump of a sleep made as jobs are"


def needs_checkpoint(test):
    """Marks a test that needs CRIU dumps to work: main() skips it, saying
    why, where the nodes' trial dump failed (a missing or broken CRIU install
    still fails it)."""
    test.needs_checkpoint = True
    return test


def cannot_dump():
    """The reason a node gave when its trial dump failed; else None."""
    for n in json.loads(hpcq("nodes", "--json").stdout):
        if not n["checkpoint"] and TRIAL_DUMP_FAILED in n["checkpoint_reason"]:
            return n["checkpoint_reason"]
    return None


def main(tests):
    """Runs each test function; prints one line each and then the counts.
    Exits 1 on any failure; else 77 (SKIP to meson) when any test skipped, so
    that a skip shows in meson's summary, not only in this file's log. Under
    HPCQ_REQUIRE_CHECKPOINT=1 (.ci/run, where its own trial dump worked) a
    checkpoint test that would skip fails instead."""
    failed = skipped = 0
    required = os.environ.get("HPCQ_REQUIRE_CHECKPOINT") == "1"
    why = cannot_dump() if any(getattr(t, "needs_checkpoint", False) for t in tests) else None
    for t in tests:
        if why and getattr(t, "needs_checkpoint", False):
            if required:
                failed += 1
                print(f"FAIL {t.__name__}: checkpointing is required here "
                      f"(HPCQ_REQUIRE_CHECKPOINT=1: a trial dump worked), but: {why}", flush=True)
            else:
                skipped += 1
                print(f"skip {t.__name__}: {why}", flush=True)
            continue
        start = time.monotonic()
        try:
            t()
            print(f"ok   {t.__name__} ({time.monotonic() - start:.1f}s)", flush=True)
        except Skip as e:
            skipped += 1
            print(f"skip {t.__name__}: {e}", flush=True)
        except Exception as e:  # a failed check or an unexpected error: both fail the test
            failed += 1
            print(f"FAIL {t.__name__}: {e}", flush=True)
    print(f"{len(tests) - failed - skipped} passed, {failed} failed, {skipped} skipped")
    sys.exit(1 if failed else 77 if skipped else 0)
