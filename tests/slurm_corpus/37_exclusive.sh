#!/bin/bash
# One task, but the whole node.
#SBATCH --job-name=whole
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --exclusive
#SBATCH --output=whole-%j.out

echo "SLURM_CPUS_ON_NODE=$SLURM_CPUS_ON_NODE"
echo "SLURM_JOB_CPUS_PER_NODE=$SLURM_JOB_CPUS_PER_NODE"
echo "SLURM_NTASKS=$SLURM_NTASKS"
