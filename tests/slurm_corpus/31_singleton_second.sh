#!/bin/bash
# The second job named nightly: starts only when 30 has ended.
# corpus: after=30_singleton_first
#SBATCH --job-name=nightly
#SBATCH --dependency=singleton
#SBATCH --ntasks=1
#SBATCH --output=nightly-second-%j.out

echo "second nightly run"
