"""`matrix plan`: the plan as tables, without running anything or starting Ray."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from orchestrator.hardware import detect_local
from orchestrator.images.build import image_stacks
from orchestrator.images.engine import EngineUnavailable, docker_client
from orchestrator.images.stack_image import ImageError, find_image, render
from orchestrator.plan.cells import Cell
from orchestrator.plan.planner import Plan, Selector, make_plan
from orchestrator.results.store import ResultStore
from orchestrator.run.costs import over_budget, plan_cost_usd, plan_prices
from orchestrator.run.progress import varying_params
from orchestrator.run.sweep import run_dir_for
from orchestrator.spec.load import load_spec
from orchestrator.spec.model import MatrixSpec

MAX_SKIPPED_ROWS = 50


def show_plan(spec_path: Path, output: Path | None, only: tuple[Selector, ...], rerun: bool,
              console: Console) -> None:
    spec = load_spec(spec_path)
    store = ResultStore(run_dir_for(spec, output))
    plan = make_plan(spec, detect_local(), store.results(), only, None, rerun)
    varying = sorted(varying_params([*plan.to_run, *(s.cell for s in plan.skipped)]))

    table = Table(title=f"{len(plan.to_run)} cells to run ({store.root})")
    for column in ["workload", "hardware", "stack", *varying, "epochs", "repeat", "estimate"]:
        table.add_column(column)
    for cell in plan.to_run:
        estimate = plan.estimate_s.get(cell.cell_id)
        table.add_row(cell.workload, cell.hardware.name, cell.stack.name,
                      *(str(cell.params.get(k, "")) for k in varying), str(cell.epochs),
                      str(cell.repeat), "?" if estimate is None else f"{estimate:.0f} s")
    console.print(table)

    if plan.skipped:
        skipped = Table(title=f"{len(plan.skipped)} cells skipped")
        for column in ["workload", "hardware", "stack", *varying, "repeat", "reason"]:
            skipped.add_column(column)
        for item in plan.skipped[:MAX_SKIPPED_ROWS]:
            cell = item.cell
            skipped.add_row(cell.workload, cell.hardware.name, cell.stack.name,
                            *(str(cell.params.get(k, "")) for k in varying), str(cell.repeat),
                            item.reason)
        console.print(skipped)
        if len(plan.skipped) > MAX_SKIPPED_ROWS:
            reasons = Counter(s.reason for s in plan.skipped)
            console.print("all skipped: " + "; ".join(f"{n} {r}" for r, n in reasons.items()))
    _show_images(spec, plan.to_run, console)
    total = plan.total_estimate_s()
    console.print("estimate: " + ("unknown for some cells (no history, no declared estimate)"
                                  if total is None else f"about {total / 60:.1f} min"))
    _show_repeat_range(spec, plan, console)
    _show_cost(spec, plan, console)


def _show_repeat_range(spec: MatrixSpec, plan: Plan, console: Console) -> None:
    """With repeats: {min, max, until_cv}: how far the plan may grow, and at what cost."""
    if isinstance(spec.repeats, int):
        return
    policy = spec.repeats
    most = len(plan.to_run) + len(plan.may_add)
    extra = plan.total_estimate_s(plan.may_add)
    longer = "" if not plan.may_add else (
        ", time unknown" if extra is None else f", about {extra / 60:.1f} min more")
    console.print(f"repeats: {policy.min} to {policy.max} per configuration, more while the "
                  f"CV of its per-repeat throughput is above {policy.until_cv:.1%}: "
                  f"{len(plan.to_run)} to {most} cells{longer}", highlight=False)


def _show_cost(spec: MatrixSpec, plan: Plan, console: Console) -> None:
    """Each EC2 price with its source and date, and the plan's worst case against the budget."""
    prices = plan_prices(spec, plan, say=lambda line: console.print(line, highlight=False),
                    warn=lambda line: console.print(f"[yellow]{line}[/]"))
    if not prices:
        return
    cost = plan_cost_usd(plan, prices)
    if spec.budget_usd is not None and cost > spec.budget_usd:
        console.print(f"[red]{over_budget(spec.budget_usd, cost)}[/]: `matrix run` refuses it")
    else:
        budget = f" of budget_usd {spec.budget_usd:g}" if spec.budget_usd is not None else ""
        console.print(f"cost: up to ${cost:.2f}{budget} (estimates, or timeouts, x prices; "
                      "plus the head and boot time)")


def _show_images(spec: MatrixSpec, cells: list[Cell], console: Console) -> None:
    """The images the cells need: their tags, and whether this engine has them already."""
    stacks = image_stacks(spec, cells)
    if not stacks:
        return
    try:
        client = docker_client()
    except EngineUnavailable as exc:
        client, why = None, str(exc)
    table = Table(title=f"{len(stacks)} stack images")
    for column in ["stack", "tag", "state"]:
        table.add_column(column)
    for stack in stacks:
        try:
            tag = render(stack, spec.images, spec.workload_folders()).tag
        except ImageError as exc:
            table.add_row(stack.name, "-", f"cannot render: {exc}")
            continue
        state = why if client is None else (
            "built" if find_image(client, stack.name, tag) else "to build")
        table.add_row(stack.name, tag, state)
    console.print(table)
