"""Spend tracking during a sweep: no cell starts once it could take the spend past the budget.

The plan's check (costs.py) refuses a sweep that costs too much before anything runs;
this guard watches the spend as cells end. Spend counts the head node since the sweep began,
the priced cells that ended (their wall time x their node's price) and, for the cells still
running, their whole estimate (or timeout). A cell starts only if that sum plus its own
estimate stays within the budget. A refused cell waits while others run (they may cost less
than their estimate); when none runs, it and every queued cell are `budget_stopped`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from orchestrator.registry.cell_run import Cell
from orchestrator.registry.prices import cell_usd_per_hour


@dataclass
class BudgetGuard:
    budget_usd: float
    usd_per_hour: dict[str, float]  # hardware name -> its node's price; unpriced cells are free
    estimate_s: dict[str, float] = field(default_factory=dict)  # cell id -> estimated seconds
    fixed_usd_per_hour: float = 0.0  # what bills whatever runs: the head node
    spent_usd: float = 0.0  # the cells that ended
    started: float = field(default_factory=time.monotonic)

    def cell_cost_usd(self, cell: Cell, seconds: float | None = None) -> float:
        price = cell_usd_per_hour(cell, self.usd_per_hour.get(cell.hardware.name, 0.0))
        if seconds is None:
            seconds = self.estimate_s.get(cell.cell_id) or cell.timeout_s
        return seconds / 3600 * price

    def spend_usd(self, running: list[Cell]) -> float:
        fixed = (time.monotonic() - self.started) / 3600 * self.fixed_usd_per_hour
        return fixed + self.spent_usd + sum(self.cell_cost_usd(c) for c in running)

    def refusal(self, cell: Cell, running: list[Cell]) -> str | None:
        """None if `cell` may start now, else why not (the reason its record carries)."""
        cost = self.cell_cost_usd(cell)
        if cost == 0.0:
            return None
        committed = self.spend_usd(running)
        if committed + cost <= self.budget_usd:
            return None
        return (f"budget_usd {self.budget_usd:g} reached: ${committed:.2f} spent or committed, "
                f"and this cell may cost ${cost:.2f}")

    def ended(self, cell: Cell, wall_s: float) -> None:
        self.spent_usd += self.cell_cost_usd(cell, wall_s)
