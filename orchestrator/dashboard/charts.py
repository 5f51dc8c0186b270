"""The charts of a workload's page, as the JSON its script draws (assets/site.js): its
throughput, its cost, its scaling against devices and across nodes, each against its ideal
line, and its history. A chart point carries its tooltip lines: the row's figures and its
provenance (content.tips).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.dashboard.content import tips
from orchestrator.dashboard.settings import Settings, params_of
from orchestrator.report.markdown import present
from orchestrator.results.columns import NODES_COLUMN
from orchestrator.worker.units import plural

if TYPE_CHECKING:
    import pandas as pd

HISTORY_LINES = 8  # configurations drawn in a history chart: the fastest in their latest run


@dataclass(frozen=True)
class Dataset:
    label: str
    data: list[Any]
    tips: list[list[str]] = field(default_factory=list)
    dashed: bool = False


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    type: str  # bar | line | scatter
    x_label: str
    y_label: str
    labels: list[str]
    datasets: list[Dataset]
    note: str = ""
    horizontal: bool = False  # bars along x, one row per label (long labels stay readable)

    @property
    def height_px(self) -> int:
        return max(320, 24 * len(self.labels) + 90) if self.horizontal else 320

    def as_json(self) -> dict[str, Any]:
        found = asdict(self)
        found["xLabel"], found["yLabel"] = found.pop("x_label"), found.pop("y_label")
        return found


def workload_charts(rows: pd.DataFrame, workload: str, named: Settings,
                    run_dates: dict[str, str]) -> list[Chart]:
    """The workload's charts: four, and scaling across nodes where a row spans nodes. A row
    flagged implausible is in the table, marked, and never drawn: one figure beyond physics
    would set every axis. A row with another flag is drawn with its flags in its label, as
    the table marks it."""
    unit = str(rows["item_unit"].iloc[0]) if len(rows) else "item"
    left_out = rows[rows["implausible"]]["config_id"].nunique()
    rows = rows[~rows["implausible"]]
    latest = rows[rows["latest"]].sort_values("items_per_s", ascending=False, kind="stable")
    records = latest.to_dict("records")
    labels = [named.label(r) + (f" [{r['flags']}]" if r["flags"] else "") for r in records]
    charts = [Chart(id=f"throughput-{workload}", title="throughput per hardware and stack "
                    "(each configuration's latest run)", type="bar", x_label="configuration",
                    y_label=f"{unit}/s (median over repeats)", labels=labels, horizontal=True,
                    datasets=[Dataset("median", [float(r["items_per_s"]) for r in records],
                                      [tips(r) for r in records])],
                    note=f"{left_out} configuration(s) flagged implausible are left out of "
                         "the charts (marked in the table)" if left_out else "")]
    priced = [(label, r) for label, r in zip(labels, records, strict=True)
              if present(r["usd_per_million_items"])]
    charts.append(Chart(id=f"cost-{workload}", title="cost per million items", type="bar",
                        x_label="configuration", y_label=f"$ per million {plural(unit)}",
                        labels=[label for label, _ in priced], horizontal=True,
                        datasets=[Dataset("$ / M items",
                                          [float(r["usd_per_million_items"]) for _, r in priced],
                                          [tips(r) for _, r in priced])],
                        note="" if priced else "no row carries a price"))
    charts.append(_scaling(records, workload, unit, named))
    if any(_nodes(r) > 1 for r in records):
        charts.append(_across_nodes(records, workload, unit, named))
    charts.append(_history(rows, workload, unit, named, run_dates))
    return charts


def _scaling(records: list[dict[str, Any]], workload: str, unit: str,
             named: Settings) -> Chart:
    """Throughput against devices per machine, stack and settings (the device count's own
    parameter aside: twins, as the report's scaling groups them), with each group's ideal
    line: its fewest-device point scaled linearly. Two machines are never one line, nor two
    node counts (the chart across nodes has them)."""
    counting = _device_params(records, named) - {NODES_COLUMN}
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:  # one line per device kind: CPUs never scale along GPUs
        params = params_of(record["params"])
        settings = " ".join(f"{k}={params[k]}" for k in named.varying
                            if k in params and k not in counting)
        name = (f"{record.get('machine') or record['hardware']}/{record['stack']} "
                f"{settings}".strip() + f" ({record['device']})")
        groups.setdefault(name, []).append(record)
    datasets = []
    for name, members in sorted(groups.items()):
        members = sorted(members, key=lambda r: r["devices"])
        datasets.append(Dataset(name, [{"x": r["devices"], "y": float(r["items_per_s"])}
                                       for r in members], [tips(r) for r in members]))
        base = members[0]
        if len({r["devices"] for r in members}) > 1:
            per_device = float(base["items_per_s"]) / base["devices"]
            datasets.append(Dataset(f"{name}: ideal", [
                {"x": r["devices"], "y": per_device * r["devices"]} for r in members],
                dashed=True))
    several = any(d.dashed for d in datasets)
    return Chart(id=f"scaling-{workload}", title="scaling against the ideal line", type="scatter",
                 x_label="devices (GPUs, or CPU workers)", y_label=f"{unit}/s", labels=[],
                 datasets=datasets,
                 note="" if several else "every configuration ran on one device count: "
                                         "no line to scale along")


def _across_nodes(records: list[dict[str, Any]], workload: str, unit: str,
                  named: Settings) -> Chart:
    """Throughput against nodes, one line per configuration that differs only in its node
    count (the same machine, stack, settings and devices per node), with its ideal line:
    its one-node point times the nodes (report/nodes.py reads the same twins)."""
    counting = _device_params(records, named) | {NODES_COLUMN}
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        params = params_of(record["params"])
        settings = " ".join(f"{k}={params[k]}" for k in named.varying
                            if k in params and k not in counting)
        per_node = record["devices"] // _nodes(record)
        name = (f"{record.get('machine') or record['hardware']}/{record['stack']} "
                f"{settings}".strip() + f" ({per_node} {record['device']} a node)")
        groups.setdefault(name, []).append(record)
    datasets = []
    for name, members in sorted(groups.items()):
        members = sorted(members, key=_nodes)
        datasets.append(Dataset(name, [{"x": _nodes(r), "y": float(r["items_per_s"])}
                                       for r in members], [tips(r) for r in members]))
        if _nodes(members[0]) == 1 and len(members) > 1:
            one = float(members[0]["items_per_s"])
            datasets.append(Dataset(f"{name}: ideal", [
                {"x": _nodes(r), "y": one * _nodes(r)} for r in members], dashed=True))
    return Chart(id=f"nodes-{workload}", title="scaling across nodes against the ideal line",
                 type="scatter", x_label="nodes (one job across them)", y_label=f"{unit}/s",
                 labels=[], datasets=datasets,
                 note="ideal: N x the one-node throughput (each rank trains the same batch "
                      "on every count)")


def _nodes(record: dict[str, Any]) -> int:
    """The nodes a row's cells spanned (its recorded hw.nodes; 1 where none)."""
    return int(params_of(record["params"]).get(NODES_COLUMN) or 1)


def _device_params(records: list[dict[str, Any]], named: Settings) -> set[str]:
    """The varying parameters that are the device count (nmt_dp's `workers`, a user's own):
    those whose value is the devices a row trained on, in every row."""
    return {k for k in named.varying
            if records and all(str(params_of(r["params"]).get(k)) == str(r["devices"])
                               for r in records)}


def _history(rows: pd.DataFrame, workload: str, unit: str, named: Settings,
             run_dates: dict[str, str]) -> Chart:
    """Each configuration's median run by run (x: the run's start), for the fastest
    HISTORY_LINES of them."""
    latest = rows[rows["latest"]].sort_values("items_per_s", ascending=False, kind="stable")
    chosen = list(latest["config_id"][:HISTORY_LINES])
    shown = rows[rows["config_id"].isin(chosen)]
    dates = sorted({run_dates[key] for key in shown["run_key"]})
    position = {d: i for i, d in enumerate(dates)}
    datasets = []
    for config_id in chosen:
        of = shown[shown["config_id"] == config_id].to_dict("records")
        data: list[float | None] = [None] * len(dates)
        tip: list[list[str]] = [[] for _ in dates]
        for record in of:
            at = position[run_dates[record["run_key"]]]
            data[at], tip[at] = float(record["items_per_s"]), tips(record)
        datasets.append(Dataset(named.label(of[0]), data, tip))
    more = latest["config_id"].nunique() - len(chosen)
    return Chart(id=f"history-{workload}", title="history over runs", type="line",
                 x_label="run (its first cell's start, UTC)", y_label=f"{unit}/s",
                 labels=dates, datasets=datasets,
                 note=f"the {len(chosen)} fastest configurations; the table has all "
                      f"{len(chosen) + more}" if more > 0 else "")
