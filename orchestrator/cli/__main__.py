"""`python -m orchestrator.cli ...`: the `matrix` command."""

from orchestrator.cli.app import main

main()
