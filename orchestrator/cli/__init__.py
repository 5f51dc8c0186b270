"""The `matrix` command line, on top of everything else: the typer app (app.py), its thin
commands by theme (*_commands.py) and what they print (*_view.py). Nothing below cli/
imports it (docs/ARCHITECTURE.md: the layout follows a cell)."""

from orchestrator.cli.app import app, main

__all__ = ["app", "main"]
