"""Scaling beyond what was measured, for `matrix advise`: where a configuration was measured
at several device counts on one machine (twins that differ in nothing else:
analysis.twin_keys, the same hardware entry or instance type), fit Amdahl's law to its
throughputs and, for a deadline its largest measured count misses, project the smallest
count that meets it: never past twice the largest count measured, and never past the
devices the machine has (its instance type's GPUs where a provider's catalogue knows them,
else the most GPUs its rows saw; CPU workers: the cores its rows recorded).

Amdahl's law, as fitted: throughput(n) = throughput(1) x n / (1 + s (n - 1)), where s is the
serial fraction of a step (0: perfect scaling). s is the least-squares fit over the measured
counts of the relative error, searched on a grid of 0.001; throughput(1) is the measured
one-device figure, or the fit's through the smallest count measured. The projected row is
priced as what is bought: the whole machine the largest measured count ran on, at its
recorded price per hour (a bigger share of one instance costs the instance, not a fraction
of it per device). It has no interval: nothing was measured there.

Node counts are projected the same way (node_projections): Amdahl's law over the nodes of
twins that differ only there, priced as every node's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.results.columns import NODES_COLUMN, setting_columns

if TYPE_CHECKING:
    import pandas as pd

MAX_FACTOR = 2  # never project past twice the largest count measured
GRID = 1001  # serial fractions tried: 0, 0.001, ..., 1


@dataclass(frozen=True)
class Scaled:
    """A projected configuration: the measured one it extends, and where it goes."""

    from_config: str
    devices: int
    items_per_s: float
    usd_per_hour: float | None
    serial_fraction: float
    nodes: int = 1  # a node count projected (node_projections); 1: a device count


def serial_fraction(counts: list[float], rates: list[float]) -> tuple[float, float]:
    """(s, throughput at one device) of Amdahl's law fitted to measured (count, rate)."""
    import numpy as np

    n, rate = np.asarray(counts, dtype=float), np.asarray(rates, dtype=float)
    best = (float("inf"), 0.0, 0.0)
    for s in np.linspace(0.0, 1.0, GRID):
        shape = n / (1 + s * (n - 1))
        one = float(np.median(rate / shape))  # the one-device rate this s implies
        error = float(np.sum(((one * shape - rate) / rate) ** 2))
        if error < best[0]:
            best = (error, float(s), one)
    return best[1], best[2]


