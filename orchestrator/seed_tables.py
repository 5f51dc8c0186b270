"""Tables in the shapes the seed benchmarks published, from a workload's configuration summary
(analysis.config_summary), so a reader can set them beside the originals.

- seed 000 (`lstm_lm`): machine, train words/s, eval words/s.
- seed 001 (`rnn_micro`): one table per depth, batch, sequence length and hidden size, one
  row per implementation, train and forward-only microseconds per example.
- seed 003 (any workload run on several device counts, GPUs or workers): devices x batch
  with time per epoch, throughput, speedup and parallel efficiency.
- seed 004 (`transformer_ft`): precision x device, iterations per second.
Seed 002's instance x GPUs x settings table is the workload table itself. A row judged
implausible (judge.py) has the reason on its own line under it, in these tables too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.markdown import flag_line, fmt, fmt_metric, fmt_rate, table

if TYPE_CHECKING:
    import pandas as pd


def seed_000(summary: pd.DataFrame, unit: str) -> list[str]:
    if _varies(summary, "param."):
        return []  # several settings per machine: the workload table says it better
    rows = _flagged([[_where(summary, row), fmt_rate(row["items_per_s"]),
                      fmt_rate(row["eval_items_per_s"])]
                     for _, row in summary.sort_values("items_per_s", ascending=False)
                     .iterrows()], summary.sort_values("items_per_s", ascending=False))
    return ["### As seed 000 published it", "",
            *table(["machine", f"train {unit}s/s", f"eval {unit}s/s"], rows), ""]


def seed_001(summary: pd.DataFrame, unit: str) -> list[str]:
    keys = [f"param.{k}" for k in ("layers", "batch_size", "seq_len", "hidden")]
    if not all(k in summary for k in [*keys, "param.rnn_impl"]):
        return []
    lines = ["### As seed 001 published it (µs per example)", ""]
    for values, group in summary.groupby(keys, sort=True):
        title = ", ".join(f"{k.removeprefix('param.')} {fmt(v)}" for k, v in zip(keys, values,
                                                                                  strict=True))
        ordered = group.sort_values(["hardware", "param.rnn_impl"])
        rows = _flagged([[_where(summary, row), row["param.rnn_impl"],
                          fmt_metric(row.get("metric.us_per_example_train")),
                          fmt_metric(row.get("metric.us_per_example_fwd"))]
                         for _, row in ordered.iterrows()], ordered)
        lines += [f"**{title}**", "", *table(["where", "rnn_impl", "train µs", "forward µs"],
                                             rows), ""]
    return lines


def seed_003(summary: pd.DataFrame, unit: str) -> list[str]:
    scaled = summary[summary["speedup_ratio"].notna()] if "speedup_ratio" in summary else []
    if not len(scaled):
        return []
    batch = "param.batch_size" if "param.batch_size" in scaled else None
    order = ["devices", *([batch] if batch else [])]
    ordered = scaled.sort_values(["hardware", *order])
    rows = _flagged([[_where(summary, row), str(row["devices"]),
                      *([fmt(row[batch])] if batch else []),
                      f"{row['train_s']:.3f}", fmt_rate(row["items_per_s"]),
                      f"{row['speedup_ratio']:.2f}", f"{row['parallel_efficiency_fraction']:.0%}"]
                     for _, row in ordered.iterrows()], ordered)
    headers = ["where", "devices", *(["batch"] if batch else []), "timed s", f"{unit}s/s",
               "speedup", "efficiency"]
    return ["### Scaling, as seed 003 published it", "",
            "Speedup: throughput over that of the same settings on one device (GPU, or "
            "worker); efficiency: speedup / devices.", "", *table(headers, rows), ""]


def seed_004(summary: pd.DataFrame, unit: str) -> list[str]:
    if "param.precision" not in summary or "metric.train_iters_per_s" not in summary:
        return []
    if _varies(summary.drop(columns=["param.precision"]), "param."):
        return []
    machines = sorted(summary["hardware"].unique())
    rows: list[list[object]] = []
    for precision, group in summary.groupby("param.precision", sort=True):
        by_machine = dict(zip(group["hardware"], group["metric.train_iters_per_s"], strict=True))
        rows.append([precision, *(fmt_metric(by_machine.get(m)) for m in machines)])
        rows += [flag_line(f"{row['hardware']}: {row['judgement']}", len(machines) + 1)
                 for _, row in group.iterrows() if row.get("judgement")]
    return ["### As seed 004 published it (iterations/s)", "",
            *table(["precision", *machines], rows), ""]


VIEWS: dict[str, list[Callable[[pd.DataFrame, str], list[str]]]] = {
    "lstm_lm": [seed_000, seed_003],
    "rnn_micro": [seed_001],
    "transformer_ft": [seed_004, seed_003],
}


def seed_views(workload: str, summary: pd.DataFrame, unit: str) -> list[str]:
    """The seed-shaped tables that apply to `workload`; the scaling one for any workload."""
    lines: list[str] = []
    for view in VIEWS.get(workload, [seed_003]):
        lines += view(summary, unit)
    return lines


def _flagged(rows: list[list[object]], ordered: pd.DataFrame) -> list[list[object]]:
    """The table's rows (one per row of `ordered`), each flagged one followed by its reason."""
    out: list[list[object]] = []
    for cells, (_, row) in zip(rows, ordered.iterrows(), strict=True):
        out.append(cells)
        if row.get("judgement"):
            out.append(flag_line(str(row["judgement"]), len(cells)))
    return out


def _varies(summary: pd.DataFrame, prefix: str) -> bool:
    return any(summary[c].astype(str).nunique() > 1 for c in summary.columns
               if c.startswith(prefix))


def _where(summary: pd.DataFrame, row: pd.Series) -> str:
    several_stacks = summary["stack"].nunique() > 1
    return f"{row['hardware']}/{row['stack']}" if several_stacks else str(row["hardware"])
