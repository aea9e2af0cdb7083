#!/bin/bash
# -D: the job runs in results/ and its relative output file lands there.
# corpus: mkdir=results
#SBATCH --job-name=chdir
#SBATCH --ntasks=1
#SBATCH --chdir=results
#SBATCH --output=out-%j.txt

echo "PWD=$PWD"
echo "SLURM_SUBMIT_DIR=$SLURM_SUBMIT_DIR"
echo "data" > data.txt
srun bash -c 'echo "step PWD=$PWD"'
