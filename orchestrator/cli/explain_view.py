"""`matrix explain RUN...`: the command, and its lines (one per change of a factor's level,
folded within the terminal's width) or JSON. The analysis is report/explain.py."""

from __future__ import annotations

import json
import sys
import textwrap
from dataclasses import asdict
from typing import Annotated

import typer

from orchestrator.cli.options import Db


def explain_command(
    runs: Annotated[list[str] | None, typer.Argument(
        help="Run directories (or s3://...) to read as one factorial experiment (default: "
             "every run in the results store).", show_default=False)] = None,
    workload: Annotated[str | None, typer.Option(
        help="The workload, where the runs hold several.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Every effect as JSON.")] = False,
    region: Annotated[str | None, typer.Option(help="The bucket's region, for s3://.")
                      ] = None,
    db: Db = None,
) -> None:
    """Which factor made the difference: for each factor that varies (hardware, stack, each
    parameter), its effect on throughput across configurations that differ in it alone,
    the median ratio with a 95% interval; largest first, per level where it depends on
    another factor."""
    from rich.console import Console

    from orchestrator.cli.advise_view import measured
    from orchestrator.report.explain import explain

    found = explain(measured(runs, db, region, workload), workload)
    if as_json:
        sys.stdout.write(json.dumps({
            "workload": found.workload, "effects": [asdict(e) for e in found.effects],
            "nothing": found.nothing or None, "left_out": found.left_out,
            "kept_with_fewer_repeats": found.dropped}, indent=1) + "\n")
        return
    width = Console().width
    lines = [f"{found.workload}: each factor's effect on throughput, the median ratio over "
             "the configurations that differ in it alone [95% interval], largest first"]
    if found.nothing:
        lines.append(found.nothing)
    for e in found.effects:
        detail = f" ({e.detail})" if e.detail else ""
        shown = "[no interval: each side measured once]" if e.low is None or e.high is None \
            else f"[{e.low:#.3g}, {e.high:#.3g}]"
        lines.append(f"{e.factor} {e.base} -> {e.other}{detail}: x{e.ratio:#.3g} {shown} "
                     f"over {e.pairs} pair(s)")
        if e.by_level:
            lines.append("  depends on " + e.by_factor + ": " + ", ".join(
                f"x{ratio:#.3g} on {level}" for level, ratio in e.by_level))
    lines += [f"left out: {label}: {why}" for label, why in found.left_out.items()]
    lines += [f"kept with fewer repeats: {label}: {why}"
              for label, why in found.dropped.items()]
    for line in lines:
        sys.stdout.write("\n".join(textwrap.wrap(line, width, subsequent_indent="    ",
                                                 break_on_hyphens=False)) + "\n")
