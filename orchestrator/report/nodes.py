"""Scaling across nodes: each configuration that spans nodes beside its one-node twin (the
same workload, stack, machine, settings and devices per node; only `hw.nodes` differs), as
the report, the dashboard and `matrix advise` read it (one function: `node_scaling`).

Efficiency is weak scaling, as the data-parallel workloads run: each rank trains the same
batch on every node count, so N nodes at perfect scaling do N times one node's items per
second, and efficiency = speedup / N. The bus bandwidth between the nodes, measured before
the cell trained (workloads/net_probe.py), stands beside it with the judge's verdict
(report/bounds.py): a node count that scales badly on a slow network says why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.report.analysis import twin_keys, with_machine
from orchestrator.report.markdown import (
    flag_line,
    fmt,
    fmt_metric,
    fmt_pct,
    fmt_rate,
    fmt_ratio,
    table,
)
from orchestrator.results.columns import NODES_COLUMN, param_name, setting_columns
from orchestrator.worker.units import plural

if TYPE_CHECKING:
    import pandas as pd

NODES = NODES_COLUMN
SCALING = ("node_speedup_ratio", "node_efficiency_fraction")


def node_scaling(summary: pd.DataFrame) -> pd.DataFrame:
    """The configurations of `summary` (analysis.config_summary) that have a twin on
    another node count, the one-node twin first in each group, with `node_speedup_ratio`
    (items/s over the one-node twin's) and `node_efficiency_fraction` (speedup / nodes;
    NaN where no one-node twin ran). Empty where nothing spans nodes."""
    import pandas as pd

    if not len(summary) or "nodes" not in summary or not (summary["nodes"] > 1).any():
        return summary.iloc[0:0]
    frame = with_machine(summary).copy()
    frame["_per_node"] = frame["devices"] / frame["nodes"].clip(lower=1)
    keys = [k for k in twin_keys(frame) if k != NODES] + ["_per_node"]
    for column in SCALING:
        frame[column] = float("nan")
    found = []
    for _, members in frame.groupby(keys, sort=False, dropna=False):
        if not (members["nodes"] > 1).any():  # one node only: nothing spans nodes here
            continue
        members = members.sort_values("nodes", kind="stable")
        single = members[members["nodes"] == 1]
        if len(single):
            speedup = members["items_per_s"] / float(single["items_per_s"].iloc[0])
            members["node_speedup_ratio"] = speedup
            members["node_efficiency_fraction"] = speedup / members["nodes"]
        found.append(members)
    return (pd.concat(found).drop(columns=["_per_node"]) if found
            else summary.iloc[0:0])


def node_scaling_section(summary: pd.DataFrame, unit: str) -> list[str]:
    """report.md's "Scaling across nodes" for one workload: nothing where no configuration
    spans nodes."""
    rows = node_scaling(summary)
    if not len(rows):
        return []
    varying = [c for c in setting_columns(rows.columns)
               if c != NODES and rows[c].astype(str).nunique() > 1]
    headers = ["hardware", "stack", *(param_name(c) for c in varying), "nodes", "devices",
               f"train {plural(unit)}/s", "speedup", "efficiency", "busbw GB/s", "flags"]
    body: list[list[object]] = []
    for _, row in rows.iterrows():
        body.append([row["hardware"], row["stack"], *(fmt(row[c]) for c in varying),
                     fmt(row["nodes"]), fmt(row["devices"]), fmt_rate(row["items_per_s"]),
                     fmt_ratio(row["node_speedup_ratio"]),
                     fmt_pct(row["node_efficiency_fraction"]),
                     fmt_metric(row["net_busbw_gbs"]), row["flags"] or ""])
        if row.get("judgement"):  # no flag stands without its why
            body.append(flag_line(str(row["judgement"]), len(headers)))
    return ["### Scaling across nodes", "",
            f"Each configuration on N nodes beside its one-node twin: speedup in train "
            f"{plural(unit)}/s, efficiency against N x one node (each rank trains the same "
            "batch on every count), and the all-reduce bus bandwidth measured between its "
            "nodes before it trained (as nccl-tests reports busbw).", "",
            *table(headers, body), ""]
