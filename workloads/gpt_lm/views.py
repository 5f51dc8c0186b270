"""The report's table for `gpt_lm` in the figures LLM training is compared by: tokens per
second in all and per rank, model FLOP utilisation (the row's "% of peak": flops.py's
6N + 12LHQT count over the peak of its devices at its precision), step time and the
largest rank's peak memory; then the scaling table (orchestrator/report/seed_tables.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.report.markdown import fmt, fmt_mib, fmt_ms, fmt_pct, fmt_rate, table
from orchestrator.report.seed_tables import flagged, scaling, where

if TYPE_CHECKING:
    import pandas as pd

SETTINGS = ("param.preset", "param.dp_mode", "param.precision", "param.batch_size",
            "param.context", "param.compile", "param.activation_checkpointing")


def tokens_and_mfu(summary: pd.DataFrame, unit: str) -> list[str]:
    settings = [c for c in SETTINGS if c in summary and summary[c].astype(str).nunique() > 1]
    ordered = summary.sort_values("items_per_s", ascending=False)
    rows = flagged([[where(summary, row), fmt(row["devices"]),
                     *(fmt(row[c]) for c in settings), fmt_rate(row["items_per_s"]),
                     fmt_rate(row.get("metric.tokens_per_s_per_rank")),
                     fmt_pct(row["peak_fraction"]) or "no peak", fmt_ms(row["step_s"]),
                     fmt_mib(row.get("metric.rank_mem_peak_max_bytes"))]
                    for _, row in ordered.iterrows()], ordered)
    headers = ["where", "ranks", *(c.removeprefix("param.") for c in settings), "tokens/s",
               "tokens/s/rank", "MFU", "ms/step", "peak MiB/rank"]
    return ["### Tokens per second and MFU", "",
            "MFU: model FLOPs (6N + 12·L·H·Q·T per token, PaLM appendix B; recomputation "
            "not counted) per second over the peak of the row's devices at its precision. "
            "Peak MiB/rank: the largest rank's peak (allocated on GPUs, resident on CPUs).",
            "", *table(headers, rows), ""]


VIEWS = [tokens_and_mfu, scaling]
