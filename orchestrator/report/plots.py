"""The report's figures (matplotlib, Agg, PNG 800 px wide, 450 px high or taller where the
configurations need the room), one set per workload.

Each function returns a Figure or None when its data is absent, so a test can read the
plotted values back from the figure's artists before it is saved.
- time per epoch, one bar per configuration: timed steps, the rest of the epoch, the range;
- memory per configuration (the framework's peak where measured, else the process's RSS);
  in both, a flagged configuration's bar is overlaid red and its label names its flags, as
  the table flags the row: an impossible row is never the plain fastest-looking bar;
- speedup against GPUs or CPU workers, with the ideal line, implausible points marked;
- throughput against cost per million items;
- `matrix advise`'s job: time to train against cost, with intervals and the Pareto front.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.report.analysis import config_labels, twin_keys, with_machine
from orchestrator.report.markdown import MIB, fmt
from orchestrator.results.columns import param_name, setting_columns
from orchestrator.results.run_directory import atomic_write
from orchestrator.worker.units import plural
from orchestrator.workload_scope import reported

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from orchestrator.report.advise import Advice

SIZE_IN = (8.0, 4.5)
DPI = 100  # 800 x 450 px
ROW_IN = 0.3  # a configuration's row in the per-configuration figures, readable at 9 pt


def _figure(title: str, xlabel: str, ylabel: str, rows: int = 0) -> tuple[Figure, Any]:
    """An 800 px wide figure: 450 px high, or taller where `rows` labels need the room."""
    from matplotlib.figure import Figure

    height = max(SIZE_IN[1], 1.5 + ROW_IN * rows)
    figure = Figure(figsize=(SIZE_IN[0], height), dpi=DPI, layout="constrained")
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
    """One bar per configuration: its median timed steps, the rest of its median epoch
    stacked on them (warm-up, evaluation, whatever else the epoch does), and the range of
    its samples' whole epochs as an error bar."""
    if summary.empty:
        return None
    ordered = summary.assign(_label=labels(summary)).sort_values("_label", kind="stable")
    names = ordered["_label"].tolist()
    figure, axes = _figure(f"{workload}: time per epoch",
                           "seconds per epoch (median of each configuration's epochs)", "",
                           rows=len(names))
    y = list(range(len(names)))
    timed = ordered["train_s"].astype(float)
    whole = ordered["epoch_s"].astype(float).fillna(timed) if "epoch_s" in ordered else timed
    rest = (whole - timed).clip(lower=0)
    bars = axes.barh(y, timed.tolist(), label="timed steps")
    if rest.any():  # records without warm-up or evaluation: nothing to stack
        axes.barh(y, rest.tolist(), left=timed.tolist(), alpha=0.35, hatch="//",
                  color=bars.patches[0].get_facecolor(),
                  label="warm-up, evaluation, rest of the epoch")
    if "epoch_s_min" in ordered and ordered["epoch_s_min"].notna().any():
        low = (whole - ordered["epoch_s_min"].astype(float).fillna(whole)).clip(lower=0)
        high = (ordered["epoch_s_max"].astype(float).fillna(whole) - whole).clip(lower=0)
        axes.errorbar(whole.tolist(), y, xerr=[low.tolist(), high.tolist()], fmt="none",
                      ecolor="black", capsize=3, label="fastest to slowest epoch")
    _mark_flagged(axes, whole.fillna(0).tolist(), ordered, names)
    axes.invert_yaxis()  # the first configuration on top, as the tables list them
    axes.grid(axis="x", alpha=0.3)
    axes.legend(fontsize=9, loc="lower right")
    return figure


