#!/bin/bash
# A task dies of a signal (a segfault); the script reports it and exits 0.
#SBATCH --job-name=segv
#SBATCH --ntasks=1
#SBATCH --output=segv-%j.out

srun bash -c 'echo "task about to crash"; kill -SEGV $$'
echo "srun exit status $?"
