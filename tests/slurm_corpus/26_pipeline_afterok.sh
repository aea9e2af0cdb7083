#!/bin/bash
# Second stage: submitted with -d afterok:<stage 1's job id>.
# corpus: depends=afterok:25_pipeline_stage1
#SBATCH --job-name=stage2
#SBATCH --ntasks=1
#SBATCH --output=stage2-%j.out

echo "stage 2 runs after stage 1"
echo "SLURM_JOB_DEPENDENCY=${SLURM_JOB_DEPENDENCY-unset}"
