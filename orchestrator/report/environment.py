"""The report's Environment section: what each row ran on and with (its hardware, host,
CPU, GPUs, driver, framework, image, tool), and each node's measured ceiling against its
GPU's datasheet (docs/MEASUREMENT.md: "Each node's own ceiling")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.report.ceilings import BELOW_DATASHEET, node_ceilings
from orchestrator.report.markdown import Figure, fmt, fmt_pct, fmt_tflops, present, table

if TYPE_CHECKING:
    import pandas as pd


def environment_section(df: pd.DataFrame) -> list[str]:
    columns = ["hardware", "hostname", "instance_type", "cpu_model", "cpu_count", "cpus_usable",
               "cpu_threads", "gpu_model", "gpu_count", "driver", "python", "framework",
               "framework_version", "cuda", "cudnn", "repo_digest", "image_id", "tool_version",
               "git_revision"]
    shown = [c for c in columns if c in df and df[c].notna().any()]
    if "hardware" not in shown:
        return []
    env = df[shown].drop_duplicates()
    rows = [[fmt(v) if present(v) else "" for v in row] for row in env.itertuples(index=False)]
    return ["## Environment", "", *table(shown, rows), "", *_ceilings_section(df)]


def _ceilings_section(df: pd.DataFrame) -> list[str]:
    """Each node's measured ceiling per stack, framework and precision, against its GPU's
    datasheet (docs/MEASUREMENT.md: "Each node's own ceiling")."""
    found = node_ceilings(df)
    if found.empty:
        return []
    rows = []
    for row in found.to_dict("records"):
        share = row.get("ceiling_of_peak")
        datasheet = row.get("peak_source") == "datasheet"
        of_sheet = "" if not present(share) else Figure(fmt_pct(share) + (
            " of the estimate" if not datasheet else
            " (below_datasheet)" if share < BELOW_DATASHEET else ""), share)
        cost = row.get("node_ceiling_cost_s")
        rows.append([fmt(row["node"]), fmt(row["hardware"]), fmt(row["stack"]),
                     fmt(row["framework"]), row["precision"],
                     fmt_tflops(row["node_ceiling_flops"]), of_sheet,
                     Figure(f"{cost:.2g}", cost) if present(cost) else "",
                     fmt(row["node_ceiling_probe"])])
    return ["### Measured ceilings", "",
            "What dense matrix products reached on each node, stack and precision in this run, "
            "per device: each row's % of ceiling reads its FLOP/s against it (% of peak "
            "against the datasheet, or on a CPU against an estimated upper bound). A GPU "
            f"under {BELOW_DATASHEET:.0%} of its datasheet is flagged below_datasheet.", "",
            *table(["node", "hardware", "stack", "framework", "precision", "TFLOP/s",
                    "of peak", "probe s", "probe"], rows), ""]
