#!/usr/bin/env python3
"""hpcqd's unix socket speaks two protocols, told apart by a connection's
first byte: the local wire (the hpcq command; lib/api/local_wire.h) and gRPC
(any gRPC client). Both know the caller from SO_PEERCRED. Malformed local-wire
calls get a one-line error or a closed connection, never a crash; silent
connections do not hold up anyone else's calls."""
import importlib
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

# Debian's Python, which has python3-grpcio and python3-protobuf (.ci/install-deps).
if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
    os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hpcqtest as t  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.normpath(os.path.join(HERE, "..", "..", "proto"))

t.within_cluster(agents=1, fanout=2, topology="pack:1 numa:1 core:2 pu:1")

sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "portal"))
import portal_client  # noqa: E402  (generates hpcq_pb2 and hpcq_pb2_grpc)

pb, pb_grpc = portal_client.load_stubs()
_out = tempfile.mkdtemp(prefix="hpcq-t0039-")
subprocess.run(["protoc", f"-I{PROTO}", f"--python_out={_out}", os.path.join(PROTO, "local.proto")],
               check=True)
sys.path.insert(0, _out)
local_pb = importlib.import_module("local_pb2")

SOCKET = os.environ["HPCQ_SOCKET"]
MAGIC = b"HPQ1"
INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION = 1, 2, 5  # lib/core/status.h's Code


def frame(payload):
    return struct.pack(">I", len(payload)) + payload


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(SOCKET)
    return s


