#!/usr/bin/env python3
"""A rank that asks its job shell to spawn, as an MPICH whose device passes
MPI_Comm_spawn to PMI does (ch3, and its kin: Intel MPI, MVAPICH; Debian's
MPICH 4.0.2, ch4:ucx, fails the spawn itself and never asks). Run as each
task of a job by t0060:

    pmi_spawn_client.py pmi1|pmi2

Every rank begins PMI and fences once. Rank 0 then sends the spawn request
as MPICH's client writes it (PMI-1: simple_pmi.c's "mcmd=spawn" block;
PMI-2: a "cmd=spawn" message), prints the answer's command and rc, and
waits, as MPICH's root then does in MPI_Finalize; the other ranks wait
for the root from the start, as they do inside MPI_Comm_spawn. So the
world only ends if the shell ends it."""
import os
import socket
import sys
import time


def pmi1(stream, rank):
    def call(text):
        stream.write(text.encode())
        stream.flush()
        words = stream.readline().decode().split()
        return dict(w.split("=", 1) if "=" in w else (w, "") for w in words)

    call("cmd=init pmi_version=1 pmi_subversion=1\n")
    call("cmd=barrier_in\n")
    if rank != 0:
        return None
    # One block per command of MPI_Comm_spawn_multiple; an argument may
    # hold spaces and '='.
    a = call("mcmd=spawn\nnprocs=1\nexecname=/bin/true\ntotspawns=1\nspawnssofar=1\n"
             "arg1=a b=c endcmd\nargcnt=1\npreput_num=1\n"
             "preput_key_0=PARENT_ROOT_PORT_NAME\npreput_val_0=tag#0$\n"
             "info_num=0\nendcmd\n")
    return a.get("cmd"), a.get("rc")


def pmi2(stream, rank):
    def message(text):
        stream.write(f"{len(text):<6}{text}".encode())
        stream.flush()
        length = int(stream.read(6))
        pairs = stream.read(length).decode().rstrip(";").split(";")
        return dict(p.split("=", 1) for p in pairs)

    stream.write(b"cmd=init pmi_version=2 pmi_subversion=0\n")
    stream.flush()
    stream.readline()
    message(f"cmd=fullinit;pmirank={rank};")
    message("cmd=kvs-fence;")
    if rank != 0:
        return None
    a = message("cmd=spawn;ncmds=1;preputcount=0;subcmd=/bin/true;maxprocs=1;argc=0;"
                "infokeycount=0;")
    return a.get("cmd"), a.get("rc")


def main():
    rank = int(os.environ["PMI_RANK"])
    stream = socket.socket(fileno=int(os.environ["PMI_FD"])).makefile("rwb")
    answer = (pmi1 if sys.argv[1] == "pmi1" else pmi2)(stream, rank)
    if answer:
        print(f"rank {rank} spawn answered cmd={answer[0]} rc={answer[1]}", flush=True)
    while True:  # waits for a peer that never comes
        time.sleep(60)


if __name__ == "__main__":
    main()
