#!/usr/bin/env bash
# Runs inside `hpcq start` (HPCQ_SOCKET set): submits the sample multi-node
# job, waits for it, shows the queue, its status and its output; then a batch
# script that runs two steps, their output and the history with steps.
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
echo "== a batch script with two steps (hpcq batch; hpcq run inside)"
cat > steps.sh <<'SCRIPT'
#!/bin/sh
#HPCQ -N 2 -n 4 -o steps-%j.out
hpcq run -l -- sh -c 'echo "step $HPCQ_STEP_ID: task $HPCQ_TASK_RANK on $HPCQ_NODENAME"'
hpcq run -N 1 -n 1 -- sh -c 'echo "step $HPCQ_STEP_ID: one task on $HPCQ_NODENAME"'
SCRIPT
chmod +x steps.sh
batch=$(hpcq batch steps.sh)
hpcq wait "$batch"
sort "steps-$batch.out"
hpcq history --steps
