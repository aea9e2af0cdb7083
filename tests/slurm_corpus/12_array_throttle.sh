#!/bin/bash
# A stepped array with at most two elements running at once (%2).
#SBATCH --job-name=throttle
#SBATCH --array=1-7:2%2
#SBATCH --ntasks=1
#SBATCH --output=throttle-%A-%a.out

echo "SLURM_ARRAY_TASK_ID=$SLURM_ARRAY_TASK_ID"
echo "SLURM_ARRAY_TASK_MIN=$SLURM_ARRAY_TASK_MIN"
echo "SLURM_ARRAY_TASK_MAX=$SLURM_ARRAY_TASK_MAX"
echo "SLURM_ARRAY_TASK_STEP=$SLURM_ARRAY_TASK_STEP"
echo "SLURM_ARRAY_TASK_COUNT=$SLURM_ARRAY_TASK_COUNT"
running=$(squeue -h -r -j "$SLURM_ARRAY_JOB_ID" -t RUNNING | wc -l)
echo "at most two running: $([ "$running" -le 2 ] && echo yes || echo "no ($running)")"
sleep 1
