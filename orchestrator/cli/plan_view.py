"""`matrix plan`: the plan as tables, without running anything or starting Ray."""

from __future__ import annotations

import csv
import json
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from rich import box
from rich.console import Console
from rich.table import Table

from orchestrator.hardware.local import detect_local
from orchestrator.images.engine import EngineUnavailable, docker_client
from orchestrator.images.stack_image import ImageError, find_image, own_workload_files, render
from orchestrator.plan.cells import excluded, expand
from orchestrator.plan.planner import Plan, Selector, make_plan
from orchestrator.providers import provider_for
from orchestrator.registry.cell_run import Cell
from orchestrator.results.columns import as_param_columns
from orchestrator.results.records import Status
from orchestrator.results.run_directory import RunDirectory
from orchestrator.run.costs import over_budget, plan_cost_usd, plan_prices
from orchestrator.run.image_builds import image_stacks
from orchestrator.run.progress import varying_params
from orchestrator.run.sweep import run_dir_for
from orchestrator.spec.model import MatrixSpec
from orchestrator.validate import load_spec

PlanFormat = Literal["text", "json", "csv"]
EXCLUDED = "excluded by"  # how the planner words a cell an exclude rule removed


def show_plan(spec_path: Path, output: Path | None, only: tuple[Selector, ...], rerun: bool,
              console: Console, verbose: bool = False, form: PlanFormat = "text",
              retry: frozenset[Status] = frozenset(), launch: bool = True,
              ray_address: str | None = None) -> None:
    """The plan: a summary that fits a terminal (what runs, grouped; what is skipped, by
    reason; images, time and cost), every cell with `verbose`, or every cell as JSON or CSV
    on stdout for scripts. `launch`: False as `matrix run --no-ray` plans; `ray_address`:
    the cluster `matrix run --ray-address` would use, asked which hardware it offers."""
    spec = load_spec(spec_path)
    store = RunDirectory(run_dir_for(spec, output))
    cluster = cluster_offers(ray_address, spec) if ray_address and launch else None
    plan = make_plan(spec, detect_local(), store.results(), only, cluster, rerun, launch,
                     retry=retry)
    if form != "text":
        write_cells(plan, form)
        return
    grid = len(plan.to_run) + len(plan.skipped)
    ruled_out = sum(s.reason.startswith(EXCLUDED) for s in plan.skipped)
    console.print(f"{spec.name}\n{grid} grid cells (repeats included), {grid - ruled_out} "
                  f"after the exclude and include rules:\n{len(plan.to_run)} to run, "
                  f"{len(plan.skipped) - ruled_out} skipped (reasons below)\n"
                  f"run directory: {store.root}", highlight=False)
    _show_groups(plan, console)
    if verbose:
        _show_cells(plan, console)
    _show_images(spec, plan.to_run, console)
    for line in _provider_lines(spec, plan.to_run):
        _say(console, line)
    total = plan.total_estimate_s()
    console.print("estimate: " + ("unknown for some cells (no history, no declared estimate)"
                                  if total is None else f"about {total / 60:.1f} min"))
    _show_repeat_range(spec, plan, console)
    _show_cost(spec, plan, console)
    if not verbose:
        console.print("every cell: matrix plan --verbose, or --format json|csv for scripts")


def cluster_offers(address: str, spec: MatrixSpec) -> dict[str, int] | None:
    """The hardware names the Ray cluster at `address` offers, with how many nodes offer
    each: what `matrix run --ray-address` plans with (its RayDispatcher asked the same way;
    Ray's banners go to a file that is then removed)."""
    import tempfile

    from orchestrator.run.dispatch import RayDispatcher
    from orchestrator.run.sweep import tool_info

    with tempfile.TemporaryDirectory(prefix="matrix-plan-") as scratch:
        dispatcher = RayDispatcher(Path(scratch), tool_info(), spec.hardware, address,
                                   ray_log=Path(scratch) / "ray.log")
        try:
            return dispatcher.cluster_hardware()
        finally:
            dispatcher.close()


def validation_notes(spec: MatrixSpec) -> list[str]:
    """What `matrix validate` notes besides errors: what the stacks' images still need (a
    lock), and how many cells can never run, per reason (a GPU the stack's CUDA cannot
    drive)."""
    from orchestrator.images.stack_image import image_problems
    from orchestrator.plan.cells import cuda_gap

    never = Counter(f"{why} (stack {cell.stack.name})" for cell in expand(spec)
                    if (why := cuda_gap(cell)))
    return [*image_problems(spec),
            *(f"{count} cells can never run: {why}" for why, count in never.items())]


def grid_counts(spec: MatrixSpec) -> str:
    """The matrix's cells in the words `plan` uses too: the grid, and what the rules leave."""
    cells = expand(spec)
    configs = len({c.config_id for c in cells})
    most = "" if spec.max_repeats == spec.min_repeats else \
        f" to {len(cells) // spec.min_repeats * spec.max_repeats}"
    return (f"{len(cells) + len(excluded(spec))} grid cells (repeats included), "
            f"{len(cells)}{most} after the exclude and include rules ({configs} "
            "configurations)")


