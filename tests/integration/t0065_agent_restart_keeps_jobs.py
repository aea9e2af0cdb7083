#!/usr/bin/env python3
"""An agent restart keeps its node's jobs (docs/admin-guide.md, "Restarting
and upgrading agents"): the job shells outlive the agent, the next agent on
the same state directory takes them back (agent/run_journal.h's part
journal, each shell's shell.json), and hpcqd keeps the node up with its
jobs. Each agent restarted in turn -- kill -9 of one, SIGTERM of the other
-- and then hpcqd: a serial job, a batch job in a step, a 2-node MPI job
(MPICH; its MPI_Finalize fences across the nodes after the restarts) and an
`hpcq run` streaming its output all complete with their whole output and
exit codes, each task started once. The streams go on through the channel
the shell holds for the next agent (shell/contract.h, kHeldChannelFd).
`hpcq-agent --drain-and-exit` is the way to end a node's jobs on purpose."""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

t.within_cluster(agents=2, fanout=2)
MPI_GATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi_gate.c")


def gated(d, gate, starts, then):
    """A shell command that records its start (its task's rank) once in
    `starts`, waits for the gate, then runs `then`."""
    return (f"echo ${{HPCQ_TASK_RANK:-0}} >> {starts}; echo begin; "
            f"while [ ! -e {gate.path} ]; do sleep 0.05; done; {then}")


def nodes_up():
    states = [n["state"] for n in t.json_of("nodes")]
    return all(s == "up" for s in states)


def test_restarts_keep_jobs():
    d = t.workdir()
    gate = t.Gate(d)
    serial = t.submit("-w", "node1", "-o", "serial.out", "--", "sh", "-c",
                      gated(d, gate, "serial.starts", "echo end; exit 3"), cwd=d)
    with open(os.path.join(d, "steps.sh"), "w") as f:
        f.write("#!/bin/sh\n#HPCQ -w node2\necho batch begin\n"
                f"hpcq run -- sh -c '{gated(d, gate, 'step.starts', 'echo step end')}'\n"
                "echo step $?\nexit 4\n")
    batch = int(t.hpcq("batch", "-o", "batch.out", "steps.sh", cwd=d).stdout)
    _, mpi_gate = t.build_mpi_program(MPI_GATE, "mpich")
    wide = t.submit("-N", "2", "-n", "2", "-o", "wide.out", "--", mpi_gate, gate.path,
                    os.path.join(d, "wide.starts"), cwd=d)
    # Streams a numbered line every 20 ms until the gate opens.
    counter = (f"echo 0 >> {d}/run.starts; i=0; while [ ! -e {gate.path} ]; do "
               "i=$((i+1)); echo line $i; sleep 0.02; done; echo run end; exit 6")
    run = subprocess.Popen([t.HPCQ, "run", "-w", "node1", "--", "sh", "-c", counter],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=d)
    t.wait_until("the hpcq run job started", lambda: len(lines(d, "run.starts")) == 1)
    streamed = max(int(j["id"]) for j in t.json_of("queue"))
    jobs = (serial, batch, wide, streamed)
    for job in jobs:
        t.wait_state(job, "RUNNING")
    t.wait_until("every task started", lambda: len(lines(d, "serial.starts")) == 1 and
                 len(lines(d, "step.starts")) == 1 and len(lines(d, "wide.starts")) == 2)

    for rank, signo in ((1, signal.SIGKILL), (2, signal.SIGTERM)):
        t.restart_agent(rank, signo)
        t.wait_until(f"hpcqd taking node{rank}'s new agent with its jobs",
                     lambda: f"node node{rank} (rank {rank}): its agent restarted (" in
                     t.leader_log())
    t.restart_leader(t.kill_leader())
    t.wait_until("both nodes up after the leader's restart", nodes_up)
    for job in jobs:
        s = t.status(job)
        t.check(s["state"] == "RUNNING", f"job {job} after the restarts: {s['state']} "
                f"({s.get('reason')})")

    gate.open()
    ends = {job: t.wait_state(job, ["COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED"])
            for job in jobs}
    t.check((ends[serial]["state"], ends[serial]["exit_code"]) == ("FAILED", 3),
            f"serial: {ends[serial]}")
    t.check((ends[batch]["state"], ends[batch]["exit_code"]) == ("FAILED", 4),
            f"batch: {ends[batch]}")
    t.check(ends[wide]["state"] == "COMPLETED", f"2-node: {ends[wide]}")
    out, err = run.communicate(timeout=60)
    t.check(run.returncode == 6, f"hpcq run exit {run.returncode}: {err}")
    t.check(t.check_numbered_then(out.splitlines(), "run end") > 0, "no line streamed")
    t.check(lines(d, "serial.out") == ["begin", "end"], f"serial output {lines(d, 'serial.out')}")
    # The step's `hpcq run` says so while hpcqd restarts, and waits.
    batch_out = [l for l in lines(d, "batch.out") if "hpcqd is not reachable" not in l]
    t.check(batch_out == ["batch begin", "begin", "step end", "step 0"],
            f"batch {lines(d, 'batch.out')}")
    t.check(sorted(lines(d, "wide.out")) == ["rank 0 of 2 begins", "rank 0: sum 1",
                                             "rank 1 of 2 begins", "rank 1: sum 1"],
            f"2-node MPI: {lines(d, 'wide.out')}")
    # Started once each: no task ran again after a restart.
    t.check(lines(d, "serial.starts") == ["0"], f"{lines(d, 'serial.starts')}")
    t.check(lines(d, "step.starts") == ["0"], f"{lines(d, 'step.starts')}")
    t.check(lines(d, "run.starts") == ["0"], f"{lines(d, 'run.starts')}")
    t.check(sorted(lines(d, "wide.starts")) == ["0", "1"], f"{lines(d, 'wide.starts')}")


