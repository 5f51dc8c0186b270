"""The `slurm` provider: `kind: slurm` hardware, whose cells run as Slurm array tasks.

jobs.py names a run's jobs and writes what a submission carries; commands.py speaks to
Slurm's commands; outcomes.py reads how a task ended and what status that is; group.py
submits, adopts, follows and cancels a run's jobs from the login node; task.py is what an
array task runs on its node; provider.py answers for the kind (docs/slurm.md).
"""
