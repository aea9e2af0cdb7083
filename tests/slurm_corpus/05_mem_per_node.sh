#!/bin/bash
# Memory per node, as most sites ask for it.
#SBATCH -J mem
#SBATCH -N 1
#SBATCH -n 1
#SBATCH --mem=500M
#SBATCH -o mem-%j.out

echo "SLURM_MEM_PER_NODE=$SLURM_MEM_PER_NODE"
echo "SLURM_MEM_PER_CPU=${SLURM_MEM_PER_CPU-unset}"
srun bash -c 'echo "step SLURM_MEM_PER_NODE=${SLURM_MEM_PER_NODE-unset}"'
