"""Expansion: a pure function from a MatrixSpec to the sorted list of its cells.

A cell is hardware (each entry once per node count it lists) x stack x workload x one
parameter combination x one repeat, named by its `config_id` and `cell_id` (identity.py).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import SpecWarning
from orchestrator.plan.identity import cell_id_of, config_hash, model_identity
from orchestrator.plan.retry import outcome_inputs
from orchestrator.registry.cell_run import Cell
from orchestrator.spec.command_workloads import substitute
from orchestrator.spec.loaded import remembered, workloads_of
from orchestrator.spec.located_yaml import LocatedYaml
from orchestrator.spec.model import (
    HARD_MAX_CELLS,
    Hardware,
    MatrixSpec,
    Rule,
    Stack,
    WorkloadEntry,
    entry_grid,
)
from orchestrator.worker.cuda_support import architecture_problem
from orchestrator.workload_registry import Scalar, WorkloadInfo, load_workload


def declared(cell: Cell) -> WorkloadInfo:
    """The cell's workload declaration: the one it carries (any but a built-in's, from the
    matrix that made it), else the built-in's."""
    return cell.workload_info or load_workload(cell.workload)


def as_repeat(cell: Cell, repeat: int) -> Cell:
    """The same configuration's cell for another repeat (adaptive repeats add them)."""
    return cell.model_copy(update={"repeat": repeat,
                                   "cell_id": cell_id_of(cell.config_id, repeat)})


def expand(spec: MatrixSpec) -> list[Cell]:
    """The cells of the matrix after exclude and include rules, sorted, without duplicates."""
    return [cell for cell, reason in _all_cells(spec) if reason is None]


def excluded(spec: MatrixSpec) -> list[tuple[Cell, str]]:
    """The cells of the cross product that an exclude rule removed, with the rule."""
    return [(cell, reason) for cell, reason in _all_cells(spec) if reason is not None]


def incompatibility(cell: Cell) -> str | None:
    """Why `cell` cannot run on its hardware, or None. Pure: judged from declarations only."""
    info = declared(cell)
    pinned = cell.stack.framework
    if info.framework and pinned and info.framework != pinned:
        return (f"{cell.workload} runs on {info.framework}; stack {cell.stack.name} pins "
                f"{pinned}")
    if cell.hardware.nodes > 1 and not info.spans_nodes:
        return (f"{cell.workload} runs on one node; {cell.hardware.name} has nodes: "
                f"{cell.hardware.nodes}")
    if why := cuda_gap(cell):
        return why
    for name, value in cell.params.items():
        decl = info.params[name]
        if cell.hardware.gpus == 0 and value in decl.gpu_only:
            return f"{name}={value} needs a GPU and {cell.hardware.name} has gpus: 0"
        if decl.stack_framework and pinned is not None and value != pinned:
            return (f"{name}={value} needs a stack with {value}; stack {cell.stack.name} "
                    f"pins {pinned}")
    return None


def gpu_model_of(hardware: Hardware) -> str | None:
    """The GPU a hardware entry's cells get: its own `gpu_model`, else the one its kind's
    settings know for its instance type (EC2's catalogue, providers/aws/); None for CPU
    hardware or a GPU no one named."""
    if hardware.gpus == 0:
        return None
    if hardware.gpu_model or not hardware.instance_type:
        return hardware.gpu_model
    return hardware.settings.instance_gpu_model(hardware.instance_type)


def cuda_gap(cell: Cell) -> str | None:
    """Why the stack's CUDA cannot drive the GPU of the cell's hardware (CUDA 13 and a
    V100), or None; such a cell can never run (worker/cuda_support.py)."""
    gpu = gpu_model_of(cell.hardware)
    why = architecture_problem(gpu, cell.stack.cuda) if gpu and cell.stack.cuda else None
    return f"{cell.hardware.name}: {why}" if why else None


def _all_cells(spec: MatrixSpec) -> list[tuple[Cell, str | None]]:
    """Expanded once per loaded matrix, kept on it (spec/loaded.py): load, validate and plan
    each expand the same frozen spec, and a 10,000-cell grid takes a good part of a second."""
    return remembered(spec, "cells", lambda: _expanded(spec))


def _cross_product(spec: MatrixSpec) -> list[Cell]:
    """The cross product's cells, built once per loaded matrix: check_grid reads them at
    load and expand at plan (building a 10,000-cell grid's ids twice cost half a second)."""
    return remembered(spec, "crossed", lambda: list(_crossed(spec)))


