"""`matrix compare` as a table: one row per configuration, the verdicts coloured, a count."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from orchestrator.report.compare import Comparison, Verdict, repeat_throughputs

if TYPE_CHECKING:
    import pandas as pd

STYLE = {Verdict.REGRESSION: "red", Verdict.IMPROVEMENT: "green", Verdict.EQUIVALENT: "",
         Verdict.INCONCLUSIVE: "yellow", Verdict.THIN: "yellow"}


def show_comparison(found: list[Comparison], base: pd.DataFrame, new: pd.DataFrame,
                    threshold: float, console: Console) -> int:
    """Print the comparison; returns the number of regressions marked."""
    table = Table(title=f"NEW / BASE median throughput of the repeats (threshold "
                        f"{threshold:.0%})")
    for column in ("configuration", "repeats base", "repeats new", "base items/s",
                   "new items/s",
                   "ratio", "95% interval", "verdict"):
        table.add_column(column, justify="left" if column == "configuration" else "right")
    for item in found:
        style = STYLE[item.verdict]
        table.add_row(item.label, str(item.base_repeats), str(item.new_repeats),
                      f"{item.base_median:,.1f}", f"{item.new_median:,.1f}", f"{item.ratio:.3f}",
                      f"[{item.low:.3f}, {item.high:.3f}]",
                      f"[{style}]{item.verdict.value}[/]" if style else item.verdict.value)
    console.print(table)
    counts = Counter(item.verdict for item in found)
    only = set(repeat_throughputs(base)) ^ set(repeat_throughputs(new))
    console.print(", ".join(f"{counts[v]} {v.value}" for v in Verdict)
                  + f"; {len(only)} configuration(s) with ok samples in one run only")
    return counts[Verdict.REGRESSION]
