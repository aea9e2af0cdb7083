#!/bin/bash
# A requeueable job that requeues itself on its first run (as a job that
# finds a bad node does); the second run sees SLURM_RESTART_COUNT.
#SBATCH --job-name=again
#SBATCH --ntasks=1
#SBATCH --requeue
#SBATCH --output=again-%j.out

echo "run with SLURM_RESTART_COUNT=${SLURM_RESTART_COUNT-unset}"
if [ -z "$SLURM_RESTART_COUNT" ]; then
  scontrol requeue "$SLURM_JOB_ID"
  sleep 60 &
  wait
fi
echo "finished"