def _expanded(spec: MatrixSpec) -> list[tuple[Cell, str | None]]:
    chosen: dict[str, tuple[Cell, str | None]] = {}
    for cell in _cross_product(spec):
        rule = next((r for r in spec.exclude if _matches(r, cell)), None)
        reason = None if rule is None else f"excluded by {_describe(rule)}"
        chosen.setdefault(cell.cell_id, (cell, reason))
    for rule in spec.include:
        for cell in _included(spec, rule):
            chosen[cell.cell_id] = (cell, None)  # include wins over exclude
    orders: dict[str, tuple[object, ...]] = {}
    return sorted(chosen.values(), key=lambda pair: _sort_key(pair[0], orders))


def _crossed(spec: MatrixSpec) -> Iterator[Cell]:
    """The cells of the cross product, before any rule."""
    for hardware, stack, entry in itertools.product(_hardware(spec), spec.stacks,
                                                    spec.workloads):
        frame = _frame(spec, hardware, stack, entry)
        for params in _combinations(entry_grid(entry)):
            yield from _cells(frame, params)


def _hardware(spec: MatrixSpec) -> list[Hardware]:
    """The hardware axis: each entry once per node count it lists (`nodes: [1, 2]`)."""
    return [variant for hardware in spec.hardware for variant in hardware.node_variants()]


def _included(spec: MatrixSpec, rule: Rule) -> Iterator[Cell]:
    """The cells an include rule adds: its workload's grid, its params replacing axes."""
    entry = spec.workload_entry(str(rule.workload))
    grid = entry_grid(entry) | {k: v if isinstance(v, list) else [v]
                                for k, v in rule.params.items()}
    for hardware, stack in itertools.product(_hardware(spec), spec.stacks):
        if _name_matches(rule.hardware, hardware.name) and _name_matches(rule.stack, stack.name):
            frame = _frame(spec, hardware, stack, entry)
            for params in _combinations(grid):
                yield from _cells(frame, params)


def check_grid(spec: MatrixSpec, doc: LocatedYaml) -> None:
    """Refuse a grid that cannot be what its author meant: more cells than `max_cells`
    (counted before any is built), an exclude rule whose cells the includes all add back,
    or no cell left at all; warn of a rule that changes nothing (an exclude matching no
    cell, an include adding none). Include wins over exclude: excluding a set and
    including part of it back is how a grid is carved."""
    sizes = [math.prod(len(v) for v in entry_grid(e).values()) for e in spec.workloads]
    total = sum(sizes) * len(_hardware(spec)) * len(spec.stacks) * spec.max_repeats
    for rule in spec.include:
        grid = entry_grid(spec.workload_entry(str(rule.workload))) | {
            k: v if isinstance(v, list) else [v] for k, v in rule.params.items()}
        total += math.prod(len(v) for v in grid.values()) * len(_hardware(spec)) * \
            len(spec.stacks) * spec.max_repeats
    if total > spec.max_cells:
        biggest = max(range(len(sizes)), key=sizes.__getitem__)
        # Point at what blew it up: the repeats, when the grid itself fits.
        where = ("repeats",) if total // spec.max_repeats <= spec.max_cells else (
            "workloads", biggest, "params")
        remedy = ("narrow the grid (max_cells goes no higher)"
                  if spec.max_cells >= HARD_MAX_CELLS else
                  "narrow the grid, or raise max_cells (a top-level key) if you mean it")
        raise doc.error(where, f"the matrix expands to {total:,} cells, over max_cells "
                               f"{spec.max_cells:,}: {remedy}")
    crossed = _cross_product(spec)
    included = [{c.cell_id for c in _included(spec, rule)} for rule in spec.include]
    added_back = set().union(*included)
    for index, rule in enumerate(spec.exclude):
        removed = {c.cell_id for c in crossed if _matches(rule, c)}
        if not removed:  # a warning: a templated matrix may carry a rule for other cases
            warnings.warn(str(doc.error(("exclude", index), "this rule matches no cell of "
                                        "the matrix (a typo, or a rule left over?)")),
                          SpecWarning, stacklevel=2)
        elif removed <= added_back:
            raise doc.error(("exclude", index), "this rule has no effect: the include rules "
                                                "add back every cell it removes")
    kept = {c.cell_id for c in crossed if not any(_matches(r, c) for r in spec.exclude)}
    for index, cells in enumerate(included):
        if cells <= kept:
            warnings.warn(str(doc.error(("include", index), "this rule adds no cell: each "
                                        "one is in the matrix already")),
                          SpecWarning, stacklevel=2)
    if not expand(spec):
        raise doc.error(("exclude",), "no cell is left once the exclude rules are applied")


