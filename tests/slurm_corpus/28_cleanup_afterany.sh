#!/bin/bash
# Cleanup after a whole array, whatever its elements' states (-d afterany).
# corpus: depends=afterany:14_array_one_fails
#SBATCH --job-name=cleanup
#SBATCH --ntasks=1
#SBATCH --output=cleanup-%j.out

echo "cleaning up after the array"
