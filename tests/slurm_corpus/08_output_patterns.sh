#!/bin/bash
# Output and error files named with every common pattern.
#SBATCH --job-name=patterns
#SBATCH --ntasks=1
#SBATCH --output=out-%x-%j-%N-%u.txt
#SBATCH --error=err-%j-%%.txt

echo "to stdout"
echo "to stderr" >&2
