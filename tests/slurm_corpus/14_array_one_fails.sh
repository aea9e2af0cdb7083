#!/bin/bash
# One element of the array fails; sacct shows each element's own state.
#SBATCH --job-name=partial
#SBATCH --array=0-2
#SBATCH --ntasks=1
#SBATCH --output=partial-%A_%a.out
#SBATCH --error=partial-%A_%a.err

echo "element $SLURM_ARRAY_TASK_ID"
if [ "$SLURM_ARRAY_TASK_ID" -eq 1 ]; then
  echo "element 1 fails" >&2
  exit 3
fi
