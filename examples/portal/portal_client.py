#!/usr/bin/python3
"""A web portal's view of hpcq: the gRPC API over TLS with a bearer token.

What a portal (Open OnDemand-style, a science gateway) does: submit a job as
one of its users, watch it to the end, and find its output. Uses Debian's
python3-grpcio; the Python modules for hpcq.proto are generated on the fly
with protoc and grpc_python_plugin (Debian's protobuf-compiler and
protobuf-compiler-grpc), so nothing generated is kept in the tree.

    portal_client.py --target HOST:PORT --ca CERT --token-file FILE --user NAME \
        [--cert CLIENT.crt --key CLIENT.key] submit [--ntasks N] [--time MINUTES] -- COMMAND [ARGS...]
    portal_client.py ... health | services
    portal_client.py ... status JOB | cancel JOB
    portal_client.py ... jobs [--repeat N]

`submit` prints one JSON object: the job id, its final state, exit code and
output path. Errors print the gRPC status and message on stderr and exit 1.
"""
import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "proto"))


def load_stubs(proto_dir=PROTO_DIR):
    """Generates and imports hpcq_pb2 / hpcq_pb2_grpc from hpcq.proto."""
    out = tempfile.mkdtemp(prefix="hpcq-portal-")
    subprocess.run(["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}",
                    "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
                    os.path.join(proto_dir, "hpcq.proto")], check=True)
    sys.path.insert(0, out)
    return importlib.import_module("hpcq_pb2"), importlib.import_module("hpcq_pb2_grpc")


class Portal:
    def __init__(self, target, ca_file, token, user, cert_file=None, key_file=None):
        def read(path):
            with open(path, "rb") as f:
                return f.read()
        # A client certificate only where the daemon asks for mutual TLS.
        credentials = grpc.ssl_channel_credentials(
            root_certificates=read(ca_file),
            private_key=read(key_file) if key_file else None,
            certificate_chain=read(cert_file) if cert_file else None)
        self.channel = grpc.secure_channel(target, credentials)
        self.pb, pb_grpc = load_stubs()
        self.stub = pb_grpc.HpcqStub(self.channel)
        # Every call says who the portal is (the token) and whom it acts for.
        self.metadata = (("authorization", f"Bearer {token}"), ("x-hpcq-user", user))

    def submit(self, argv, ntasks=1, time_limit_s=600, cwd="/tmp"):
        spec = self.pb.JobSpec(name=os.path.basename(argv[0]), argv=argv, ntasks=ntasks,
                               cpus_per_task=1, time_limit_s=time_limit_s, cwd=cwd,
                               output="portal-%j.out")
        reply = self.stub.Submit(self.pb.SubmitRequest(spec=spec), metadata=self.metadata)
        return reply.id

    def watch(self, job_id):
        """Blocks until the job ends; returns its last event."""
        last = None
        for event in self.stub.WatchJobs(self.pb.WatchJobsRequest(id=job_id),
                                         metadata=self.metadata):
            last = event
        return last

    def job(self, job_id):
        return self.stub.GetJob(self.pb.GetJobRequest(id=job_id), metadata=self.metadata)

    def jobs(self):
        reply = self.stub.ListJobs(self.pb.ListJobsRequest(), metadata=self.metadata)
        return [{"id": j.id, "state": self.pb.JobState.Name(j.state)} for j in reply.jobs]

    def services(self):
        """The services the server lists through reflection (grpc.reflection.v1alpha)."""
        info = self.channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            request_serializer=lambda _: b"\x3a\x00",  # list_services = ""
            response_deserializer=lambda b: b)
        reply = next(iter(info(iter([None]), metadata=self.metadata)))
        # list_services_response (6) { service (1) { name (1) } ... }: take the names.
        names, i = [], 0
        while True:
            i = reply.find(b"\x0a", i)
            if i < 0 or i + 1 >= len(reply):
                break
            n = reply[i + 1]
            name = reply[i + 2:i + 2 + n]
            if name and all(32 < c < 127 for c in name) and b"." in name:
                names.append(name.decode())
                i += 2 + n
            else:
                i += 1
        return names

    def health(self):
        # grpc.health.v1.Health/Check with an empty request (every service);
        # the reply's field 1 is the status, 1 = SERVING.
        check = self.channel.unary_unary("/grpc.health.v1.Health/Check",
                                         request_serializer=lambda _: b"",
                                         response_deserializer=lambda b: b)
        reply = check(None, metadata=self.metadata)
        return "SERVING" if reply == b"\x08\x01" else f"NOT SERVING ({reply!r})"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", required=True)
    p.add_argument("--ca", required=True, help="CA certificate that signed the server's")
    p.add_argument("--token-file", required=True)
    p.add_argument("--user", required=True, help="the portal user to act for")
    p.add_argument("--cert", help="client certificate (mutual TLS)")
    p.add_argument("--key", help="client private key (mutual TLS)")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("submit")
    s.add_argument("--ntasks", type=int, default=1)
    s.add_argument("--time", type=int, default=10, help="minutes")
    s.add_argument("--cwd", default="/tmp")
    s.add_argument("argv", nargs=argparse.REMAINDER)
    sub.add_parser("health")
    sub.add_parser("services", help="the services listed by server reflection")
    st = sub.add_parser("status", help="one job, as JSON")
    st.add_argument("job", type=int)
    c = sub.add_parser("cancel", help="cancel a job")
    c.add_argument("job", type=int)
    j = sub.add_parser("jobs", help="the user's pending and running jobs, as JSON")
    j.add_argument("--repeat", type=int, default=1,
                   help="ask this many times, one status line each (OK or the error code)")
    args = p.parse_args()
    with open(args.token_file) as f:
        token = f.read().strip()
    portal = Portal(args.target, args.ca, token, args.user, args.cert, args.key)
    try:
        if args.command == "health":
            print(portal.health())
            return 0
        if args.command == "services":
            print("\n".join(portal.services()))
            return 0
        if args.command == "status":
            job = portal.job(args.job)
            print(json.dumps({"id": job.id, "user": job.user,
                              "state": portal.pb.JobState.Name(job.state)}))
            return 0
        if args.command == "cancel":
            portal.stub.Cancel(portal.pb.CancelRequest(id=args.job), metadata=portal.metadata)
            return 0
        if args.command == "jobs":
            for _ in range(args.repeat):
                try:
                    jobs = portal.jobs()
                    print(json.dumps(jobs) if args.repeat == 1 else "OK", flush=True)
                except grpc.RpcError as e:
                    if args.repeat == 1:
                        raise
                    print(e.code().name, flush=True)
            return 0
        argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        job_id = portal.submit(argv, ntasks=args.ntasks, time_limit_s=args.time * 60,
                               cwd=args.cwd)
        last = portal.watch(job_id)
        job = portal.job(job_id)
        print(json.dumps({"id": job_id, "state": portal.pb.JobState.Name(last.state),
                          "exit_code": last.exit_code, "stdout": job.stdout}))
        return 0 if last.state == portal.pb.COMPLETED else 1
    except grpc.RpcError as e:
        print(f"portal: {e.code().name}: {e.details()}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
