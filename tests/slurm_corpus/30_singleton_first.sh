#!/bin/bash
# Two jobs of one name with -d singleton: the second waits for the first.
#SBATCH --job-name=nightly
#SBATCH --dependency=singleton
#SBATCH --ntasks=1
#SBATCH --output=nightly-first-%j.out

echo "first nightly run"
sleep 3
