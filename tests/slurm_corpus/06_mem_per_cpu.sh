#!/bin/bash
# Memory per CPU: two tasks of 200 MB each.
#SBATCH -J mempercpu
#SBATCH -N 1
#SBATCH -n 2
#SBATCH --mem-per-cpu=200M
#SBATCH -o mempercpu-%j.out

echo "SLURM_MEM_PER_CPU=$SLURM_MEM_PER_CPU"
echo "SLURM_MEM_PER_NODE=${SLURM_MEM_PER_NODE-unset}"
srun bash -c 'echo "task $SLURM_PROCID SLURM_MEM_PER_CPU=${SLURM_MEM_PER_CPU-unset}"' | sort
