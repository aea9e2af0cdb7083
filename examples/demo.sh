#!/usr/bin/env bash
# Runs inside `hpcq start` (HPCQ_SOCKET set): submits the sample multi-node
# job, waits for it, shows the queue, its status and its output.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/hpcq-demo-XXXXXX)
chmod 755 "$work"
cd "$work"
echo "== hpcq nodes"
hpcq nodes
id=$(hpcq submit "$here/hello-mpi-style.sh")
echo "== submitted job $id"
hpcq queue
hpcq wait "$id"
echo "== hpcq queue --all"
hpcq queue --all
echo "== hpcq status $id"
hpcq status "$id"
echo "== output ($work/hello-$id.out)"
grep '^task' "hello-$id.out" | sort -n -k2
grep -v '^task' "hello-$id.out"