def _combinations(grid: dict[str, list[Scalar]]) -> Iterator[dict[str, Scalar]]:
    keys = sorted(grid)
    for values in itertools.product(*(grid[k] for k in keys)):
        yield dict(zip(keys, values, strict=True))


@dataclass(frozen=True)
class _Frame:
    """What every configuration of one (hardware, stack, workload entry) shares, worked out
    once rather than per configuration: a 10,000-cell grid has 1,000 configurations of one
    such triple, each of which dumped both models and fingerprinted the same inputs."""

    spec: MatrixSpec
    hardware: Hardware
    stack: Stack
    entry: WorkloadEntry
    info: WorkloadInfo
    epochs: int
    identities: tuple[dict[str, Any], dict[str, Any]]  # the hardware's and stack's
    own: WorkloadInfo | None  # the declaration a cell carries: none for a built-in
    module: str | None  # an installed package's workload's package
    timeout_s: float
    inputs: str


def _frame(spec: MatrixSpec, hardware: Hardware, stack: Stack, entry: WorkloadEntry) -> _Frame:
    workloads = workloads_of(spec)
    info = workloads.load(entry.name)
    timeout_s = entry.timeout_s or info.timeout_s
    return _Frame(
        spec=spec, hardware=hardware, stack=stack, entry=entry, info=info,
        epochs=entry.epochs or info.epochs,
        identities=(model_identity(hardware), model_identity(stack)),
        own=None if workloads.source(info.name) == "built-in" else info,
        module=workloads.package_module(info.name), timeout_s=timeout_s,
        inputs=outcome_inputs(stack, timeout_s, entry.memory_limit_mb, spec.images.locks))


def _cells(frame: _Frame, given: dict[str, Scalar]) -> Iterator[Cell]:
    """One configuration's cells, a cell per repeat: the first validated, the others its
    copies with their own repeat and id (the same as validating each, at a fraction)."""
    info, entry, epochs = frame.info, frame.entry, frame.epochs
    params = info.resolve(given)
    config_id = config_hash(*frame.identities, info, params, epochs, profile=entry.profile)
    command = None if entry.command is None else substitute(entry.command, params, epochs)
    first = Cell(
        run=frame.spec.name, hardware=frame.hardware, stack=frame.stack, workload=info.name,
        workload_version=info.version, item_unit=info.item_unit, params=params,
        epochs=epochs, repeat=1, timeout_s=frame.timeout_s,
        memory_limit_mb=entry.memory_limit_mb, config_id=config_id,
        cell_id=cell_id_of(config_id, 1), workload_dir=entry.path,
        workload_module=frame.module, command=command,
        command_cwd=entry.cwd if command else None, workload_info=frame.own,
        profile=entry.profile, inputs=frame.inputs,
    )
    yield first
    for repeat in range(2, frame.spec.min_repeats + 1):
        yield as_repeat(first, repeat)


def _name_matches(wanted: str | list[str] | None, name: str) -> bool:
    return wanted is None or name == wanted or (isinstance(wanted, list) and name in wanted)


def _matches(rule: Rule, cell: Cell) -> bool:
    if not (_name_matches(rule.hardware, cell.hardware.name)
            and _name_matches(rule.stack, cell.stack.name)
            and _name_matches(rule.workload, cell.workload)):
        return False
    for key, wanted in rule.params.items():
        values = wanted if isinstance(wanted, list) else [wanted]
        if key not in cell.params or cell.params[key] not in values:
            return False
    return True


def _describe(rule: Rule) -> str:
    parts = [f"{k}={v}" for k, v in rule.model_dump(exclude_defaults=True).items()
             if k != "params"]
    parts += [f"{k}={v}" for k, v in rule.params.items()]
    return "exclude rule (" + ", ".join(parts) + ")"


def _sort_key(cell: Cell, orders: dict[str, tuple[object, ...]]) -> tuple[object, ...]:
    """Repeats outermost, so drift over a long sweep spreads over every configuration alike.
    A configuration's parameters are ordered once (`orders`, by config_id, which hashes
    them) for all its repeats."""
    params = orders.get(cell.config_id)
    if params is None:
        params = orders[cell.config_id] = tuple(
            (k, _orderable(v)) for k, v in sorted(cell.params.items()))
    return (cell.repeat, cell.hardware.name, cell.stack.name, cell.workload, params,
            cell.cell_id)


def _orderable(value: Scalar) -> tuple[int, object, str]:
    return (0, value, "") if isinstance(value, int | float) else (1, 0, str(value))
