#!/bin/bash
# Three tasks on two nodes: the first node takes two, the second one.
# --exclusive so that the layout does not depend on what else is running.
#SBATCH --job-name=uneven
#SBATCH --nodes=2
#SBATCH --ntasks=3
#SBATCH --exclusive
#SBATCH --output=uneven-%j.out

echo "SLURM_NTASKS=$SLURM_NTASKS"
echo "SLURM_TASKS_PER_NODE=$SLURM_TASKS_PER_NODE"
echo "SLURM_JOB_CPUS_PER_NODE=$SLURM_JOB_CPUS_PER_NODE"
echo "SLURM_JOB_NODELIST=$SLURM_JOB_NODELIST"
srun bash -c 'echo "rank $SLURM_PROCID on node $SLURM_NODEID ($SLURMD_NODENAME) local $SLURM_LOCALID"' | sort
