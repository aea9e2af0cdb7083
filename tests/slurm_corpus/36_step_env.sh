#!/bin/bash
# The environment of a one-task step inside a two-node job.
#SBATCH --job-name=stepenv
#SBATCH --nodes=2
#SBATCH --ntasks=2
#SBATCH --output=stepenv-%j.out

srun -N 1 -n 1 bash -c 'env | grep ^SLURM_ | sort'
