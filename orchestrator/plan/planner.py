"""The plan: which cells of a matrix run now, which are skipped and why, and how long it takes.

Reasons to skip a cell: not selected by --only, excluded by a rule, incompatible with its
hardware, hardware that no node offers, already done (an `ok` result in the journal), or
ended with its configuration's own outcome, its inputs unchanged (retry.py).
With `repeats: {min, max, until_cv}` the plan holds the repeats the journal asks for now
(repeats.py) and names those a configuration may still get, up to `max`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from orchestrator.errors import MatrixError
from orchestrator.hardware.local import LocalMachine
from orchestrator.plan.cells import declared, excluded, expand, incompatibility
from orchestrator.plan.repeats import extra_repeats
from orchestrator.plan.retry import kept_reason
from orchestrator.registry.cell_run import Cell
from orchestrator.registry.providers import provider_for
from orchestrator.results.records import Status
from orchestrator.results.run_directory import CellResult
from orchestrator.spec.model import MatrixSpec

CELL_STARTUP_S = 3.0  # worker start, framework import, model build: for estimates without history


class OnlyFilterError(MatrixError):
    """An --only selector that names nothing in the matrix."""


class NodesError(MatrixError):
    """A cell across nodes where only this machine runs cells (--no-ray, no cluster)."""


@dataclass(frozen=True)
class Selector:
    """`--only KEY=V1,V2`: keep cells whose hardware, stack, workload or parameter KEY is a Vi."""

    key: str
    values: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Selector:
        key, sep, values = text.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise OnlyFilterError(f"--only {text!r}: expected KEY=VALUE[,VALUE...], "
                                  "e.g. --only hardware=laptop or --only batch_size=32,64")
        return cls(key.strip(), tuple(v.strip() for v in values.split(",")))

    def value_of(self, cell: Cell) -> str | None:
        named = {"hardware": cell.hardware.name, "stack": cell.stack.name,
                 "workload": cell.workload}
        if self.key in named:
            return named[self.key]
        value = cell.params.get(self.key)
        return None if value is None else str(value).lower() if isinstance(value, bool) else str(
            value)

    def matches(self, cell: Cell) -> bool:
        return self.value_of(cell) in self.values


@dataclass(frozen=True)
class Skipped:
    cell: Cell
    reason: str


@dataclass(frozen=True)
class Plan:
    to_run: list[Cell]
    skipped: list[Skipped]
    estimate_s: dict[str, float | None] = field(default_factory=dict)  # cell_id -> seconds
    # Adaptive repeats: the cells a configuration may still get if its noise stays above
    # the target (to_run holds those it gets now).
    may_add: list[Cell] = field(default_factory=list)

    def total_estimate_s(self, cells: list[Cell] | None = None) -> float | None:
        """Sum of the estimates of the cells to run (or of `cells`); None if any has none."""
        values = [self.estimate_s.get(c.cell_id) for c in
                  (self.to_run if cells is None else cells)]
        return None if any(v is None for v in values) else float(sum(values))  # type: ignore[arg-type]


def make_plan(spec: MatrixSpec, local: LocalMachine, history: Iterable[CellResult] = (),
              only: Iterable[Selector] = (),
              cluster_hardware: Mapping[str, int] | None = None,
              rerun: bool = False, launch: bool = True,
              earlier_walls: Callable[[set[str]], Mapping[str, list[float]]] | None = None,
              retry: frozenset[Status] = frozenset()) -> Plan:
    """Decide every cell's fate. `cluster_hardware`: the hardware names the nodes of an
    existing cluster offer, with how many nodes offer each (None: this machine, plus the
    nodes each hardware's provider brings up where `launch`). `earlier_walls`: for
    configurations the journal has not measured, their wall times in earlier runs (the
    results store), for estimates. A cell that ended before runs again as plan/retry.py
    says: never if `ok`, if its outcome's inputs changed or its status is in `retry`,
    always after a failure of the run. NodesError for a cell across nodes where only
    this machine runs cells."""
    history = list(history)
    ended = {} if rerun else {r.cell.cell_id: r.cell for r in history}
    selectors = list(only)
    cells = expand(spec)
    for selector in selectors:
        if not any(selector.value_of(c) is not None for c in cells):
            raise OnlyFilterError(f"--only {selector.key}=...: no cell has a hardware, stack, "
                                  f"workload or parameter called {selector.key!r}")
    later: list[Cell] = []
    if not isinstance(spec.repeats, int):  # with --rerun, the journal's repeats are redone
        more, later = extra_repeats(spec.repeats, cells, [] if rerun else history)
        cells = sorted([*cells, *more], key=lambda c: c.repeat)  # stable: grid order kept
    to_run: list[Cell] = []
    skipped = [Skipped(cell, reason) for cell, reason in excluded(spec)]
    fates: dict[str, str | None] = {}  # by config_id: _config_reason, once per configuration

    def skip_reason(cell: Cell) -> str | None:
        if cell.config_id not in fates:
            fates[cell.config_id] = _config_reason(cell, local, selectors, cluster_hardware,
                                                   launch)
        return fates[cell.config_id] or kept_reason(cell.inputs, ended.get(cell.cell_id),
                                                    retry)

    for cell in cells:
        reason = skip_reason(cell)
        if reason:
            skipped.append(Skipped(cell, reason))
        else:
            to_run.append(cell)
    if cluster_hardware is None:
        _one_machine_can_run(to_run)
    may_add = [c for c in later if not skip_reason(c)]
    walls = _walls_by_config(history)
    if earlier_walls is not None:  # the results store: earlier runs of the same configuration
        walls = {**earlier_walls({c.config_id for c in [*to_run, *may_add]} - set(walls)),
                 **walls}
    estimate = {c.cell_id: _estimate(c, walls) for c in [*to_run, *may_add]}
    return Plan(to_run=to_run, skipped=skipped, estimate_s=estimate, may_add=may_add)


def _config_reason(cell: Cell, local: LocalMachine, selectors: list[Selector],
                   cluster_hardware: Mapping[str, int] | None, launch: bool) -> str | None:
    """Why every cell of `cell`'s configuration is skipped whatever its repeat (each is
    judged by its hardware, stack, workload and parameters alone), or None."""
    if not all(s.matches(cell) for s in selectors):
        return "not selected (--only)"
    problem = incompatibility(cell)
    if problem:
        return f"incompatible: {problem}"
    if cluster_hardware is None:  # this machine, or nodes the hardware's provider brings up
        reason = provider_for(cell.hardware.kind).skip_reason(cell, local, launch)
        if reason:
            return reason
    elif cell.hardware.name not in cluster_hardware:
        return f"no node of the cluster offers hw:{cell.hardware.name}"
    elif (offered := cluster_hardware[cell.hardware.name]) < cell.hardware.nodes:
        return (f"needs {cell.hardware.nodes} nodes offering hw:{cell.hardware.name}; the "
                f"cluster has {offered}")
    return None


def _one_machine_can_run(cells: list[Cell]) -> None:
    """NodesError for a cell across nodes that would run here: --no-ray and the embedded
    Ray run every cell on this one machine. A launching provider brings its own nodes."""
    for cell in cells:
        hardware = cell.hardware
        if hardware.nodes > 1 and not provider_for(hardware.kind).launches:
            raise NodesError(f"hardware {hardware.name} has nodes: {hardware.nodes}: a cell "
                             "across nodes runs on a Ray cluster whose nodes offer "
                             f"hw:{hardware.name} (--ray-address); without one, every cell "
                             "runs on this one machine")


def _walls_by_config(history: list[CellResult]) -> dict[str, list[float]]:
    walls: dict[str, list[float]] = {}
    for result in history:
        if result.cell.status.is_done():
            walls.setdefault(result.cell.config_id, []).append(result.cell.wall_s)
    return walls


def _estimate(cell: Cell, walls: dict[str, list[float]]) -> float | None:
    if cell.config_id in walls:
        return statistics.median(walls[cell.config_id])
    per_epoch = declared(cell).estimate_s_per_epoch.get(
        str(cell.params.get("preset", "")))
    return None if per_epoch is None else CELL_STARTUP_S + per_epoch * cell.epochs
