#!/bin/bash
# A directive after the first command is not read (a common mistake).
#SBATCH --job-name=early
#SBATCH --ntasks=1
#SBATCH --output=late-%j.out
echo "SLURM_JOB_NAME=$SLURM_JOB_NAME"
#SBATCH --job-name=ignored
echo "done"
