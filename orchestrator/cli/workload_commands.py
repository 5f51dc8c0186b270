"""`matrix workloads` (what workloads_view.py prints) and `matrix new-workload` (what
scaffold/ writes)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.options import console


def workloads(
    name: Annotated[str | None, typer.Argument(
        help="A workload: list its parameters.", show_default=False)] = None,
    matrix: Annotated[Path | None, typer.Option(
        "--matrix", "-m", help="Also this matrix file's own workloads (path:, command:); "
        "with NAME, what the matrix's entry of it sets (epochs, timeout, values).",
        show_default=False, exists=True, dir_okay=False)] = None,
) -> None:
    """List the workloads a matrix can name (built-in, installed packages', and with
    --matrix that matrix's own folders), with where each comes from and what it counts;
    with NAME, its parameters (type, default, allowed values, meaning) and presets, and
    with --matrix the epochs, timeout and values that matrix's entry gives its cells."""
    from orchestrator.cli.workloads_view import show_workload, show_workloads

    if name is None:
        show_workloads(console(), matrix)
    else:
        show_workload(name, console(), matrix)


def new_workload(
    name: Annotated[str, typer.Argument(
        help="The workload's name (ASCII letters, digits and _, at most 80).",
        show_default=False)],
    output: Annotated[Path, typer.Option("--output", "-o", help="The folder to create.")],
    package: Annotated[bool, typer.Option(
        help="A distribution to install: pyproject.toml, the workload as a package.")] = False,
) -> None:
    """Make a workload folder to start from: a small PyTorch model on synthetic data with its
    parameters, a tiny preset, a FLOP model, a test and example.yaml, which runs as made:
    `matrix run DIR/example.yaml` (with --package, once `pip install -e DIR` is done)."""
    from orchestrator.scaffold import new_workload as scaffold

    written = scaffold(name, output, package)
    typer.echo(f"{output}: {', '.join(str(p.relative_to(output)) for p in written)}\n"
               + (f"install it: pip install -e {output}\n" if package else "")
               + f"run it: matrix run {output / 'example.yaml'}")
