#!/bin/bash
# A threaded program: one task with two CPUs, OMP_NUM_THREADS from Slurm.
#SBATCH --job-name=threads
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=2
#SBATCH --output=threads-%j.out

export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
echo "OMP_NUM_THREADS=$OMP_NUM_THREADS"
env | grep ^SLURM_ | sort
echo "--- step without -c"
srun bash -c 'echo "step SLURM_CPUS_PER_TASK=${SLURM_CPUS_PER_TASK-unset} SLURM_CPUS_ON_NODE=$SLURM_CPUS_ON_NODE"'
echo "--- step with -c \$SLURM_CPUS_PER_TASK"
srun --cpus-per-task=$SLURM_CPUS_PER_TASK \
  bash -c 'echo "step SLURM_CPUS_PER_TASK=${SLURM_CPUS_PER_TASK-unset} SLURM_CPUS_ON_NODE=$SLURM_CPUS_ON_NODE"'
