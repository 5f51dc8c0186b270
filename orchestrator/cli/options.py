"""What several commands share: their options, the console they print on, `--only`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.database.url import DEFAULT, ENV

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.plan.planner import Selector

MatrixFile = Annotated[Path, typer.Argument(help="The matrix file (YAML).", show_default=False)]
Output = Annotated[Path | None, typer.Option("--output", "-o",
                                             help="Run directory (default reports/<name>).")]
Only = Annotated[list[str] | None, typer.Option(
    "--only", help="Run a subset: KEY=V1,V2 where KEY is hardware, stack, workload or a "
                   "parameter; repeat to combine.")]
Rerun = Annotated[bool, typer.Option("--rerun", help="Redo cells that already finished ok.")]
Retry = Annotated[list[str] | None, typer.Option(
    "--retry", help="Run again the cells that ended with these statuses though nothing that "
                    "shapes them changed, e.g. --retry unsupported,oom.")]
DB_HELP = (f"The results store: sqlite:///PATH or postgresql://USER@HOST/DB (default: ${ENV}, "
           f"else {DEFAULT} under the current folder).")
Db = Annotated[str | None, typer.Option("--db", help=DB_HELP, show_default=False)]


def console() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def selectors(only: list[str] | None) -> tuple[Selector, ...]:
    from orchestrator.plan.planner import Selector

    return tuple(Selector.parse(text) for text in only or [])