def read_exactly(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def replies(s):
    """Every Reply until the last one or the end of the connection."""
    out = []
    while True:
        header = read_exactly(s, 4)
        if header is None:
            return out
        body = read_exactly(s, struct.unpack(">I", header)[0])
        reply = local_pb.Reply()
        reply.ParseFromString(body)
        out.append(reply)
        if reply.last:
            return out


def call(method, request_bytes, protocol_version=0):
    with connect() as s:
        c = local_pb.Call(method=method, request=request_bytes, protocol_version=protocol_version)
        s.sendall(MAGIC + frame(c.SerializeToString()))
        return replies(s)


def test_a_local_wire_call_by_hand():
    job = t.submit("-o", "/dev/null", "--", "true")
    t.wait_state(job, ("COMPLETED",))
    answer = call("GetJob", pb.GetJobRequest(id=int(job)).SerializeToString())
    t.check(len(answer) == 1 and answer[0].last and answer[0].code == 0, str(answer))
    got = pb.Job()
    got.ParseFromString(answer[0].payload)
    t.check(got.id == int(job) and got.state == pb.COMPLETED, str(got))
    missing = call("GetJob", pb.GetJobRequest(id=987654).SerializeToString())
    t.check(len(missing) == 1 and missing[0].code == NOT_FOUND and "987654" in missing[0].message,
            str(missing))


def test_a_grpc_client_on_the_same_socket():
    import grpc
    with grpc.insecure_channel("unix:" + SOCKET) as channel:
        stub = pb_grpc.HpcqStub(channel)
        nodes = stub.ListNodes(pb.ListNodesRequest(), timeout=10)
        t.check(len(nodes.nodes) == 1 and nodes.nodes[0].state == "up", str(nodes))
        # SO_PEERCRED on the gRPC path too: root may see every job.
        jobs = stub.ListJobs(pb.ListJobsRequest(all=True), timeout=10)
        t.check(len(jobs.jobs) >= 1, str(jobs))


def test_malformed_calls_get_one_line_errors():
    cases = [
        ("unknown method", call("Frobnicate", b""), INVALID_ARGUMENT, "Frobnicate"),
        ("request not its message", call("GetJob", b"\xff\xff\xff"), INVALID_ARGUMENT,
         "malformed"),
    ]
    with connect() as s:
        s.sendall(MAGIC + frame(b"\x0a\xff"))  # a Call whose method's length runs past its end
        cases.append(("call not a Call", replies(s), INVALID_ARGUMENT, "not a Call"))
    with connect() as s:
        s.sendall(MAGIC + struct.pack(">I", 0xfffffff0))  # announces ~4 GB, sends 4 bytes
        s.sendall(b"abcd")
        s.shutdown(socket.SHUT_WR)
        cases.append(("over the limit", replies(s), INVALID_ARGUMENT, "over hpcqd's limit"))
    for what, answer, code, text in cases:
        t.check(len(answer) == 1 and answer[0].last and answer[0].code == code and
                text in answer[0].message and "\n" not in answer[0].message,
                f"{what}: {answer}")
    # Cut off mid-frame, or after the magic only: closed without an answer.
    for partial in (MAGIC + struct.pack(">I", 100) + b"x" * 10, MAGIC, b"H"):
        with connect() as s:
            s.sendall(partial)
            s.shutdown(socket.SHUT_WR)
            t.check(replies(s) == [], f"{partial!r} was answered")
    t.hpcq("queue")  # still serving


def test_versions_and_protocols():
    """--version names the version, the commit and the protocol; a call of a
    newer protocol is refused with one line, an older one (the field unset,
    as test_a_local_wire_call_by_hand sends) is served; `nodes` says what each
    node's agent runs."""
    lines = {}
    for name, binary in (("hpcq", t.HPCQ), ("hpcqd", t.HPCQD), ("hpcq-agent", t.AGENT)):
        lines[name] = subprocess.run([binary, "--version"], capture_output=True, text=True,
                                     check=True).stdout.strip()
    protocol = int(lines["hpcq"].rsplit("protocol ", 1)[-1].rstrip(")"))
    for name, line in lines.items():
        t.check(line.startswith(name + " ") and "(commit " in line and
                line.endswith(f", protocol {protocol})"), f"{name} --version: {line!r}")
    newer = call("ListNodes", b"", protocol_version=protocol + 1)
    t.check(len(newer) == 1 and newer[0].last and newer[0].code == FAILED_PRECONDITION and
            "newer than this hpcqd" in newer[0].message and "\n" not in newer[0].message,
            str(newer))
    older = call("ListNodes", b"", protocol_version=protocol - 1)
    t.check(len(older) == 1 and older[0].code == 0, str(older))
    nodes = json.loads(t.hpcq("nodes", "--json").stdout)
    version = lines["hpcq-agent"].split()[1] + "+"  # "0.1.0+<commit>"
    t.check(all(n["protocol_version"] == protocol and n["agent_version"].startswith(version)
                for n in nodes), f"{nodes}")
    table = t.hpcq("nodes").stdout
    t.check("VERSION" in table and nodes[0]["agent_version"] in table, table)


def test_silent_connections_hold_up_no_one():
    silent = [connect() for _ in range(50)]
    try:
        start = time.monotonic()
        t.hpcq("queue")
        t.check(time.monotonic() - start < 5, "a call waited behind silent connections")
    finally:
        for s in silent:
            s.close()


def test_a_reader_leaving_mid_stream_leaves_hpcqd_serving():
    gate = t.Gate(t.workdir())
    job = t.submit("-o", "/dev/null", "--", *gate.command)
    try:
        with connect() as s:
            c = local_pb.Call(method="WatchJobs",
                              request=pb.WatchJobsRequest(id=int(job)).SerializeToString())
            s.sendall(MAGIC + frame(c.SerializeToString()))
            first = read_exactly(s, 4)
            t.check(first is not None, "no first event")
        # The reader went; hpcqd goes on serving the rest.
        t.check(json.loads(t.hpcq("status", str(job), "--json").stdout)["id"] == int(job), "status")
    finally:
        gate.open()
        t.wait_state(job, ("COMPLETED",))


if __name__ == "__main__":
    t.main([test_a_local_wire_call_by_hand, test_a_grpc_client_on_the_same_socket,
            test_malformed_calls_get_one_line_errors, test_versions_and_protocols,
            test_silent_connections_hold_up_no_one,
            test_a_reader_leaving_mid_stream_leaves_hpcqd_serving])
