"""The process executor: run a cell's worker as a subprocess of this Python environment.

The subprocess is the fault boundary: a crash, an out-of-memory kill or a timeout ends that
cell alone. The public launch (executors/launch.py) keeps every guarantee: no credential,
the cell's GPUs and memory limit, its process group killed at the timeout, nothing it
started left running. The worker checks the stack's declared pins against this environment
before it runs anything (orchestrator/worker/stack_check.py).
"""

from __future__ import annotations

from orchestrator.executors.launch import launch_worker
from orchestrator.registry.cell_run import Cell, CellRun
from orchestrator.results.records import Record


class ProcessExecutor:
    """The registered `process` executor (orchestrator/executors/__init__.py)."""

    def run_cell(self, run: CellRun) -> list[Record]:
        return launch_worker(run)

    def remove_leftovers(self, run: str) -> int:
        return 0  # a worker's process group dies with its cell, or with the sweep

    def stop_cell(self, cell: Cell) -> None:
        """Nothing: the cell's executor, still running in its Ray worker, owns the group."""


EXECUTOR = ProcessExecutor()
