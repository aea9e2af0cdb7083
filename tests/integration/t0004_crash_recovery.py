#!/usr/bin/env python3
"""kill -9 of hpcqd while 1,000 submissions from 8 clients are in flight, then
a restart on the same state directory: every acknowledged job is there, with
the id it was acknowledged with, and none is duplicated."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t


def write_config(d):
    key = os.path.join(d, "leader.key")
    public = t.hpcq("keygen", key).stdout.strip()
    path = os.path.join(d, "hpcq.toml")
    with open(path, "w") as f:
        f.write(f"""[leader]
state_dir = "{d}/state"
socket = "{d}/hpcqd.sock"
secret_key = "{key}"

[[rank]]
name = "leader"
endpoint = "tcp://127.0.0.1:{free_port()}"
public_key = "{public}"
""")
    return path


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_daemon(config, log):
    p = subprocess.Popen([t.HPCQD, "--config", config], stdout=log, stderr=log)
    socket = os.path.join(os.path.dirname(config), "hpcqd.sock")
    env = dict(os.environ, HPCQ_SOCKET=socket)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if t.run([t.HPCQ, "queue"], env=env).returncode == 0:
            return p, env
        time.sleep(0.05)
    p.kill()
    raise t.Failure("hpcqd did not start")


def test_kill9_during_submissions_loses_nothing():
    d = tempfile.mkdtemp(prefix="hpcq-crash-")
    config = write_config(d)
    log = open(os.path.join(d, "hpcqd.log"), "w")
    daemon, env = start_daemon(config, log)
    load = subprocess.Popen([t.SUBMIT_LOAD, "--socket", env["HPCQ_SOCKET"], "-n", "1000", "-c", "8",
                             "--print-acks", "--prefix", "crash"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    acked = {}
    killed = False
    for line in load.stdout:
        if line.startswith("ack "):
            _, job_id, name = line.split()
            acked[int(job_id)] = name
            if len(acked) == 300 and not killed:
                daemon.send_signal(signal.SIGKILL)
                killed = True
    load.wait()
    daemon.wait()
    t.check(killed, f"only {len(acked)} submissions were acknowledged before the end")
    t.check(len(acked) < 1000, "the kill came after every submission")

    daemon, env = start_daemon(config, log)
    try:
        jobs = json.loads(t.run([t.HPCQ, "queue", "--all", "--json"], env=env, check_rc=0).stdout)
    finally:
        daemon.terminate()
        daemon.wait(timeout=20)
    by_id = {j["id"]: j["name"] for j in jobs}
    t.check(len(by_id) == len(jobs), "a job id appears twice")
    names = [j["name"] for j in jobs]
    t.check(len(set(names)) == len(names), "a submission was stored twice")
    missing = [i for i in acked if i not in by_id]
    t.check(not missing, f"{len(missing)} acknowledged jobs lost, e.g. {missing[:5]}")
    wrong = [i for i, n in acked.items() if by_id[i] != n]
    t.check(not wrong, f"acknowledged ids with another job's name: {wrong[:5]}")
    print(f"     {len(acked)} acknowledged before kill -9, {len(jobs)} recovered", flush=True)


t.main([test_kill9_during_submissions_loses_nothing])
