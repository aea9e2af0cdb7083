#!/bin/bash
# A failing job: its exit status is the job's exit code in sacct.
#SBATCH --job-name=fails
#SBATCH --ntasks=1
#SBATCH --output=fails-%j.out

echo "about to fail"
exit 3
