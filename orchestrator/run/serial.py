"""`--no-ray`: cells one after another in this process's environment, without Ray. Like
the Ray dispatcher (dispatch.py) it yields each cell's records as it ends and asks the
sweep's `CellPolicy` (cell_policy.py) whether a cell starts and how its end counts."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

from orchestrator.executors import execute
from orchestrator.registry.cell_run import Cell, ImageRef, ToolInfo
from orchestrator.results.records import Record
from orchestrator.run.cell_policy import CellPolicy


class SerialDispatcher:
    """Runs cells one after another in this environment; needs no Ray."""

    def __init__(self, run_root: Path, tool: ToolInfo) -> None:
        self.run_root, self.tool = run_root, tool
        self.node_id = f"local:{socket.gethostname()}"

    def cluster_hardware(self) -> set[str] | None:
        """None: only this machine, which the plan judges itself."""
        return None

    def run(self, cells: list[Cell], images: dict[str, ImageRef],
            policy: CellPolicy | None = None) -> Iterator[tuple[Cell, list[Record]]]:
        policy = policy or CellPolicy()
        for cell in cells:
            refused = policy.refusal(cell, [])  # none runs beside it: it never waits
            if refused is not None:
                yield cell, policy.stopped(cell, refused.reason)
                continue
            records = execute(cell, self.run_root, self.tool, images, node_id=self.node_id)
            yield cell, policy.ended(cell, records)

    def close(self) -> None:
        pass