def memory(summary: pd.DataFrame, workload: str) -> Figure | None:
    """One bar per configuration: the framework's own peak (what the model used) where it
    was measured, else the process's peak resident memory, which says so: it holds the
    interpreter and the framework's runtime as much as the model."""
    gpu = summary["mem_bytes"].notna().any()
    column = "mem_bytes" if gpu else "rss_bytes"
    if summary.empty or summary[column].isna().all():
        return None
    ordered = summary.assign(_label=labels(summary)).sort_values("_label", kind="stable")
    what = ("framework's allocated memory, peak (MiB)" if gpu else
            "process resident memory, peak (MiB): runtime included")
    figure, axes = _figure(f"{workload}: memory per configuration", what, "",
                           rows=len(ordered))
    y = list(range(len(ordered)))
    widths = (ordered[column] / MIB).fillna(0).to_list()
    axes.barh(y, widths)
    _mark_flagged(axes, widths, ordered, ordered["_label"].tolist())
    axes.invert_yaxis()
    axes.grid(axis="x", alpha=0.3)
    if axes.get_legend_handles_labels()[0]:  # the flagged key
        axes.legend(fontsize=9, loc="lower right")
    return figure


FLAGGED_COLOUR = "tab:red"


def _mark_flagged(axes: Any, widths: list[float], ordered: pd.DataFrame,
                  names: list[str]) -> None:
    """The configurations' names as the y labels; a flagged configuration's bar overlaid
    with red hatching and its label ending in its flags, red where a figure is impossible:
    the figure flags the row its table flags, and the table's line under the row says why."""
    flags = ordered["flags"].fillna("").astype(str).tolist() if "flags" in ordered \
        else [""] * len(names)
    axes.set_yticks(range(len(names)), [f"{name} [{flag}]" if flag else name
                                        for name, flag in zip(names, flags, strict=True)])
    flagged = [index for index, flag in enumerate(flags) if flag]
    if flagged:
        axes.barh(flagged, [widths[i] for i in flagged], fill=False, hatch="xx",
                  edgecolor=FLAGGED_COLOUR, label="flagged: the table says why")
    for index in flagged:
        if "implausible" in flags[index]:
            axes.get_yticklabels()[index].set_color(FLAGGED_COLOUR)


def scaling(summary: pd.DataFrame, workload: str) -> Figure | None:
    """Speedup against the devices a configuration trains on (GPUs, or CPU workers), one
    line per set of twins named by what tells them apart, with the ideal line. A point the
    judge found implausible is marked red and named so: never drawn as a plain result."""
    scaled = summary[summary["speedup_ratio"].notna()] if "speedup_ratio" in summary else None
    if scaled is None or scaled.empty:
        return None
    on_gpus = int(scaled["gpu_model"].notna().sum()) if "gpu_model" in scaled else 0
    what, one = (("GPUs", "GPU") if on_gpus == len(scaled) else
                 ("CPU workers", "worker") if on_gpus == 0 else
                 ("devices (GPUs or CPU workers)", "device"))
    figure, axes = _figure(f"{workload}: scaling with {what}", what, f"speedup (x one {one})")
    most = int(scaled["devices"].max())
    axes.plot([1, most], [1, most], linestyle="--", color="grey", label="ideal")
    devices = reported().device_param_columns(scaled["workload"].dropna().unique())
    varying = [c for c in ("stack", *setting_columns(scaled.columns))
               if c not in devices and scaled[c].nunique(dropna=False) > 1]
    scaled = with_machine(scaled)
    for _, group in scaled.groupby(twin_keys(scaled), sort=True, dropna=False):
        group = group.sort_values("devices")
        first = group.iloc[0]
        label = " ".join([str(first["instance_type"] or first["gpu_model"] or first["hardware"]),
                          *(f"{param_name(c)}={fmt(first[c])}" for c in varying)])
        axes.plot(group["devices"], group["speedup_ratio"], marker="o", label=label)
    bad = scaled[scaled["flags"].fillna("").str.contains("implausible")]
    if len(bad):
        axes.scatter(bad["devices"], bad["speedup_ratio"], marker="x", s=80, color="red",
                     zorder=3, label="implausible (the table says why)")
        for x, y in zip(bad["devices"], bad["speedup_ratio"], strict=True):
            axes.annotate("implausible", (x, y), fontsize=8, color="red", xytext=(-8, -4),
                          textcoords="offset points", ha="right", va="top")
    from matplotlib.ticker import MaxNLocator

    axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # devices are whole
    axes.legend(fontsize=8, loc="upper left")
    return figure


