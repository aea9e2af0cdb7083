#!/bin/bash
# First stage of a pipeline; 26 runs after it succeeds.
#SBATCH --job-name=stage1
#SBATCH --ntasks=1
#SBATCH --output=stage1-%j.out

echo "stage 1 working"
sleep 2
echo "stage 1 done"
