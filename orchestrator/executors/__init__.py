"""Executors run one cell and return its records: `process` (this Python environment) and
`docker` (a container of the stack's image), chosen by the stack (Contracts: executors).

Both start `python -m orchestrator.worker CELL_FILE OUT_FILE` (Contracts: worker input and
output) and hand the exit status and OUT_FILE to `outcome.records_for`, which turns them into
journal records, so every executor classifies failures the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.executors.outcome import ToolInfo
    from orchestrator.images import ImageRef
    from orchestrator.matrix import Cell
    from orchestrator.records import Record


def execute(cell: Cell, run_root: Path, tool: ToolInfo, images: dict[str, ImageRef],
            node_id: str | None = None,
            on_start: Callable[[], None] | None = None) -> list[Record]:
    """Run `cell` with its stack's executor; `images` maps stack names to built images.
    `on_start` is called when the cell's own clock starts (its worker or container is up),
    so that a dispatcher can hold the cell to its timeout from outside too."""
    if cell.stack.effective_executor == "docker":
        from orchestrator.executors import docker

        return docker.run_cell(cell, run_root, tool, images.get(cell.stack.name), node_id,
                               on_start)
    from orchestrator.executors import process

    return process.run_cell(cell, run_root, tool, node_id=node_id, on_start=on_start)
