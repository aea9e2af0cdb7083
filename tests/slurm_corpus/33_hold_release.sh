#!/bin/bash
# Submitted held; the runner records squeue, then releases it.
# corpus: release
#SBATCH --job-name=held
#SBATCH --hold
#SBATCH --ntasks=1
#SBATCH --output=held-%j.out

echo "released and ran"
