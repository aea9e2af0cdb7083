#!/bin/bash
# Steps on parts of a two-node, four-task allocation.
#SBATCH --job-name=subsets
#SBATCH --nodes=2
#SBATCH --ntasks=4
#SBATCH --output=subsets-%j.out

echo "--- one task"
srun -N 1 -n 1 bash -c 'echo "$SLURM_STEP_NODELIST $SLURM_STEP_NUM_TASKS"'
echo "--- one task per node, -n 2"
srun -n 2 --ntasks-per-node=1 bash -c 'echo "$SLURMD_NODENAME $SLURM_PROCID of $SLURM_NTASKS"' | sort
echo "--- --ntasks-per-node=1 alone (the job's -n 4 still applies)"
srun --ntasks-per-node=1 bash -c 'echo "$SLURMD_NODENAME $SLURM_PROCID of $SLURM_NTASKS"' | sort
echo "--- on the second node (-r 1)"
srun -r 1 -N 1 -n 1 bash -c 'echo "node index $SLURM_NODEID, $SLURMD_NODENAME"'
echo "--- all four"
srun bash -c 'echo "$SLURMD_NODENAME $SLURM_PROCID"' | sort
