"""What cells cost: each hardware entry's price as its provider gives it, with its source and
date, on every row of its cells; the plan's worst case against `budget_usd`; the budget
guard a sweep's dispatcher keeps (the cost columns of a report: report/analysis.py).

Prices come from the hardware entry's own `price_per_hour` where it declares one, else from
its provider (`Provider.prices`), looked up once per sweep; hardware with neither (this
machine, by default) costs nothing here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from orchestrator.errors import BudgetError
from orchestrator.registry.prices import Price
from orchestrator.registry.providers import provider_for
from orchestrator.results.records import ProvenanceRecord, Record
from orchestrator.run.budget import BudgetGuard

if TYPE_CHECKING:
    from orchestrator.plan.planner import Plan
    from orchestrator.registry.cell_run import Cell
    from orchestrator.spec.model import Hardware, MatrixSpec


def plan_prices(spec: MatrixSpec, plan: Plan, say: Callable[[str], None],
           warn: Callable[[str], None]) -> dict[str, Price]:
    """The price of each hardware entry that has cells to run, from its provider, each
    printed with its source and date."""
    running = {cell.hardware.name for cell in plan.to_run}
    kinds: dict[str, list[Hardware]] = {}
    prices: dict[str, Price] = {}
    for entry in spec.hardware:
        if entry.name not in running:
            continue
        if entry.price_per_hour is not None:
            prices[entry.name] = declared_price(entry.price_per_hour)
        else:
            kinds.setdefault(entry.kind, []).append(entry)
    for kind, entries in kinds.items():
        prices |= provider_for(kind).prices(spec, entries, warn)
    for name, price in prices.items():
        share = f"; {price.share}" if price.share else ""
        say(f"price: {name} ${price.usd_per_hour:g}/h ({price.describe()}{share})")
    return prices


def declared_price(usd_per_hour: float) -> Price:
    """A hardware entry's own price_per_hour (a cluster's charge-back, a machine's cost),
    which no provider's price overrides."""
    return Price(usd_per_hour, source="declared in the matrix",
                 as_of=datetime.now(UTC).date().isoformat())


def check_budget(spec: MatrixSpec, plan: Plan, prices: dict[str, Price], allow_over: bool,
                 say: Callable[[str], None]) -> None:
    """BudgetError when the plan's worst case is over `budget_usd` (unless allowed)."""
    if spec.budget_usd is None:
        return
    if not prices:
        say(f"note: budget_usd {spec.budget_usd:g} is not enforced: no hardware to run has "
            "a price (no provider prices it)")
        return
    cost = plan_cost_usd(plan, prices)
    if cost > spec.budget_usd and not allow_over:
        raise BudgetError(f"{over_budget(spec.budget_usd, cost)}: raise budget_usd, run fewer "
                          "cells (--only), or pass --allow-over-budget")
    say(f"estimated cost: up to ${cost:.2f} of budget_usd {spec.budget_usd:g}")


def over_budget(budget_usd: float, cost: float) -> str:
    return (f"the plan costs up to ${cost:.2f} (each cell's estimate, or its timeout where it "
            "has none, x its price), over budget_usd "
            f"{budget_usd:g} by ${cost - budget_usd:.2f}")


def budget_guard(budget_usd: float | None, usd_per_hour: dict[str, float],
                 estimate_s: dict[str, float | None], fixed_usd_per_hour: float = 0.0
                 ) -> BudgetGuard | None:
    """The guard a dispatcher keeps the spend under, here or on a launched cluster's head;
    None when there is no budget or nothing to bill."""
    if budget_usd is None or not (usd_per_hour or fixed_usd_per_hour):
        return None
    return BudgetGuard(budget_usd, usd_per_hour,
                       {k: v for k, v in estimate_s.items() if v is not None},
                       fixed_usd_per_hour=fixed_usd_per_hour)


def with_price(records: list[Record], cell: Cell, price: Price | None) -> list[Record]:
    """The attempt's records with its price on the provenance record: its hardware's, for
    every node it spans."""
    if price is None:
        return records
    price = price.for_cell(cell)
    update = {"price_per_hour_usd": price.usd_per_hour, "price_source": price.describe(),
              "instance_type": cell.hardware.instance_type}
    return [r.model_copy(update=update) if isinstance(r, ProvenanceRecord) else r
            for r in records]


def plan_cost_usd(plan: Plan, prices: dict[str, Price]) -> float:
    """The priced cells' estimated time x their price, the repeats a configuration may
    still get included. A cell without an estimate counts at its timeout: a budget is an
    upper bound, so the unknown is taken at its worst."""
    return sum((plan.estimate_s.get(cell.cell_id) or cell.timeout_s) / 3600 *
               prices[cell.hardware.name].for_cell(cell).usd_per_hour
               for cell in [*plan.to_run, *plan.may_add] if cell.hardware.name in prices)
