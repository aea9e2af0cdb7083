# sbatch --wrap: no script file, the command line is the job.
# corpus: no-script
# corpus: args=--ntasks=1 --output=wrap-%j.out --wrap='echo wrapped; echo SLURM_JOB_NAME=$SLURM_JOB_NAME'
