"""What hardware costs: a provider's price per hour of one node (`Price`, with where and
when it was known), and what a cell pays, every node it spans (`cell_usd_per_hour`, the one
place a node's price becomes a cell's). The providers' interface names `Price`
(registry/providers.py); `orchestrator.providers` re-exports it for plugin authors."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.registry.cell_run import Cell


@dataclass(frozen=True)
class Price:
    """What a node of a hardware entry costs per hour, and where and when that was known."""

    usd_per_hour: float
    source: str  # e.g. "pricing-api", "spot-price-history" or "shipped-table"
    as_of: str  # ISO date (table) or timestamp (API) of the figure
    # what the price buys where a cell uses part of it: "whole instance, 1 of 4 GPUs used"
    share: str = ""

    def describe(self) -> str:
        """How rows and messages name it: the source with its date."""
        return f"{self.source} {self.as_of[:10]}"

    def for_cell(self, cell: Cell) -> Price:
        """What a cell of this hardware pays per hour: every node it spans."""
        nodes = cell.hardware.nodes
        if nodes == 1:
            return self
        return replace(self, usd_per_hour=cell_usd_per_hour(cell, self.usd_per_hour),
                       share=f"{nodes} nodes" + (f", each {self.share}" if self.share else ""))


def cell_usd_per_hour(cell: Cell, node_usd_per_hour: float) -> float:
    """A cell's price per hour from its hardware's price per node: a cell across nodes
    holds (and pays for) all of them. Every cost of a cell (the plan's, the budget's, the
    recorded price the report and advise read) goes through here."""
    return usd_per_hour_on(cell.hardware.nodes, node_usd_per_hour)


def usd_per_hour_on(nodes: int, node_usd_per_hour: float) -> float:
    """What `nodes` nodes cost per hour at one's price: a cell's (cell_usd_per_hour), and a
    node count advise projects (report/projection.py)."""
    return node_usd_per_hour * nodes
