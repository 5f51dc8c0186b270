"""The sweep's policy for cells, asked by every dispatcher: whether a cell may start now (the
budget, budget.py), whether a cell whose node was lost runs again, and what a cell's end
means for the spend and for its attempt number.

The serial and Ray dispatchers here, Slurm's groups and the EC2 head's driver each ask one
`CellPolicy`, so a cell is held back, stopped, run again and counted by the same rules
wherever it runs; how each places, follows and cancels its cells (Ray's tasks and
reconnection, Slurm's queue) stays its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orchestrator.executors.outcome import not_run_records
from orchestrator.results.records import CellRecord, Record, Status, with_attempts

if TYPE_CHECKING:
    from orchestrator.registry.cell_run import Cell
    from orchestrator.run.budget import BudgetGuard

LOST_NODE_RETRIES = 1  # a cell whose node died runs once more, on another node of its hardware


@dataclass(frozen=True)
class Refusal:
    """Why a cell may not start now, and whether it waits for the running cells to end (it
    may fit the budget then: they may cost less than their estimate) or is stopped now
    (`CellPolicy.stopped`: budget_stopped)."""

    reason: str
    waits: bool


@dataclass
class CellPolicy:
    """One sweep's rules for its cells (module docstring). `guard`: the budget's, where the
    sweep has one and something bills."""

    guard: BudgetGuard | None = None
    retries: int = LOST_NODE_RETRIES
    attempts: dict[str, int] = field(default_factory=dict)  # cell id -> its attempt now

    def refusal(self, cell: Cell, running: list[Cell], can_wait: bool = True
                ) -> Refusal | None:
        """None if `cell` may start now beside `running`, else why not. A refused cell
        waits while others run, unless the dispatcher cannot hold it back (`can_wait`:
        Slurm's queue starts a pending task when it will); otherwise it is stopped."""
        reason = self.guard.refusal(cell, running) if self.guard is not None else None
        if reason is None:
            return None
        return Refusal(reason, waits=bool(running) and can_wait)

    def stopped(self, cell: Cell, reason: str) -> list[Record]:
        """The records of a cell the budget stopped before it started."""
        return self.ended(cell, not_run_records(cell, Status.BUDGET_STOPPED, reason))

    def attempt(self, cell: Cell) -> int:
        """The cell's attempt now (1 until its node was lost)."""
        return self.attempts.get(cell.cell_id, 1)

    def again(self, cell: Cell) -> bool:
        """Whether a cell whose node was lost runs once more; if so, its next attempt is
        counted from now."""
        if self.attempt(cell) > self.retries:
            return False
        self.attempts[cell.cell_id] = self.attempt(cell) + 1
        return True

    def ended(self, cell: Cell, records: list[Record]) -> list[Record]:
        """The cell's records as the journal takes them (with its attempt number), its
        time counted against the budget."""
        records = with_attempts(records, self.attempt(cell))
        if self.guard is not None and isinstance(records[-1], CellRecord):
            self.guard.ended(cell, records[-1].wall_s)
        return records
