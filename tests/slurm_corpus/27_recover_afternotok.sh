#!/bin/bash
# Runs only because 15 failed (-d afternotok).
# corpus: depends=afternotok:15_exit_code
#SBATCH --job-name=recover
#SBATCH --ntasks=1
#SBATCH --output=recover-%j.out

echo "recovering from a failed job"
