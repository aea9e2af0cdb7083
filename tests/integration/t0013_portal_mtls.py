#!/usr/bin/env python3
"""Mutual TLS for portals ([api] tls_client_ca): a client without a
certificate signed by the configured CA cannot even connect; one with it
works, and still needs its token."""
import hashlib
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "..", "..", "examples", "portal", "portal_client.py")
WORK = "/tmp/hpcq-t0013"
TOKEN = "t0013-mutual-" + "k" * 20


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=WORK)


if not os.environ.get("HPCQ_TEST_INSIDE"):
    os.makedirs(WORK, exist_ok=True)
    t.ensure_user("hpcqtest")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-keyout", "ca.key",
            "-out", "ca.pem", "-subj", "/CN=hpcq test CA")
    for name, san in (("server", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
                      ("client", "subjectAltName=DNS:portal")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                f"{name}.csr", "-subj", f"/CN={name}")
        with open(f"{WORK}/{name}.ext", "w") as f:
            f.write(san + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "1", "-out", f"{name}.pem", "-extfile", f"{name}.ext")
        os.chmod(f"{WORK}/{name}.key", 0o600)
    with open(f"{WORK}/token", "w") as f:
        f.write(TOKEN)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with open(f"{WORK}/port", "w") as f:
        f.write(str(port))
    with open(f"{WORK}/extra.toml", "w") as f:
        f.write(f"""
[api]
listen = "127.0.0.1:{port}"
tls_cert = "{WORK}/server.pem"
tls_key = "{WORK}/server.key"
tls_client_ca = "{WORK}/ca.pem"

[[portal]]
name = "gateway"
token_sha256 = "{hashlib.sha256(TOKEN.encode()).hexdigest()}"
users = ["*"]
""")
t.within_cluster(agents=1, fanout=2, topology="pack:1 numa:1 core:1 pu:1",
                 extra=("--config", f"{WORK}/extra.toml"))

with open(f"{WORK}/port") as f:
    TARGET = f"127.0.0.1:{f.read().strip()}"


def client(*args, cert=True):
    mine = ["--cert", f"{WORK}/client.pem", "--key", f"{WORK}/client.key"] if cert else []
    return subprocess.run(["/usr/bin/python3", CLIENT, "--target", TARGET, "--ca",
                           f"{WORK}/ca.pem", "--token-file", f"{WORK}/token", "--user",
                           "hpcqtest", *mine, *args], capture_output=True, text=True, timeout=60)


def test_client_certificate_required():
    p = client("jobs", cert=False)
    t.check(p.returncode == 1 and "UNAVAILABLE" in p.stderr, f"no certificate: {p.stderr}")
    p = client("jobs")
    t.check(p.returncode == 0, f"with a certificate: {p.stderr}")
    d = t.workdir()
    p = client("submit", "--cwd", d, "--", "true")
    t.check(p.returncode == 0 and '"COMPLETED"' in p.stdout, p.stdout + p.stderr)


t.main([test_client_certificate_required])
