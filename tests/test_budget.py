"""The in-run budget guard: which cell may start, given what ended and what runs."""

from __future__ import annotations

import time

from orchestrator.registry.cell_run import Cell, ToolInfo
from orchestrator.run.budget import BudgetGuard
from tests.cells import make_cell_model


def cell(seconds: float = 0.1, repeat: int = 1) -> Cell:
    base = make_cell_model("sleep", {"seconds": seconds}, epochs=1)
    return base.model_copy(update={"cell_id": f"{base.cell_id}-{repeat}", "repeat": repeat})


def test_a_cell_starts_only_while_spent_running_and_its_own_estimate_fit():
    a, b, c, d = (cell(repeat=n) for n in range(1, 5))
    guard = BudgetGuard(3.0, {"laptop": 3600.0}, {x.cell_id: 1.0 for x in (a, b, c, d)})
    assert guard.refusal(a, []) is None  # $1 of $3
    assert guard.refusal(b, [a]) is None  # $1 running + $1
    assert guard.refusal(c, [a, b]) is None  # exactly $3 still fits
    guard.ended(a, wall_s=1.5)
    reason = guard.refusal(c, [b, d])  # $1.50 + 2 x $1 running + $1 > $3
    assert reason is not None and "budget_usd 3 reached" in reason and "$3.50" in reason


def test_without_an_estimate_a_cell_counts_at_its_timeout_and_free_hardware_always_starts():
    a = cell()
    guard = BudgetGuard(1.0, {"laptop": 1.0})  # $1/h; the sleep workload's timeout is long
    assert guard.cell_cost_usd(a) == a.timeout_s / 3600
    unpriced = BudgetGuard(0.0, {})
    assert unpriced.refusal(a, []) is None


def test_the_head_bills_from_the_start_whatever_runs():
    guard = BudgetGuard(1.0, {"laptop": 3600.0}, {}, fixed_usd_per_hour=3600.0,
                        started=time.monotonic() - 0.9)  # $0.90 of head time so far
    a = cell()
    guard.estimate_s[a.cell_id] = 0.2
    assert guard.refusal(a, []) is not None


def test_every_dispatcher_asks_one_policy_to_hold_stop_retry_and_count_a_cell(tmp_path):
    """run/cell_policy.py: a refused cell waits while others run (where its dispatcher can
    hold it back), else it is stopped; a cell whose node was lost runs once more; its end
    carries its attempt and counts against the budget."""
    from orchestrator.results.records import CellRecord, Status
    from orchestrator.run.cell_policy import CellPolicy
    from orchestrator.run.dispatch import lost_node_records
    from orchestrator.run.serial import SerialDispatcher

    a, b, c = (cell(repeat=n) for n in range(1, 4))
    policy = CellPolicy(BudgetGuard(2.0, {"laptop": 3600.0}, {x.cell_id: 1.0 for x in (a, b, c)}))
    assert policy.refusal(a, []) is None
    waiting = policy.refusal(c, [a, b])
    assert waiting is not None and waiting.waits and "budget_usd 2 reached" in waiting.reason
    queued = policy.refusal(c, [a, b], can_wait=False)  # Slurm's queue: no holding back
    assert queued is not None and not queued.waits
    assert policy.refusal(c, [a, b]) == waiting  # asking changes nothing

    assert policy.again(a) and policy.attempt(a) == 2  # its node was lost: once more
    assert not policy.again(a) and policy.attempt(a) == 2  # and no more
    ended = policy.ended(a, lost_node_records(a, "gone"))[-1]
    assert isinstance(ended, CellRecord) and ended.attempts == 2
    stopped = policy.stopped(c, "over")[-1]
    assert isinstance(stopped, CellRecord) and stopped.status is Status.BUDGET_STOPPED
    assert stopped.attempts == 1 and stopped.error == "over"

    guard = policy.guard
    assert guard is not None
    spent = guard.spent_usd
    policy.ended(b, [ended.model_copy(update={"cell_id": b.cell_id, "wall_s": 0.5})])
    assert guard.spent_usd == spent + 0.5  # $3600/h for 0.5 s

    # the serial dispatcher asks it too: nothing runs beside a cell, so a refused one stops
    broke = CellPolicy(BudgetGuard(0.5, {"laptop": 3600.0}, {a.cell_id: 1.0}))
    (found,) = SerialDispatcher(tmp_path, ToolInfo("test", None)).run([a], {}, broke)
    assert found[1][-1].status is Status.BUDGET_STOPPED
