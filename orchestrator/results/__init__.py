"""A run's records: their models, its journal and the run directory that keeps it
(run_directory.py). Finding a run named on the command line is cli/runs.py's; the results
store, every run in one database, is database/."""
