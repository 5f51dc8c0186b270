"""The `niced` executor: the worker at the lowest CPU priority (`nice -n 19`), through the
building blocks every executor shares (the cell's files, the worker, the outcome)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.executors import ExecutorKind
from orchestrator.executors.outcome import CellFiles, ToolInfo, WorkerExit, records_for


class NicedExecutor:
    def run_cell(self, cell: Any, run_root: Path, tool: ToolInfo, image: object,
                 node_id: str | None, on_start: Callable[[], None] | None) -> list[Any]:
        files = CellFiles.prepare(cell, run_root)
        if on_start is not None:
            on_start()
        start = time.perf_counter()
        with open(files.log, "wb") as log:
            try:
                returncode: int | None = subprocess.run(
                    ["nice", "-n", "19", sys.executable, "-m", "orchestrator.worker",
                     str(files.cell), str(files.out)], stdout=log, stderr=subprocess.STDOUT,
                    timeout=cell.timeout_s, check=False).returncode
                timed_out = False
            except subprocess.TimeoutExpired:
                returncode, timed_out = None, True
        exit = WorkerExit(returncode=returncode, timed_out=timed_out,
                          started_at=files.started_at, wall_s=time.perf_counter() - start,
                          node_id=f"niced:{node_id}")
        return records_for(cell, exit, files, tool, {})

    def remove_leftovers(self, run: str) -> int:
        return 0

    def stop_cell(self, cell: Any) -> None:
        pass


KIND = ExecutorKind("niced", image=None, load=NicedExecutor)
