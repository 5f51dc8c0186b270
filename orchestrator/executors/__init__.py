"""Executors run one cell and return its records. Each is registered under the name a stack
gives as its `executor`: `process` (this Python environment) and `docker` (a container of
the stack's image) are registered by the registry itself (orchestrator/registry/
executors.py), others by their entry points; a new one is one new module (or folder) and
one registration (docs/ARCHITECTURE.md: an executor).

Every executor is handed a `CellRun` and starts `python -m orchestrator.worker CELL_FILE
OUT_FILE` (docs/ARCHITECTURE.md: worker input and output), on this machine through the
public `launch_worker` (executors/launch.py: every guarantee a worker has), or in a
container (executors/container.py); each hands the exit status and OUT_FILE to
`outcome.records_for`, which turns them into journal records, so every executor classifies
failures the same way.

The registry holds light declarations (`ExecutorKind`): the matrix's checks, the plan and
the images read them without importing an implementation, which is loaded only when a cell
runs or a run is cleaned up. Installed distributions add theirs by entry point
(`matrix_bench.executors`, orchestrator/plugins.py), read the first time the registry is,
in every process; `register_executor` adds one in this process only. This package
re-exports what a plugin author needs, with the types its interface names (`Cell`,
`CellRun`, `ImageRef`, `ToolInfo`: registry/cell_run.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.executors.launch import LaunchRefused, launch_worker
from orchestrator.registry.cell_run import Cell, CellRun, ImageRef, ToolInfo
from orchestrator.registry.executors import (
    Executor,
    ExecutorKind,
    ImageNeed,
    executor_kind,
    executor_names,
    needs_image,
    register_executor,
)
from orchestrator.spec.entry_settings import ExecutorSettings
from orchestrator.worker.nodes import NodePlace

if TYPE_CHECKING:
    from orchestrator.results.records import Record

__all__ = ["Cell", "CellRun", "Executor", "ExecutorKind", "ExecutorSettings", "ImageNeed",
           "ImageRef", "LaunchRefused", "NodePlace", "ToolInfo", "execute",
           "executor_kind", "executor_names", "launch_worker", "needs_image",
           "register_executor", "remove_leftovers"]


def execute(cell: Cell, run_root: Path, tool: ToolInfo, images: dict[str, ImageRef],
            node_id: str | None = None, on_start: Callable[[], None] | None = None,
            node: NodePlace | None = None) -> list[Record]:
    """Run `cell` with its stack's executor; `images` maps stack names to built images;
    `node`: this worker's place in a cell across nodes."""
    executor = executor_kind(cell.stack.effective_executor).load()
    return executor.run_cell(CellRun(cell, run_root, tool, images.get(cell.stack.name),
                                     node_id, on_start, node or NodePlace()))


def remove_leftovers(run: str, names: list[str]) -> int:
    """What killed sweeps of `run` left behind on this machine, removed by the executors
    called `names`; how many things."""
    return sum(executor_kind(name).load().remove_leftovers(run) for name in sorted(set(names)))
