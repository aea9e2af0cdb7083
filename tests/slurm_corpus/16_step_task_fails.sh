#!/bin/bash
# One task of a step fails; the script carries on and succeeds.
#SBATCH --job-name=taskfail
#SBATCH --nodes=1
#SBATCH --ntasks=2
#SBATCH --output=taskfail-%j.out

srun bash -c 'if [ "$SLURM_PROCID" -eq 1 ]; then exit 5; fi; echo "task $SLURM_PROCID ok"'
echo "srun exit status $?"
srun true
echo "second step exit status $?"
