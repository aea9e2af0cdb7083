#!/bin/bash
# Two whole nodes, two tasks on each: what every task learns about itself.
#SBATCH -J tpn
#SBATCH -N 2
#SBATCH --ntasks-per-node=2
#SBATCH -o %x-%j.out

env | grep ^SLURM_ | sort
echo "--- tasks"
srun bash -c 'echo "task SLURM_PROCID=$SLURM_PROCID SLURM_LOCALID=$SLURM_LOCALID" \
  "SLURM_NODEID=$SLURM_NODEID SLURMD_NODENAME=$SLURMD_NODENAME SLURM_STEP_ID=$SLURM_STEP_ID" \
  "SLURM_STEP_NUM_TASKS=$SLURM_STEP_NUM_TASKS SLURM_STEP_NUM_NODES=$SLURM_STEP_NUM_NODES" \
  "SLURM_STEP_TASKS_PER_NODE=$SLURM_STEP_TASKS_PER_NODE"' | sort
