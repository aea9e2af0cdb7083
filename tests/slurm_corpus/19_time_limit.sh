#!/bin/bash
# A job that runs past its one-minute limit, with a step running.
# srun and the step daemons write their messages as they come (in any order),
# and srun says "got SIGCONT" and "forcing job termination" only when the
# job's kill reaches it before its step ends.
# corpus: unordered
# corpus: drop-lines=^srun: (got SIGCONT|forcing job termination)$
#SBATCH --job-name=toolong
#SBATCH --ntasks=1
#SBATCH --time=1
#SBATCH --output=toolong-%j.out

echo "starting a long step"
srun sleep 300
# srun returns as soon as its step is killed, a moment before the job's own
# kill reaches this shell: wait here for it rather than race it.
sleep 60
echo "never printed"
