#!/bin/bash
# A step that asks for more tasks than the job has.
#SBATCH --job-name=toobig
#SBATCH --nodes=1
#SBATCH --ntasks=2
#SBATCH --output=toobig-%j.out

srun -n 4 true
echo "srun exit status $?"
