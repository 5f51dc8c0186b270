"""The report's tables for `rnn_micro` in the shape its seed published: seed 001's one table
per depth, batch, sequence length and hidden size, one row per implementation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.report.markdown import fmt, fmt_metric, table
from orchestrator.report.seed_tables import flagged, where

if TYPE_CHECKING:
    import pandas as pd


def seed_001(summary: pd.DataFrame, unit: str) -> list[str]:
    keys = [f"param.{k}" for k in ("layers", "batch_size", "seq_len", "hidden")]
    if not all(k in summary for k in [*keys, "param.rnn_impl"]):
        return []
    lines = ["### As seed 001 published it (µs per example)", ""]
    for values, group in summary.groupby(keys, sort=True):
        title = ", ".join(f"{k.removeprefix('param.')} {fmt(v)}" for k, v in zip(keys, values,
                                                                                  strict=True))
        ordered = group.sort_values(["hardware", "param.rnn_impl"])
        rows = flagged([[where(summary, row), row["param.rnn_impl"],
                         fmt_metric(row.get("metric.us_per_example_train")),
                         fmt_metric(row.get("metric.us_per_example_fwd"))]
                        for _, row in ordered.iterrows()], ordered)
        lines += [f"**{title}**", "", *table(["where", "rnn_impl", "train µs", "forward µs"],
                                             rows), ""]
    return lines


VIEWS = [seed_001]
