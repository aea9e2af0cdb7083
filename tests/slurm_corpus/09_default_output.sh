#!/bin/bash
# No --output: Slurm's default slurm-%j.out takes both stdout and stderr.
#SBATCH --ntasks=1

echo "line on stdout"
echo "line on stderr" >&2
echo "SLURM_JOB_NAME=$SLURM_JOB_NAME"
