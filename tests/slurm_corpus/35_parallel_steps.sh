#!/bin/bash
# Two one-task steps at once in a two-task allocation, then wait.
#SBATCH --job-name=parsteps
#SBATCH --nodes=1
#SBATCH --ntasks=2
#SBATCH --output=parsteps-%j.out

for part in a b; do
  srun --exact -n 1 bash -c "echo part $part: SLURM_STEP_NUM_TASKS=\$SLURM_STEP_NUM_TASKS" > "part-$part.log" &
done
wait
cat part-a.log part-b.log
