#!/bin/bash
# Command-line options win over the script's #SBATCH lines.
# corpus: args=--job-name=from-cli
#SBATCH --job-name=from-script
#SBATCH --ntasks=1
#SBATCH --output=%x-%j.out

echo "SLURM_JOB_NAME=$SLURM_JOB_NAME"
