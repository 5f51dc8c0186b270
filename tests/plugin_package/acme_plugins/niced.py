"""The `niced` executor: the worker at a low CPU priority (`nice -n 19`, or the stack's own
`niceness`), started by the public launch, so it keeps every guarantee a worker has (no
credential, the cell's timeout over its whole process group, nothing left running, the
memory limit) without copying any."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import Field

from orchestrator.executors import Cell, CellRun, ExecutorKind, ExecutorSettings, launch_worker


class NicedSettings(ExecutorSettings):
    niceness: int = Field(default=19, ge=0, le=19)  # a stack's own key: `niceness: 10`


class NicedExecutor:
    def run_cell(self, run: CellRun) -> list[Any]:
        niceness = str(run.cell.stack.settings.niceness)
        return launch_worker(dataclasses.replace(run, node_id=f"niced:{run.node_id}"),
                             wrapper=["nice", "-n", niceness],
                             extra_env={"ACME_NICENESS": niceness})

    def remove_leftovers(self, run: str) -> int:
        return 0

    def stop_cell(self, cell: Cell) -> None:
        pass


KIND = ExecutorKind("niced", image=None, load=NicedExecutor, settings=NicedSettings)
