#!/bin/bash
# Hello world: the smallest job a site's quick-start guide shows, printing
# the environment Slurm gives the batch script.
#SBATCH --job-name=hello
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --time=00:05:00
#SBATCH --output=%x-%j.out

echo "Hello from the batch script"
env | grep ^SLURM_ | sort
