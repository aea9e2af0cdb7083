#!/bin/bash
# A sample multi-node job: every task reports where it runs and what it was
# given. Submit with `hpcq submit examples/hello-mpi-style.sh`.
#HPCQ -J hello
#HPCQ -N 2
#HPCQ -n 4
#HPCQ -c 2
#HPCQ -t 5:00
#HPCQ -o hello-%j.out
cpus=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
mems=$(awk '/^Mems_allowed_list/ {print $2}' /proc/self/status)
echo "task $HPCQ_TASK_RANK/$HPCQ_NTASKS on $HPCQ_NODENAME (node $HPCQ_NODEID of $HPCQ_NNODES: $HPCQ_NODELIST): cores $HPCQ_CPUS -> host CPUs $cpus, memory nodes $mems"
if [ "$HPCQ_TASK_RANK" = 0 ]; then
  echo "hostfile $HPCQ_HOSTFILE:"
  sed 's/^/  /' "$HPCQ_HOSTFILE"
fi
