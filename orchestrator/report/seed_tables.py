"""Tables in the shapes the seed benchmarks published, so a reader can set them beside the
originals: each workload declares its own in `workloads/<name>/views.py` (`VIEWS`, functions
of its configuration summary and item unit), built from the helpers here. The scaling table
of seed 003 (devices x batch with time per epoch, throughput, speedup and parallel
efficiency) applies to any workload run on several device counts, and is what a workload
without views gets. A row judged implausible (judge.py) has the reason on its own line
under it, in these tables too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.report.markdown import Figure, flag_line, fmt, fmt_rate, fmt_seconds, table
from orchestrator.results.columns import param_column
from orchestrator.worker.units import plural
from orchestrator.worker.workload_code import optional_module
from orchestrator.workload_scope import reported

if TYPE_CHECKING:
    import pandas as pd


def scaling(summary: pd.DataFrame, unit: str) -> list[str]:
    if "speedup_ratio" not in summary:
        return []
    scaled = summary[summary["speedup_ratio"].notna()]
    if not len(scaled):
        return []
    batch = param_column("batch_size") if param_column("batch_size") in scaled else None
    order = ["devices", *([batch] if batch else [])]
    ordered = scaled.sort_values(["hardware", *order])
    rows = flagged([[where(summary, row), fmt(row["devices"]),
                     *([fmt(row[batch])] if batch else []),
                     fmt_seconds(row["train_s"]), fmt_rate(row["items_per_s"]),
                     Figure(f"{row['speedup_ratio']:.2f}", row["speedup_ratio"]),
                     Figure(f"{row['parallel_efficiency_fraction']:.0%}",
                            row["parallel_efficiency_fraction"])]
                    for _, row in ordered.iterrows()], ordered)
    headers = ["where", "devices", *(["batch"] if batch else []), "timed s", f"{plural(unit)}/s",
               "speedup", "efficiency"]
    return ["### Scaling, as seed 003 published it", "",
            "Speedup: throughput over that of the same settings on one device (GPU, or "
            "worker); efficiency: speedup / devices.", "", *table(headers, rows), ""]


View = Callable[["pd.DataFrame", str], list[str]]


def seed_views(workload: str, summary: pd.DataFrame, unit: str) -> list[str]:
    """The seed-shaped tables of `workload`: the `VIEWS` its folder's `views.py` declares,
    or the scaling table for a workload without one."""
    lines: list[str] = []
    for view in workload_views(workload):
        lines += view(summary, unit)
    return lines


def workload_views(workload: str) -> list[View]:
    package = reported().importable(workload)
    module = None if package is None else optional_module(f"{package}.views")
    if module is None:
        return [scaling]
    views: list[View] = module.VIEWS
    return views


def flagged(rows: list[list[object]], ordered: pd.DataFrame) -> list[list[object]]:
    """The table's rows (one per row of `ordered`), each flagged one followed by its reason."""
    out: list[list[object]] = []
    for cells, (_, row) in zip(rows, ordered.iterrows(), strict=True):
        out.append(cells)
        if row.get("judgement"):
            out.append(flag_line(str(row["judgement"]), len(cells)))
    return out


def varies(summary: pd.DataFrame, prefix: str) -> bool:
    return any(summary[c].astype(str).nunique() > 1 for c in summary.columns
               if c.startswith(prefix))


def where(summary: pd.DataFrame, row: pd.Series) -> str:
    several_stacks = summary["stack"].nunique() > 1
    return f"{row['hardware']}/{row['stack']}" if several_stacks else str(row["hardware"])
