#!/bin/bash
# A job array of four: each element prints its place in the array.
#SBATCH --job-name=arrayenv
#SBATCH --array=0-3
#SBATCH --ntasks=1
#SBATCH --output=array-%A_%a.out

env | grep ^SLURM_ | sort
