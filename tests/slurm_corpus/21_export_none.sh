#!/bin/bash
# --export=NONE: a clean environment for the job (CORPUS_MARK is set in the
# submitting shell by the corpus runner); what do its steps get?
#SBATCH --job-name=clean
#SBATCH --ntasks=1
#SBATCH --export=NONE
#SBATCH --output=clean-%j.out

echo "CORPUS_MARK=${CORPUS_MARK-unset}"
echo "SLURM_EXPORT_ENV=${SLURM_EXPORT_ENV-unset}"
echo "PATH set: ${PATH:+yes}"
srun /bin/bash -c 'echo "step CORPUS_MARK=${CORPUS_MARK-unset} SLURM_EXPORT_ENV=${SLURM_EXPORT_ENV-unset}"'
