"""The report's tables for `transformer_ft` in the shapes its seed published: seed 004's
precision x device iterations/s, and the scaling table of seed 003."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.report.markdown import flag_line, fmt_metric, table
from orchestrator.report.seed_tables import scaling, varies

if TYPE_CHECKING:
    import pandas as pd


def seed_004(summary: pd.DataFrame, unit: str) -> list[str]:
    if "param.precision" not in summary or "metric.train_iters_per_s" not in summary:
        return []
    if varies(summary.drop(columns=["param.precision"]), "param."):
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


VIEWS = [seed_004, scaling]