def cost(summary: pd.DataFrame, workload: str, unit: str) -> Figure | None:
    priced = summary[summary["usd_per_million_items"].notna()] \
        if "usd_per_million_items" in summary else None
    if priced is None or priced.empty:
        return None
    figure, axes = _figure(f"{workload}: throughput against cost",
                           f"$ per million {plural(unit)}", f"{plural(unit)} per second")
    flags = priced["flags"].fillna("").astype(str)
    implausible = flags.str.contains("implausible", regex=False)
    axes.scatter(priced["usd_per_million_items"], priced["items_per_s"],
                 c=["red" if bad else "tab:blue" for bad in implausible])
    for name, x, y, flag in zip(labels(priced), priced["usd_per_million_items"],
                                priced["items_per_s"], flags, strict=True):
        axes.annotate(name + (f" [{flag}]" if flag else ""), (x, y), fontsize=7,
                      xytext=(3, 3), textcoords="offset points",
                      color=FLAGGED_COLOUR if "implausible" in flag else "black")
    return figure


LIMIT_IN_VIEW = 3  # a deadline or budget past 3x the largest point is named, not drawn


def job_figure(found: Advice) -> Figure | None:
    """`matrix advise`'s answer: each priced configuration's time to train against its cost
    for the job, with their 95% intervals as bars, the Pareto front drawn, the deadline and
    the budget as dashed lines; the job in the title. None where nothing has a price."""
    priced = [p for p in found.projections if p.cost_usd is not None]
    if not priced:
        return None
    job = found.job
    figure, axes = _figure(f"{found.workload}: {job.items:,.0f} {plural(found.unit)}, time "
                           "to train against cost", "hours", "US$", rows=0)
    for p in priced:
        hours, usd = p.time_s / 3600, float(p.cost_usd or 0)
        xerr = ([[hours - p.time_range_s[0] / 3600], [p.time_range_s[1] / 3600 - hours]]
                if p.time_range_s else None)
        yerr = ([[usd - p.cost_range_usd[0]], [p.cost_range_usd[1] - usd]]
                if p.cost_range_usd else None)
        axes.errorbar([hours], [usd], xerr=xerr, yerr=yerr, fmt="o", capsize=3,
                      color="tab:orange" if "front" in p.marks else "tab:blue")
        axes.annotate(p.label, (hours, usd), fontsize=7, xytext=(4, 4),
                      textcoords="offset points")
    front = sorted((p for p in priced if "front" in p.marks), key=lambda p: p.time_s)
    axes.plot([p.time_s / 3600 for p in front], [p.cost_usd for p in front], color="tab:orange",
              linestyle="-", label="Pareto front")
    # a limit far past every point is named, not drawn: drawn, it would squash them
    top_hours = max((p.time_range_s or (0, p.time_s))[1] for p in priced) / 3600
    top_usd = max((p.cost_range_usd or (0, p.cost_usd or 0))[1] for p in priced)
    if job.deadline_s is not None:
        hours = job.deadline_s / 3600
        if hours <= LIMIT_IN_VIEW * top_hours:
            axes.axvline(hours, color="grey", linestyle="--", label="deadline")
        else:
            axes.plot([], [], " ", label=f"deadline {hours:,.4g} h: off the chart")
    if job.budget_usd is not None:
        if job.budget_usd <= LIMIT_IN_VIEW * top_usd:
            axes.axhline(job.budget_usd, color="grey", linestyle=":", label="budget")
        else:
            axes.plot([], [], " ", label=f"budget ${job.budget_usd:,.2f}: off the chart")
    axes.legend(fontsize=8)
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
