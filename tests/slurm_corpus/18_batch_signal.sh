#!/bin/bash
# The batch script itself is killed by a signal.
#SBATCH --job-name=killed
#SBATCH --ntasks=1
#SBATCH --output=killed-%j.out

echo "before the kill"
kill -KILL $$
echo "never printed"
