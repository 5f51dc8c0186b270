"""The report's figures (matplotlib, Agg, PNG at 800 x 450 px), one set per workload.

Each function returns a Figure or None when its data is absent, so a test can read the
plotted values back from the figure's artists before it is saved.
- time per epoch per hardware, one bar per batch size (seed 002's figures);
- memory per configuration (GPU peak allocated where measured, else host RSS);
- speedup against GPUs, with the ideal line;
- throughput against cost per million items.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.report.analysis import config_labels, twin_keys
from orchestrator.report.markdown import MIB, fmt
from orchestrator.results.store import atomic_write
from orchestrator.workload_registry import device_param_columns

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

SIZE_IN = (8.0, 4.5)
DPI = 100  # 800 x 450 px


def _figure(title: str, xlabel: str, ylabel: str) -> tuple[Figure, Any]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=SIZE_IN, dpi=DPI, layout="constrained")
    axes = figure.subplots()
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(axis="y", alpha=0.3)
    return figure, axes


def labels(summary: pd.DataFrame) -> list[str]:
    """The configurations' names (analysis.config_labels), in the summary's order."""
    names = config_labels(summary)
    return [names[str(config)] for config in summary["config_id"]]


def epoch_time(summary: pd.DataFrame, workload: str) -> Figure | None:
    import numpy as np

    if summary.empty:
        return None
    figure, axes = _figure(f"{workload}: time per epoch", "hardware", "seconds per epoch")
    machines = sorted(summary["hardware"].unique())
    x = np.arange(len(machines))
    batches = sorted(summary["param.batch_size"].unique()) \
        if "param.batch_size" in summary else [None]
    width = 0.8 / len(batches)
    labelled = False
    for i, batch in enumerate(batches):
        rows = summary if batch is None else summary[summary["param.batch_size"] == batch]
        timed = _medians(rows, machines, "train_s")
        whole = _medians(rows, machines, "epoch_s")
        rest = [max(w - t, 0.0) if w == w else 0.0 for w, t in zip(whole, timed, strict=True)]
        where = x + i * width - 0.4 + width / 2
        name = "timed steps" if batch is None else f"batch {fmt(batch)}: timed steps"
        bars = axes.bar(where, timed, width, label=name)
        if any(rest):  # records without warm-up or evaluation: nothing to stack
            stacked = axes.bar(where, rest, width, bottom=timed, alpha=0.35, hatch="//",
                               color=bars.patches[0].get_facecolor(),
                               label=None if labelled else "warm-up, evaluation, rest")
            labelled = True
            for patch in stacked.patches:  # a bar's baseline is sticky: it would pin the top
                patch.sticky_edges.y.clear()
    axes.set_xticks(x, machines, rotation=20, ha="right")
    axes.legend(title="median over configurations" if batches != [None] else None,
                fontsize=8)
    return figure


def _medians(rows: pd.DataFrame, machines: list[str], column: str) -> list[float]:
    """Per machine, the median of `column` over its configurations (0 where it has none)."""
    if column not in rows:
        return [float("nan")] * len(machines)
    return [float(rows[rows["hardware"] == m][column].median())
            if (rows["hardware"] == m).any() else 0.0 for m in machines]


def memory(summary: pd.DataFrame, workload: str) -> Figure | None:
    gpu = summary["mem_bytes"].notna().any()
    column = "mem_bytes" if gpu else "rss_bytes"
    if summary.empty or summary[column].isna().all():
        return None
    what = "GPU memory allocated, peak" if gpu else "host RSS, peak"
    figure, axes = _figure(f"{workload}: memory per configuration", "configuration",
                           f"{what} (MiB)")
    names = labels(summary)
    axes.bar(range(len(names)), (summary[column] / MIB).fillna(0).to_list())
    axes.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7)
    return figure


def scaling(summary: pd.DataFrame, workload: str) -> Figure | None:
    scaled = summary[summary["speedup_ratio"].notna()] if "speedup_ratio" in summary else None
    if scaled is None or scaled.empty:
        return None
    figure, axes = _figure(f"{workload}: scaling with GPUs", "GPUs", "speedup (x one GPU)")
    most = int(scaled["devices"].max())
    axes.plot([1, most], [1, most], linestyle="--", color="grey", label="ideal")
    devices = device_param_columns(scaled["workload"].dropna().unique())
    params = [c for c in scaled.columns if c.startswith("param.") and c not in devices]
    for _, group in scaled.groupby(twin_keys(scaled), sort=True, dropna=False):
        group = group.sort_values("devices")
        first = group.iloc[0]
        label = " ".join([str(first["instance_type"] or first["gpu_model"]),
                          *(f"{c.removeprefix('param.')}={first[c]}" for c in params)])
        axes.plot(group["devices"], group["speedup_ratio"], marker="o", label=label)
    axes.legend()
    return figure


def cost(summary: pd.DataFrame, workload: str, unit: str) -> Figure | None:
    priced = summary[summary["usd_per_million_items"].notna()] \
        if "usd_per_million_items" in summary else None
    if priced is None or priced.empty:
        return None
    figure, axes = _figure(f"{workload}: throughput against cost",
                           f"$ per million {unit}s", f"{unit}s per second")
    implausible = priced["flags"].str.contains("implausible", na=False)
    axes.scatter(priced["usd_per_million_items"], priced["items_per_s"],
                 c=["red" if bad else "tab:blue" for bad in implausible])
    for name, x, y, bad in zip(labels(priced), priced["usd_per_million_items"],
                               priced["items_per_s"], implausible, strict=True):
        axes.annotate(name + (" (implausible)" if bad else ""), (x, y), fontsize=7,
                      xytext=(3, 3), textcoords="offset points")
    return figure


def workload_figures(summary: pd.DataFrame, workload: str, unit: str
                     ) -> dict[str, Figure]:
    """kind -> figure, for the kinds whose data this workload has."""
    made = {"epoch-time": epoch_time(summary, workload), "memory": memory(summary, workload),
            "scaling": scaling(summary, workload), "cost": cost(summary, workload, unit)}
    return {kind: figure for kind, figure in made.items() if figure is not None}


def save(figure: Figure, path: Path) -> Path:
    """The figure as PNG, replacing `path` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    figure.savefig(buffer, dpi=DPI, format="png")
    atomic_write(path, buffer.getvalue())
    return path
