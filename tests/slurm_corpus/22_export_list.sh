#!/bin/bash
# --export=ALL plus a variable of the job's own.
#SBATCH --job-name=exported
#SBATCH --ntasks=1
#SBATCH --export=ALL,GREETING=hello
#SBATCH --output=exported-%j.out

echo "GREETING=${GREETING-unset}"
echo "CORPUS_MARK=${CORPUS_MARK-unset}"
echo "SLURM_EXPORT_ENV=${SLURM_EXPORT_ENV-unset}"
srun bash -c 'echo "step GREETING=${GREETING-unset} CORPUS_MARK=${CORPUS_MARK-unset}"'