def configurations(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration of judged, measured rows: what a twin shares (the columns
    of analysis.twin_keys that the rows have), its devices (judge.devices_column), its
    throughput (the median of its repeats') and its price."""
    from orchestrator.report.analysis import MACHINE, repeat_medians, with_machine
    from orchestrator.report.judge import devices_column

    rows = with_machine(rows).assign(devices=devices_column(rows), has=_devices_had(rows))
    shared = [c for c in ("workload", "workload_version", "stack", "gpu_model",
                          "instance_type", "hardware", MACHINE, "price_per_hour_usd")
              if c in rows] + setting_columns(rows.columns)
    firsts = rows.groupby("config_id", sort=False, dropna=False)[
        [*shared, "devices", "has"]].agg(
        {**{c: "first" for c in shared}, "devices": "median", "has": "max"})
    rates = repeat_medians(rows).groupby(level="config_id").median()
    return firsts.assign(items_per_s=rates.reindex(firsts.index)).rename_axis(
        "config_id").reset_index()


def _devices_had(rows: pd.DataFrame) -> pd.Series:
    """The devices each row's machine has (module docstring); NaN where unknown."""
    import pandas as pd

    from orchestrator.report.bounds import host_gpus

    def numbers(column: str) -> pd.Series:
        return pd.to_numeric(rows[column], errors="coerce") if column in rows else \
            pd.Series(float("nan"), index=rows.index)

    on_gpu = numbers("gpu_count").fillna(0) > 0
    if "gpu_model" in rows:
        on_gpu |= rows["gpu_model"].notna()
    known = rows["instance_type"].map(host_gpus) if "instance_type" in rows else \
        pd.Series(None, index=rows.index)
    gpus = pd.to_numeric(known, errors="coerce").fillna(numbers("gpu_count"))
    return gpus.where(on_gpu, numbers("cpu_count"))


def projections(summary: pd.DataFrame, items: float, deadline_s: float | None
                ) -> list[Scaled]:
    """For each group of twins measured at two device counts or more whose largest misses
    the deadline for `items`: the smallest count up to MAX_FACTOR times it that meets it."""
    from orchestrator.report.analysis import twin_keys

    if deadline_s is None or "devices" not in summary or summary.empty:
        return []
    found = []
    keys = [k for k in twin_keys(summary) if k in summary]
    for _, twins in summary.groupby(keys, sort=False, dropna=False):
        twins = twins[twins["devices"] > 0]
        if twins["devices"].nunique() < 2:
            continue
        largest = twins.loc[twins["devices"].idxmax()]
        top = int(largest["devices"])
        has = twins["has"].max()
        most = MAX_FACTOR * top if has != has else min(MAX_FACTOR * top, int(has))
        fewest = _fewest(twins["devices"], twins, items, deadline_s, most)
        if fewest is not None:
            n, rate, s = fewest
            price = largest.get("price_per_hour_usd")
            found.append(Scaled(from_config=str(largest["config_id"]), devices=n,
                                items_per_s=rate, serial_fraction=s,
                                usd_per_hour=None if price is None or price != price
                                else float(price)))
    return found


def _fewest(counts: pd.Series, twins: pd.DataFrame, items: float, deadline_s: float,
            most: int) -> tuple[int, float, float] | None:
    """(count, its projected items/s, the serial fraction) of the smallest count past the
    largest measured, up to `most`, that does `items` within the deadline by Amdahl's law
    fitted to the twins' `counts`; None where the largest measured meets it, or none does."""
    s, one = serial_fraction(list(counts), list(twins["items_per_s"]))
    top = int(counts.max())
    if items / float(twins.loc[counts.idxmax(), "items_per_s"]) <= deadline_s:
        return None  # measured counts meet it: nothing to project
    for n in range(top + 1, most + 1):
        rate = one * n / (1 + s * (n - 1))
        if items / rate <= deadline_s:
            return n, rate, s
    return None


def node_projections(summary: pd.DataFrame, items: float, deadline_s: float | None
                     ) -> list[Scaled]:
    """As `projections`, over node counts: for twins measured on two node counts or more
    (the same configuration and devices per node; only `hw.nodes` differs, report/nodes.py)
    whose most nodes miss the deadline, the fewest nodes up to MAX_FACTOR times as many that
    meet it, by Amdahl's law fitted to the node counts. Priced as every node's: the most
    nodes' recorded price per node times the nodes (registry/prices.py)."""
    import pandas as pd

    from orchestrator.registry.prices import usd_per_hour_on
    from orchestrator.report.analysis import twin_keys

    if deadline_s is None or NODES_COLUMN not in summary or summary.empty:
        return []
    nodes = pd.to_numeric(summary[NODES_COLUMN], errors="coerce").fillna(1)
    frame = summary.assign(_nodes=nodes, _per_node=summary["devices"] / nodes)
    keys = [k for k in twin_keys(frame) if k in frame and k != NODES_COLUMN] + ["_per_node"]
    found = []
    for _, twins in frame.groupby(keys, sort=False, dropna=False):
        if twins["_nodes"].nunique() < 2:
            continue
        largest = twins.loc[twins["_nodes"].idxmax()]
        top = int(largest["_nodes"])
        fewest = _fewest(twins["_nodes"], twins, items, deadline_s, MAX_FACTOR * top)
        if fewest is None:
            continue
        n, rate, s = fewest
        price = largest.get("price_per_hour_usd")
        per_node = None if price is None or price != price else float(price) / top
        found.append(Scaled(
            from_config=str(largest["config_id"]), nodes=n,
            devices=int(largest["_per_node"] * n), items_per_s=rate, serial_fraction=s,
            usd_per_hour=None if per_node is None else usd_per_hour_on(n, per_node)))
    return found
