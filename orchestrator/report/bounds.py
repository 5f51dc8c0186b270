"""The bounds a row's memory and network are held to (judge.py holds its FLOP/s and
scaling): what a device or a machine can hold, and what the link between a cell's nodes
can carry.

- **Memory**: a peak above the device's memory (the GPU's, or for host RSS the instance
  type's, as the provider whose catalogue has it says: EC2's) cannot have been held.
- **Network**: a cell across nodes measured its all-reduce bus bandwidth (busbw, GB/s:
  workloads/net_probe.py). A ring's busbw is bounded by the slowest link it crosses, the
  network between nodes, so above the node's link as its datasheet states it (a hardware
  entry's `net_gbps`, else the provider's catalogue: EC2's network bandwidth), beyond
  NETWORK_TOLERANCE, it cannot be true. Two nodes of one machine (a test) meet over
  loopback, which no datasheet states: no entry there says `net_gbps`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from orchestrator.hardware.peaks import gpu_memory_gb
from orchestrator.report.markdown import present

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.registry.providers import Provider

T = TypeVar("T")

GIB = 1024 ** 3
NETWORK_TOLERANCE = 0.05  # a datasheet's Gbit/s is a line rate: a little over is a clock's


@dataclass(frozen=True)
class Verdict:
    """Why a row cannot be true, and by what factor it exceeds its bound."""

    reason: str
    factor: float


def memory_suspects(df: pd.DataFrame) -> pd.Series:
    """Rows whose memory peaks may exceed their device's (memory_verdicts decides)."""
    import pandas as pd

    suspects = pd.Series(False, index=df.index)
    if "mem_alloc_peak_bytes" in df and "gpu_model" in df:
        capacity = df["gpu_model"].map(gpu_memory_bytes)
        suspects |= pd.to_numeric(df["mem_alloc_peak_bytes"], errors="coerce") > \
            pd.to_numeric(capacity, errors="coerce")
    if "host_rss_peak_bytes" in df and "instance_type" in df:
        known = {name: host_memory_gib(name) for name in df["instance_type"].dropna().unique()}
        memory = df["instance_type"].map(
            lambda name: None if (gib := known.get(name)) is None else gib * GIB)
        suspects |= pd.to_numeric(df["host_rss_peak_bytes"], errors="coerce") > \
            pd.to_numeric(memory, errors="coerce")
    return suspects.fillna(False)


def memory_verdicts(row: Any, memory: float | None) -> list[Verdict]:
    """A memory peak above what the device holds; `memory`: the GiB of the row's instance
    type (host_memory_gib), None where unknown."""
    verdicts = []
    capacity = gpu_memory_bytes(row.get("gpu_model"))
    used = row.get("mem_alloc_peak_bytes")
    if capacity and present(used) and used > capacity:
        verdicts.append(Verdict(
            f"implausible: {used / GIB:,.1f} GiB of GPU memory on a {row['gpu_model']} that "
            f"holds {capacity / GIB:,.0f} GiB ({used / capacity:.1f}x)", used / capacity))
    instance = row.get("instance_type")
    rss = row.get("host_rss_peak_bytes")
    if memory and present(rss) and rss > memory * GIB:
        factor = rss / (memory * GIB)
        verdicts.append(Verdict(
            f"implausible: {rss / GIB:,.1f} GiB resident on a {instance} with "
            f"{memory:g} GiB of memory ({factor:.1f}x)", factor))
    return verdicts


def host_memory_gib(instance_type: object) -> float | None:
    """The memory of a row's instance type, as the provider whose catalogue has it says
    (EC2's: providers/aws/catalogue.py); None where none knows it."""
    return _catalogued(instance_type, lambda provider, name: provider.host_memory_gib(name))


def host_gpus(instance_type: object) -> int | None:
    """The GPUs of a row's instance type, as the provider whose catalogue has it says;
    None where none knows it: how far advise projects a GPU count (projection.py)."""
    return _catalogued(instance_type, lambda provider, name: provider.host_gpus(name))


def _catalogued(instance_type: object, ask: Callable[[Provider, str], T | None]) -> T | None:
    """The first answer a provider's catalogue gives for `instance_type`. A row does not
    name its hardware's kind, so each provider is asked."""
    from orchestrator.registry.providers import providers  # their settings' models: 0.1 s
    # to import, which a store without an instance type never needs

    if not isinstance(instance_type, str) or not instance_type:
        return None
    for provider in providers():
        if (found := ask(provider, instance_type)) is not None:
            return found
    return None


def gpu_memory_bytes(model: object) -> float | None:
    """The memory of a GPU model: as its name states it (\"Tesla V100-SXM2-16GB\", \"NVIDIA
    H100 80GB HBM3\"), else from the peak table; None where neither knows it."""
    if not isinstance(model, str) or not model:
        return None
    # Read as GiB, the larger reading: a bound must never flag what the card can hold.
    stated = re.search(r"(\d+)\s*GB\b", model)
    if stated:
        return float(stated.group(1)) * GIB
    known = gpu_memory_gb(model)
    return None if known is None else known * GIB


def link_gbps(row: Any) -> float | None:
    """The link between a row's nodes, Gbit/s per node: its hardware entry's `net_gbps`
    (recorded as `net_link_gbps`), else its instance type's, as a provider's catalogue has
    it; None where neither says."""
    stated = row.get("net_link_gbps")
    if present(stated):
        return float(stated)
    return host_network_gbps(row.get("instance_type"))


# The network workload's own figure per epoch (workloads/network), judged as the probe's is
# where its row spans nodes (on one node its ranks meet over loopback or NVLink: no link)
BUSBW_METRIC = "busbw_gbs"


def network_suspects(df: pd.DataFrame) -> pd.Series:
    """Rows that measured the network between their nodes (network_verdicts decides)."""
    import pandas as pd

    found = pd.Series(False, index=df.index)
    if "net_busbw_gbs" in df:
        found |= pd.to_numeric(df["net_busbw_gbs"], errors="coerce").notna()
    if BUSBW_METRIC in df and "nodes" in df:
        found |= pd.to_numeric(df[BUSBW_METRIC], errors="coerce").notna() & (
            pd.to_numeric(df["nodes"], errors="coerce").fillna(1) > 1)
    return found


def network_verdicts(row: Any) -> list[Verdict]:
    """A bus bandwidth above the link between the row's nodes, beyond the tolerance: the
    probe's, as its cell joined, and the network workload's own, each epoch."""
    link = link_gbps(row)
    figures = [("all-reduce bus bandwidth", row.get("net_busbw_gbs"))]
    if present(row.get("nodes")) and float(row["nodes"]) > 1:
        figures.append(("the epoch's all-reduce bus bandwidth", row.get(BUSBW_METRIC)))
    verdicts = []
    for what, busbw in figures:
        if not present(busbw) or not link:
            continue
        factor = float(busbw) * 8 / link
        if factor > 1 + NETWORK_TOLERANCE:
            verdicts.append(Verdict(
                f"implausible: {what} {float(busbw):,.3g} GB/s between nodes linked at "
                f"{link:g} Gbit/s ({link / 8:,.3g} GB/s; {factor:.1f}x)", factor))
    return verdicts


def host_network_gbps(instance_type: object) -> float | None:
    """The network bandwidth of a row's instance type, Gbit/s, as the provider whose
    catalogue has it says (EC2's); None where none knows it."""
    return _catalogued(instance_type, lambda provider, name: getattr(
        provider, "host_network_gbps", lambda _: None)(name))
