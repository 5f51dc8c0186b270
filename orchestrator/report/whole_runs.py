"""The report's tables of scripts timed as a whole: a command workload whose script does not
report its steps (no `matrix_bench` client) gets rows with `timing: whole`, its wall
time, memory and GPU telemetry, and no throughput (docs/results-schema.md). They are shown
apart from the throughput tables, never ranked or plotted with them: a script's wall time
includes whatever it does besides training (start-up, data loading, evaluation, saving),
so it compares only with the same script's other configurations. A configuration whose
repeats' wall times spread beyond NOISY_SPREAD (report/analysis.py) is flagged `noisy`, as
a throughput table's is: its median is no steadier than its throughput would be.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.report.analysis import NOISY_SPREAD
from orchestrator.report.markdown import (
    Figure,
    fmt,
    fmt_mib,
    fmt_pct,
    fmt_seconds,
    fmt_usd,
    table,
)
from orchestrator.results.columns import param_name, setting_columns
from orchestrator.results.records import Flag

if TYPE_CHECKING:
    import pandas as pd

CAPTION = ("Timed as a whole: the script does not report its steps (no `matrix_bench` "
           "client), so these rows have no throughput. Wall s is the script's run from start "
           "to exit (medians over repeats, n = repeats), spread = (max - min) / median of it, "
           f"noisy above {NOISY_SPREAD:.0%}; memory and GPU figures cover the whole run. Add "
           "the client (README: your own training code) to measure items per second.")


def whole_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of cells that ended ok and were timed as a whole."""
    if "timing" not in df or not len(df):
        return df.iloc[0:0]
    return df[(df["status"] == "ok") & (df["timing"] == "whole")]


def whole_run_sections(df: pd.DataFrame) -> list[str]:
    """One section per workload with rows timed as a whole: one line per configuration."""
    rows = whole_rows(df)
    if rows.empty:
        return []
    lines: list[str] = []
    for workload, group in rows.groupby("workload", sort=True):
        lines += _section(str(workload), group.dropna(axis=1, how="all"))
    return lines


def _section(workload: str, group: pd.DataFrame) -> list[str]:
    params = setting_columns(group.columns)
    varying = [c for c in params if group[c].astype(str).nunique() > 1]
    optional = [(column, header, render) for column, header, render in (
        ("nvml_used_peak_bytes", "GPU mem MiB", fmt_mib),
        ("gpu_util_mean_pct", "GPU util %", lambda v: Figure(f"{v:.0f}", v)),
        ("gpu_power_mean_w", "GPU W", lambda v: Figure(f"{v:.0f}", v)),
        ("epoch_cost_usd", "$/run", fmt_usd)) if column in group]
    headers = ["hardware", "stack", *(param_name(c) for c in varying), "n",
               "wall s", "spread", "host RSS MiB", *(h for _, h, _ in optional), "flags"]
    body = []
    for _, config in group.groupby("config_id", sort=False):
        first = config.iloc[0]
        wall = config["epoch_s"].astype(float)
        median = float(wall.median())
        spread = float((wall.max() - wall.min()) / median) if median else 0.0
        marks = config["flags"].fillna("") if "flags" in config else []
        repeats = config["cell_id"].nunique()
        flags = sorted(set(filter(None, ",".join(marks).split(",")))
                       | ({Flag.NOISY.value} if noisy(spread, repeats) else set()))
        body.append([first["hardware"], first["stack"], *(fmt(first[c]) for c in varying),
                     repeats, fmt_seconds(median), fmt_pct(spread),
                     fmt_mib(config["host_rss_peak_bytes"].median()),
                     *(render(float(config[c].median())) if config[c].notna().any() else ""
                       for c, _, render in optional),
                     ",".join(flags)])
    body.sort(key=lambda cells: [str(c) for c in cells])
    fixed = ", ".join(f"{param_name(c)}={fmt(group[c].iloc[0])}"
                      for c in sorted(set(params) - set(varying)))
    return [f"## {workload} (timed as a whole)", "", CAPTION, "",
            *([f"Fixed settings: {fixed}.", ""] if fixed else []),
            *table(headers, body), ""]


def noisy(spread: float, repeats: int) -> bool:
    """Whether a script's wall times, over `repeats`, spread too far for their median to be
    its figure: the throughput tables' rule (report/analysis.py: NOISY_SPREAD)."""
    return repeats > 1 and spread > NOISY_SPREAD
