#!/bin/bash
# A job that looks at itself with squeue and sacct, as monitoring wrappers do.
#SBATCH --job-name=selfcheck
#SBATCH --ntasks=1
#SBATCH --time=00:05:00
#SBATCH --output=selfcheck-%j.out

echo "squeue: $(squeue -h -j "$SLURM_JOB_ID" -o '%j %T %D %C %l')"
echo "sacct: $(sacct -n -P -X -j "$SLURM_JOB_ID" --format=JobName,State,AllocCPUS)"
