#!/usr/bin/env python3
"""A PMI-1 client speaking the wire protocol of MPICH's simple PMI to the job
shell (PMI_FD, PMI_RANK, PMI_SIZE), run as each task of a job by t0050:

    pmi1_client.py KEYS

puts KEYS keys of 1,000 bytes, fences (barrier_in), reads one key of the
next rank, finalizes and prints "rank R of N fenced K keys ok", K the keys
of the whole world. As an MPI library does, it gives up on an error answer:
it prints "rank R: put failed: MSG" (or "barrier failed: MSG") on stderr,
MSG the server's message, and exits 1."""
import os
import socket
import sys

BATCH = 100  # puts sent before their answers are read


def main():
    keys = int(sys.argv[1])
    rank, size = int(os.environ["PMI_RANK"]), int(os.environ["PMI_SIZE"])
    s = socket.socket(fileno=int(os.environ["PMI_FD"]))
    stream = s.makefile("rwb")

    def send(line):
        stream.write(line.encode() + b"\n")

    def answer():
        words = stream.readline().decode().split()
        return dict(w.split("=", 1) if "=" in w else (w, "") for w in words)

    def call(line):
        send(line)
        stream.flush()
        return answer()

    def give_up(what, a):
        print(f"rank {rank}: {what} failed: {a.get('msg', a)}", file=sys.stderr, flush=True)
        sys.exit(1)

    if call("cmd=init pmi_version=1 pmi_subversion=1").get("rc") != "0":
        give_up("init", {})
    kvsname = call("cmd=get_my_kvsname")["kvsname"]
    value = "v" * 1000
    for first in range(0, keys, BATCH):
        batch = range(first, min(keys, first + BATCH))
        for i in batch:
            send(f"cmd=put kvsname={kvsname} key=r{rank}k{i} value={value}")
        stream.flush()
        for _ in batch:
            a = answer()
            if a.get("rc") != "0":
                give_up("put", a)
    a = call("cmd=barrier_in")
    if a.get("rc") != "0":
        give_up("barrier", a)
    peer = (rank + 1) % size
    a = call(f"cmd=get kvsname={kvsname} key=r{peer}k{keys - 1}")
    if a.get("rc") != "0" or a.get("value") != value:
        give_up("get", a)
    call("cmd=finalize")
    print(f"rank {rank} of {size} fenced {keys * size} keys ok", flush=True)


if __name__ == "__main__":
    main()
