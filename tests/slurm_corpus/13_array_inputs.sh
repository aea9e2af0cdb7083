#!/bin/bash
# The array index picks the input, as in a parameter sweep; the output file
# is named by the index alone.
#SBATCH -J sweep
#SBATCH --array=2,5,9
#SBATCH -n 1
#SBATCH -o sweep_%a.out

case $SLURM_ARRAY_TASK_ID in
  2) temperature=280 ;;
  5) temperature=300 ;;
  9) temperature=320 ;;
esac
echo "index $SLURM_ARRAY_TASK_ID: temperature $temperature of $SLURM_ARRAY_TASK_COUNT runs"
