"""The report's tables for `lstm_lm` in the shapes its seed published: seed 000's machine,
train and eval words/s, and the scaling table of seed 003 (orchestrator/report/seed_tables.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.report.markdown import fmt_rate, table
from orchestrator.report.seed_tables import flagged, scaling, varies, where

if TYPE_CHECKING:
    import pandas as pd


def seed_000(summary: pd.DataFrame, unit: str) -> list[str]:
    if varies(summary, "param."):
        return []  # several settings per machine: the workload table says it better
    rows = flagged([[where(summary, row), fmt_rate(row["items_per_s"]),
                     fmt_rate(row["eval_items_per_s"])]
                    for _, row in summary.sort_values("items_per_s", ascending=False)
                    .iterrows()], summary.sort_values("items_per_s", ascending=False))
    return ["### As seed 000 published it", "",
            *table(["machine", f"train {unit}s/s", f"eval {unit}s/s"], rows), ""]


VIEWS = [seed_000, scaling]
