#!/bin/bash
# -d afterok on a job that failed: the dependency can never be satisfied.
# The runner records what squeue says, then cancels it.
# corpus: depends=afterok:15_exit_code
# corpus: cancel-when-reason=DependencyNeverSatisfied
#SBATCH --job-name=orphan
#SBATCH --ntasks=1
#SBATCH --output=orphan-%j.out

echo "never runs"
