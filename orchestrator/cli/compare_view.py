"""`matrix compare` as a table: one row per configuration, the verdicts coloured, a count."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from orchestrator.report.compare import (
    Comparison,
    Verdict,
    implausible_configs,
    repeat_throughputs,
)
from orchestrator.report.markdown import fmt_rate

if TYPE_CHECKING:
    import pandas as pd

STYLE = {Verdict.REGRESSION: "red", Verdict.IMPROVEMENT: "green", Verdict.EQUIVALENT: "",
         Verdict.INCONCLUSIVE: "yellow", Verdict.THIN: "yellow"}


def _share(fraction: float | None) -> str:
    """A share of the ceiling in at most five characters: the report has the figure."""
    return "-" if fraction is None else ">999%" if fraction >= 9.995 else f"{fraction:.0%}"


def show_comparison(found: list[Comparison], base: pd.DataFrame, new: pd.DataFrame,
                    threshold: float, console: Console) -> int:
    """Print the comparison; returns the number of regressions marked. Fits 80 columns: the
    configuration folds and the verdict wraps, never cut; figures keep four significant
    digits (so a row of large rates and shares above the ceiling still fits)."""
    ceilings = any(item.new_ceiling is not None or item.base_ceiling is not None
                   for item in found)
    console.print("NEW / BASE: each configuration's median throughput (items/s) over its\n"
                  f"repeats (n: base/new); a change beyond {threshold:.0%} whose 95% interval "
                  "excludes 1\nis a regression or an improvement"
                  + ("; % ceil: base/new FLOP/s as a share of\ntheir node's measured ceiling"
                     if ceilings else ""), highlight=False)
    table = Table(box=None, padding=(0, 1, 0, 0), pad_edge=False)
    table.add_column("configuration", overflow="fold", min_width=10)
    for column in ("n", "base", "new", "ratio", "95% CI", *["% ceil"] * ceilings):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("verdict", justify="right")  # "too few repeats" may take two lines
    for item in found:
        style = STYLE[item.verdict]
        shares = [f"{_share(item.base_ceiling)}/{_share(item.new_ceiling)}"] * ceilings
        table.add_row(item.label, f"{item.base_repeats}/{item.new_repeats}",
                      fmt_rate(item.base_median), fmt_rate(item.new_median), f"{item.ratio:.3f}",
                      f"{item.low:.3f}-{item.high:.3f}", *shares,
                      f"[{style}]{item.verdict.value}[/]" if style else item.verdict.value)
    console.print(table)
    for item in found:  # what changed besides the figures: the user's own code
        if item.code_change:
            console.print(f"code changed: {item.label}: {item.code_change[0]} -> "
                          f"{item.code_change[1]}", highlight=False, markup=False)
    counts = Counter(item.verdict for item in found)
    flagged = implausible_configs(base) | implausible_configs(new)
    only = (set(repeat_throughputs(base)) ^ set(repeat_throughputs(new))) - set(flagged)
    console.print(", ".join(f"{counts[v]} {v.value}" for v in Verdict)
                  + f";\n{len(only)} configuration(s) with ok samples in one run only")
    from orchestrator.report.analysis import config_labels  # heavy: matrix --help skips it

    labels = {**config_labels(base), **config_labels(new)}
    for config_id, reason in sorted(flagged.items()):  # never compared: say why, once each
        console.print(f"left out, judged implausible: {labels.get(config_id, config_id)}: "
                      f"{reason}", highlight=False, markup=False)
    return counts[Verdict.REGRESSION]
