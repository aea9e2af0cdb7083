#!/bin/bash
# srun -l: each line labelled with its task.
#SBATCH --job-name=labels
#SBATCH --nodes=1
#SBATCH --ntasks=2
#SBATCH --output=labels-%j.out

srun -l bash -c 'echo "hello from $SLURM_PROCID"; echo "SLURM_PROCID=$SLURM_PROCID"' | sort