def test_a_world_that_first_uses_pmi_after_the_restarts():
    """A 2-node job whose tasks begin PMI only after both agents restarted:
    its shells open their channel on demand at the socket the new agents
    listen on again (take_back_channel)."""
    d, client = t.build_pmi2_client()
    gate = t.Gate(d)
    job = t.submit("-N", "2", "-n", "2", "--mpi", "pmi1", "-o", "pmi.out", "--", "sh", "-c",
                   f"while [ ! -e {gate.path} ]; do sleep 0.05; done; exec {client}", cwd=d)
    t.wait_state(job, "RUNNING")
    for rank, signo in ((1, signal.SIGTERM), (2, signal.SIGKILL)):
        before = t.leader_log().count(f"node node{rank} (rank {rank}): its agent restarted (")
        t.restart_agent(rank, signo)
        t.wait_until(f"hpcqd taking node{rank}'s new agent", lambda: t.leader_log().count(
            f"node node{rank} (rank {rank}): its agent restarted (") > before)
    gate.open()
    s = t.wait_state(job, ["COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED"])
    out = lines(d, "pmi.out")
    t.check(s["state"] == "COMPLETED", f"job {job}: {s}: {out}")
    t.check(sorted(l.split()[2] for l in out if l.endswith(" ok")) == ["0", "1"], f"{out}")


def test_a_launch_while_the_agent_is_away_runs_once():
    """hpcqd places a job on a node whose agent was just killed (it has not
    noticed yet): the launch is lost, then sent again to the next agent,
    which runs it once."""
    d = t.workdir()
    argv = t.agent_argv(2)
    os.kill(t.agent_pid(2), signal.SIGKILL)
    t.wait_until("agent 2 gone", lambda: subprocess.run(
        ["pgrep", "-f", f"hpcq-agent --config {t.cluster_dir()}/hpcq.toml --rank 2 "],
        capture_output=True).returncode != 0)
    job = t.submit("-w", "node2", "-o", "away.out", "--", "sh", "-c",
                   f"echo x >> {d}/away.starts; echo ran", cwd=d)
    # Placed at once while hpcqd still counts on node2 (or, on a slow
    # machine, held until node2 is back): either way it runs once.
    t.start_agent(argv)
    s = t.wait_state(job, ["COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED"])
    t.check(s["state"] == "COMPLETED", f"job {job}: {s}")
    t.check(lines(d, "away.starts") == ["x"], f"started {lines(d, 'away.starts')}")
    t.check(lines(d, "away.out") == ["ran"], f"output {lines(d, 'away.out')}")


def test_an_agent_away_past_the_lease_finds_its_jobs_ended():
    """An agent that comes back after hpcqd gave up on its node: the shells
    fenced themselves at the lease (t0051), the job ended NODE_FAIL, and
    the new agent's report of the shell it found changes nothing."""
    job, pids = gated_job_on_node2()
    argv = t.agent_argv(2)
    os.kill(t.agent_pid(2), signal.SIGKILL)
    s = t.wait_state(job, ["COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED"])
    t.check(s["state"] == "NODE_FAIL", f"job {job} with its agent away: {s}")
    t.wait_until("its tasks killed by the lease", lambda: not any(
        os.path.exists(f"/proc/{p}") for p in pids))
    t.start_agent(argv)
    t.wait_until("node2 up again", nodes_up)
    t.check(t.status(job)["state"] == "NODE_FAIL", f"job {job}: {t.status(job)}")
    t.check(not t.job_pids(job), f"job {job} runs again: {t.job_pids(job)}")


def test_drain_and_exit_ends_the_jobs():
    job, pids = gated_job_on_node2()
    argv = t.agent_argv(2)
    drained = subprocess.run([t.AGENT, "--config", argv[argv.index("--config") + 1],
                              "--rank", "2", "--drain-and-exit"], capture_output=True, text=True,
                             timeout=150)
    t.check(drained.returncode == 0, f"--drain-and-exit: {drained.stderr}")
    t.check(not any(os.path.exists(f"/proc/{p}") for p in pids), "the job's tasks outlived "
            "the drain")
    t.start_agent(argv)
    s = t.wait_state(job, ["COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED"])
    t.check(s["state"] == "NODE_FAIL", f"job {job} after the drain: {s}")
    t.wait_until("node2 up again", nodes_up)


def gated_job_on_node2():
    """A job on node2 that runs until the test ends: its id and the host
    PIDs of its processes."""
    gate = t.Gate(t.workdir())
    job = t.submit("-w", "node2", "--", *gate.command, cwd=os.path.dirname(gate.path))
    t.wait_state(job, "RUNNING")
    t.wait_until(f"job {job}'s processes in its cgroups", lambda: t.job_pids(job))
    return job, t.job_pids(job)


def lines(d, name):
    path = os.path.join(d, name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return f.read().splitlines()


t.main([test_restarts_keep_jobs, test_a_world_that_first_uses_pmi_after_the_restarts,
        test_a_launch_while_the_agent_is_away_runs_once,
        test_an_agent_away_past_the_lease_finds_its_jobs_ended, test_drain_and_exit_ends_the_jobs])
