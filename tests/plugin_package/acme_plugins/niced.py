"""The `niced` executor: the worker at the lowest CPU priority (`nice -n 19`), started by the
public launch, so it keeps every guarantee a worker has (no credential, the cell's timeout
over its whole process group, nothing left running, the memory limit) without copying any."""

from __future__ import annotations

import dataclasses
from typing import Any

from orchestrator.executors import CellRun, ExecutorKind, launch_worker


class NicedExecutor:
    def run_cell(self, run: CellRun) -> list[Any]:
        return launch_worker(dataclasses.replace(run, node_id=f"niced:{run.node_id}"),
                             wrapper=["nice", "-n", "19"], extra_env={"ACME_NICENESS": "19"})

    def remove_leftovers(self, run: str) -> int:
        return 0

    def stop_cell(self, cell: Any) -> None:
        pass


KIND = ExecutorKind("niced", image=None, load=NicedExecutor)
