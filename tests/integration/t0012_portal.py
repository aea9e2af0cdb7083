#!/usr/bin/env python3
"""The portal API: the same gRPC service over TCP with TLS and bearer tokens
(examples/portal/portal_client.py, Python with Debian's python3-grpcio), the
standard health service, per-token rate limits, and who a token may act for;
admin groups on the local socket."""
import hashlib
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "..", "..", "examples", "portal", "portal_client.py")
WORK = "/tmp/hpcq-t0012"
TOKEN = "t0012-" + "s3cret" * 6
PORT_FILE = os.path.join(WORK, "port")

if not os.environ.get("HPCQ_TEST_INSIDE"):
    os.makedirs(WORK, exist_ok=True)
    t.ensure_user("hpcqtest")
    t.ensure_user("hpcqother")
    subprocess.run(["groupadd", "-f", "hpcqadmins"], check=True)
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", "-G", "hpcqadmins",
                    "hpcqadmin"], capture_output=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", f"{WORK}/key.pem", "-out", f"{WORK}/cert.pem", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    os.chmod(f"{WORK}/key.pem", 0o600)
    with open(f"{WORK}/token", "w") as f:
        f.write(TOKEN)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with open(PORT_FILE, "w") as f:
        f.write(str(port))
    with open(f"{WORK}/extra.toml", "w") as f:
        f.write(f"""
[api]
listen = "127.0.0.1:{port}"
tls_cert = "{WORK}/cert.pem"
tls_key = "{WORK}/key.pem"
admin_groups = ["hpcqadmins"]
max_message_bytes = 65536

[[portal]]
name = "gateway"
token_sha256 = "{hashlib.sha256(TOKEN.encode()).hexdigest()}"
users = ["hpcqtest"]
rate_per_s = 4
""")
t.within_cluster(agents=1, fanout=2, topology="pack:1 numa:1 core:2 pu:1",
                 extra=("--config", f"{WORK}/extra.toml"))

with open(PORT_FILE) as f:
    TARGET = f"127.0.0.1:{f.read().strip()}"


def client(*args, user="hpcqtest", token_file=f"{WORK}/token"):
    return subprocess.run(["/usr/bin/python3", CLIENT, "--target", TARGET, "--ca",
                           f"{WORK}/cert.pem", "--token-file", token_file, "--user", user,
                           *args], capture_output=True, text=True, timeout=120)


def test_submit_watch_and_output():
    p = client("health")
    t.check(p.returncode == 0 and p.stdout.strip() == "SERVING", p.stdout + p.stderr)
    p = client("services")
    t.check("hpcq.v1.Hpcq" in p.stdout.split() and "grpc.health.v1.Health" in p.stdout.split(),
            f"reflection lists: {p.stdout!r} {p.stderr}")
    d = t.workdir()
    p = client("submit", "--cwd", d, "--", "sh", "-c", "id -un; echo from-portal")
    t.check(p.returncode == 0, p.stderr)
    out = json.loads(p.stdout)
    t.check(out["state"] == "COMPLETED", f"{out}")
    with open(out["stdout"]) as f:
        t.check(f.read().split() == ["hpcqtest", "from-portal"], "ran as the portal's user")
    s = t.status(out["id"])
    t.check(s["user"] == "hpcqtest", f"owner {s['user']}")


def test_refusals():
    with open(f"{WORK}/wrong", "w") as f:
        f.write("not-the-token")
    p = client("submit", "--", "true", token_file=f"{WORK}/wrong")
    t.check(p.returncode == 1 and "UNAUTHENTICATED: unknown token" in p.stderr, p.stderr)
    time.sleep(1)
    p = client("submit", "--", "true", user="hpcqother")
    t.check("PERMISSION_DENIED: portal 'gateway' may not act for user 'hpcqother'" in p.stderr,
            p.stderr)
    time.sleep(1)
    p = client("submit", "--", "true", user="root")
    t.check("PERMISSION_DENIED: a portal may not act as root" in p.stderr, p.stderr)
    # Over TCP as over the socket: a user sees and cancels their own jobs only.
    d = t.workdir()
    roots = t.submit("--", "sleep", "300", cwd=d)
    time.sleep(1)
    for command in ("status", "cancel"):
        p = client(command, str(roots))
        t.check(p.returncode == 1 and "PERMISSION_DENIED" in p.stderr, f"{command}: {p.stderr}")
        time.sleep(0.5)
    t.hpcq("cancel", str(roots))
    time.sleep(0.5)
    p = client("submit", "--", "echo", "x" * 100000)
    t.check(p.returncode == 1 and "RESOURCE_EXHAUSTED" in p.stderr, f"a large message: {p.stderr}")


def test_rate_limit():
    time.sleep(2.5)  # a full bucket: a burst of 8 calls at 4 per second
    p = client("jobs", "--repeat", "20")
    codes = p.stdout.split()
    t.check(codes[:8] == ["OK"] * 8 and "RESOURCE_EXHAUSTED" in codes[8:], f"{codes}")
    time.sleep(1)
    t.check(client("jobs").returncode == 0, "the bucket refills")
    # The health service answers load balancers without a token or a limit.
    t.check(client("health", token_file="/dev/null").stdout.strip() == "SERVING", "health")


def test_admin_group():
    d = t.workdir()
    job = t.submit("--", "sleep", "300", cwd=d)
    p = t.hpcq("cancel", str(job), user="hpcqother", rc=1)
    t.check("belongs to another user" in p.stderr, p.stderr)
    t.hpcq("cancel", str(job), user="hpcqadmin")
    t.wait_state(job, "CANCELLED")
    t.hpcq("drain", "node1", user="hpcqadmin")
    t.hpcq("resume", "node1", user="hpcqadmin")


def test_logs_hold_no_secrets():
    d = t.workdir()
    marker = "env-value-that-must-not-be-logged-4711"
    job = t.submit("--export", f"ALL,HPCQ_MARKER={marker}", "--", "true", cwd=d)
    t.wait_state(job, "COMPLETED")
    logs = os.path.join(t.cluster_dir(), "logs")
    for name in os.listdir(logs):
        with open(os.path.join(logs, name), errors="replace") as f:
            text = f.read()
        t.check(TOKEN not in text, f"{name} holds the portal token")
        t.check(marker not in text, f"{name} holds a job environment value")
        with open(os.path.join(t.cluster_dir(), "keys", "rank-0.key")) as k:
            secret = [l.split()[1] for l in k if l.startswith("secret ")]
        t.check(len(secret) == 1, "the leader's key file holds its secret key")
        for value in secret:
            t.check(value not in text, f"{name} holds a secret key")


t.main([test_submit_watch_and_output, test_refusals, test_rate_limit, test_admin_group,
        test_logs_hold_no_secrets])
