#!/bin/bash
# Separate files for stdout and stderr; a step writes to both.
#SBATCH -J split
#SBATCH -n 1
#SBATCH -o job.%j.out
#SBATCH -e job.%j.err

echo "batch stdout"
echo "batch stderr" >&2
srun bash -c 'echo "step stdout"; echo "step stderr" >&2'