def _show_groups(plan: Plan, console: Console) -> None:
    """The cells to run per hardware, stack and workload; the skipped ones per reason."""
    if plan.to_run:
        groups: dict[tuple[str, str, str], list[Cell]] = {}
        for cell in plan.to_run:
            groups.setdefault((cell.hardware.name, cell.stack.name, cell.workload), []).append(
                cell)
        table = Table(title="to run", title_justify="left", box=box.SIMPLE_HEAD)
        for column in ("hardware", "stack", "workload"):
            table.add_column(column, overflow="fold")
        table.add_column("cells", justify="right")
        table.add_column("estimate", justify="right")
        for (hardware, stack, workload), cells in sorted(groups.items()):
            seconds = plan.total_estimate_s(cells)
            table.add_row(hardware, stack, workload, str(len(cells)),
                          "?" if seconds is None else _duration(seconds))
        console.print(table)
    if plan.skipped:
        reasons = Counter(s.reason for s in plan.skipped)
        table = Table(title="skipped", title_justify="left", box=box.SIMPLE_HEAD)
        table.add_column("cells", justify="right")
        table.add_column("reason", overflow="fold")
        for reason, count in reasons.most_common():
            table.add_row(str(count), reason)
        console.print(table)


def _say(console: Console, line: str) -> None:
    """A line of plain text, wrapped to the terminal (never cut), without markup."""
    console.print(textwrap.fill(line, width=max(40, console.width - 1), subsequent_indent="  "),
                  highlight=False, markup=False)


def _provider_lines(spec: MatrixSpec, cells: list[Cell]) -> list[str]:
    """What each provider says of the cells it would run (Slurm: partitions, hours)."""
    by_kind: dict[str, list[Cell]] = {}
    for cell in cells:
        by_kind.setdefault(cell.hardware.kind, []).append(cell)
    return [line for kind, kept in by_kind.items()
            for line in provider_for(kind).plan_lines(spec, kept)]


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _show_cells(plan: Plan, console: Console) -> None:
    """Every cell, to run and skipped (--verbose); values folded, never cut."""
    varying = sorted(varying_params([*plan.to_run, *(s.cell for s in plan.skipped)]))
    table = Table(title=f"{len(plan.to_run)} cells to run", title_justify="left")
    for column in ["workload", "hardware", "stack", *varying, "epochs", "repeat", "estimate"]:
        table.add_column(column, overflow="fold")
    for cell in plan.to_run:
        estimate = plan.estimate_s.get(cell.cell_id)
        table.add_row(cell.workload, cell.hardware.name, cell.stack.name,
                      *(str(cell.params.get(k, "")) for k in varying), str(cell.epochs),
                      str(cell.repeat), "?" if estimate is None else f"{estimate:.0f} s")
    console.print(table)
    if plan.skipped:
        skipped = Table(title=f"{len(plan.skipped)} cells skipped", title_justify="left")
        for column in ["workload", "hardware", "stack", *varying, "repeat", "reason"]:
            skipped.add_column(column, overflow="fold")
        for item in plan.skipped:
            cell = item.cell
            skipped.add_row(cell.workload, cell.hardware.name, cell.stack.name,
                            *(str(cell.params.get(k, "")) for k in varying), str(cell.repeat),
                            item.reason)
        console.print(skipped)


def write_cells(plan: Plan, form: PlanFormat) -> None:
    """Every cell of the plan, one row each (to run, then skipped with its reason), as a
    JSON array or CSV on stdout: ids, where (hardware and its node count), workload,
    repeat, epochs, estimate, params."""
    rows: list[dict[str, Any]] = []
    for cell, reason in [*((c, None) for c in plan.to_run),
                         *((s.cell, s.reason) for s in plan.skipped)]:
        rows.append({"cell_id": cell.cell_id, "config_id": cell.config_id,
                     "action": "run" if reason is None else "skip", "reason": reason,
                     "hardware": cell.hardware.name, "nodes": cell.hardware.nodes,
                     "stack": cell.stack.name,
                     "workload": cell.workload, "repeat": cell.repeat, "epochs": cell.epochs,
                     "estimate_s": plan.estimate_s.get(cell.cell_id),
                     **as_param_columns(cell.params)})
    if form == "json":
        sys.stdout.write(json.dumps(rows, indent=1) + "\n")
        return
    columns = list(dict.fromkeys(key for row in rows for key in row))
    writer = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)


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
    """Each price with its source and date, and the plan's worst case against the budget."""
    prices = plan_prices(spec, plan, say=lambda line: _say(console, line),
                    warn=lambda line: console.print(f"[yellow]{line}[/]"))
    if not prices:
        return
    cost = plan_cost_usd(plan, prices)
    if spec.budget_usd is not None and cost > spec.budget_usd:
        console.print(f"[red]{over_budget(spec.budget_usd, cost)}[/]: `matrix run` refuses it")
    else:
        budget = f" of budget_usd {spec.budget_usd:g}" if spec.budget_usd is not None else ""
        console.print(f"cost: up to ${cost:.2f}{budget} (estimates, or timeouts, x prices)",
                      highlight=False)


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
            tag = render(stack, spec.images, own_workload_files(spec)).tag
        except ImageError as exc:
            table.add_row(stack.name, "-", f"cannot render: {exc}")
            continue
        state = why if client is None else (
            "built" if find_image(client, stack.name, tag) else "to build")
        table.add_row(stack.name, tag, state)
    console.print(table)
