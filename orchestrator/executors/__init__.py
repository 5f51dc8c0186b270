"""Executors run one cell and return its records. Each is registered under the name a stack
gives as its `executor`: `process` (this Python environment) and `docker` (a container of
the stack's image) register below; a new one is one new module and one
`register_executor` call (docs/ARCHITECTURE.md: executors).

Both built-ins start `python -m orchestrator.worker CELL_FILE OUT_FILE`
(docs/ARCHITECTURE.md: worker input and output) and hand the exit status and OUT_FILE to
`outcome.records_for`, which turns them into journal records, so every executor classifies
failures the same way.

The registry (orchestrator/registry/executors.py, re-exported here for plugin authors) holds
light declarations (`ExecutorKind`): the matrix's checks, the plan and the images read them
without importing an implementation, which is loaded only when a cell runs or a run is
cleaned up. Installed distributions add theirs by entry point (`matrix_bench.executors`,
orchestrator/plugins.py), read the first time the registry is, in every process.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.registry.executors import (
    Executor,
    ExecutorKind,
    ImageNeed,
    executor_kind,
    executor_names,
    needs_image,
    register_executor,
)

if TYPE_CHECKING:
    from orchestrator.executors.outcome import ToolInfo
    from orchestrator.images.ref import ImageRef
    from orchestrator.plan.cells import Cell
    from orchestrator.results.records import Record

__all__ = ["Executor", "ExecutorKind", "ImageNeed", "execute", "executor_kind",
           "executor_names", "needs_image", "register_executor", "remove_leftovers"]


def execute(cell: Cell, run_root: Path, tool: ToolInfo, images: dict[str, ImageRef],
            node_id: str | None = None,
            on_start: Callable[[], None] | None = None) -> list[Record]:
    """Run `cell` with its stack's executor; `images` maps stack names to built images."""
    executor = executor_kind(cell.stack.effective_executor).load()
    return executor.run_cell(cell, run_root, tool, images.get(cell.stack.name), node_id,
                             on_start)


def remove_leftovers(run: str, names: list[str]) -> int:
    """What killed sweeps of `run` left behind on this machine, removed by the executors
    called `names`; how many things."""
    return sum(executor_kind(name).load().remove_leftovers(run) for name in sorted(set(names)))
