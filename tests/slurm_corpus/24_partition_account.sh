#!/bin/bash
# Partition and account, as every site's template has them.
#SBATCH --job-name=charged
#SBATCH --partition=debug
#SBATCH --account=physics
#SBATCH --ntasks=1
#SBATCH --output=charged-%j.out

echo "SLURM_JOB_PARTITION=$SLURM_JOB_PARTITION"
echo "SLURM_JOB_ACCOUNT=$SLURM_JOB_ACCOUNT"
echo "squeue: $(squeue -h -j "$SLURM_JOB_ID" -o '%P %a')"
