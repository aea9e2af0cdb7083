#!/bin/bash
# More memory than any node has: refused at submission.
# corpus: submit-fails
#SBATCH --job-name=huge
#SBATCH --ntasks=1
#SBATCH --mem=1000000M
#SBATCH --output=huge-%j.out

echo "never runs"
