#!/bin/bash
# Checkpoint on a warning: Slurm sends USR1 to the batch shell 50 s before
# the limit; the script saves its state and ends cleanly.
# Slurm's step daemon sometimes signals the shell again after it has gone,
# and says so in the output ("failed signal 18 ... No such process").
# corpus: drop-lines=_handle_signal_container: failed signal
#SBATCH --job-name=warned
#SBATCH --ntasks=1
#SBATCH --time=1
#SBATCH --signal=B:USR1@50
#SBATCH --output=warned-%j.out

checkpoint() {
  echo "caught USR1: writing a checkpoint"
  kill "$worker" 2>/dev/null
  exit 0
}
trap checkpoint USR1
echo "working"
sleep 200 &
worker=$!
wait
echo "limit reached without a warning"
