"""The process executor: run a cell's worker as a subprocess of this Python environment.

The subprocess is the fault boundary: a crash, an out-of-memory kill or a timeout ends that
cell alone. The cell's whole process group is killed at its timeout, so nothing it started
lingers. The worker checks the stack's declared pins against this environment before it
runs anything (orchestrator/worker/stack_check.py).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.executors.environment import worker_environment
from orchestrator.executors.leftovers import CELL_MARK, end_leftovers, new_mark
from orchestrator.executors.outcome import CellFiles, ToolInfo, WorkerExit, records_for
from orchestrator.plan.cells import Cell
from orchestrator.results.records import Record
from orchestrator.worker.host import die_with_parent_setter

if TYPE_CHECKING:
    from orchestrator.images.ref import ImageRef

PROJECT_ROOT = Path(__file__).resolve().parents[2]
KILL_GRACE_S = 3.0


def run_cell(cell: Cell, run_root: Path, tool: ToolInfo, node_id: str | None = None,
             on_start: Callable[[], None] | None = None) -> list[Record]:
    """Run `cell` in a worker subprocess and return its journal records."""
    files = CellFiles.prepare(cell, run_root)
    start = time.perf_counter()
    mark = new_mark()  # every process the cell starts inherits it (leftovers.py)
    if on_start is not None:  # before the worker exists: whoever sees it, sees it started
        on_start()
    with open(files.log, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.worker", str(files.cell), str(files.out)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**_worker_env(cell), CELL_MARK: mark}, cwd=run_root,
            start_new_session=True, preexec_fn=_child_setup(cell.memory_limit_mb),
        )
        # A blocking wait returns the moment the worker exits; Popen.wait(timeout=...) polls
        # with sleeps of up to 50 ms, which cost every cell about 35 ms (bench/overhead.py).
        fired = threading.Event()

        def on_timeout() -> None:
            fired.set()
            _kill_group(process)

        deadline = threading.Timer(cell.timeout_s, on_timeout)
        deadline.daemon = True
        deadline.start()
        try:
            returncode: int | None = process.wait()
        except BaseException:  # Ctrl-C or a cancelled Ray task: take the worker down too
            _kill_group(process)
            end_leftovers(mark)
            raise
        finally:
            deadline.cancel()
        timed_out = fired.is_set()
        if timed_out:
            returncode = None
    wall_s = time.perf_counter() - start
    left = end_leftovers(mark)  # after the clock: ending them is not the cell's time
    exit = WorkerExit(returncode=returncode, timed_out=timed_out, started_at=files.started_at,
                      wall_s=wall_s, node_id=node_id, leftovers=tuple(left))
    return records_for(cell, exit, files, tool)


def _worker_env(cell: Cell) -> dict[str, str]:
    """What this environment allows a worker (`environment.worker_environment`: no
    credential), plus the project on the path, and exactly the cell's GPUs visible: none
    for a CPU cell, the first `gpus` of those visible here otherwise (Ray has already chosen
    them for a Ray task), so that the worker's probes and its recorded gpu_count are the
    cell's own."""
    env = worker_environment(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT),
                                                      env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    visible = env.get("CUDA_VISIBLE_DEVICES")
    ids = visible.split(",") if visible else [str(i) for i in range(cell.hardware.gpus)]
    env["CUDA_VISIBLE_DEVICES"] = ",".join(ids[:cell.hardware.gpus])
    return env


def _child_setup(limit_mb: int | None) -> Callable[[], None]:
    """What the worker does between fork and exec: die with the executor that started it
    (a SIGKILLed sweep or a lost Ray node leaves no worker behind to write into the run
    directory), and stay under the cell's memory limit (RLIMIT_AS: a real MemoryError)."""
    parent = os.getpid()
    die_with_parent = die_with_parent_setter()
    limit = None if limit_mb is None else limit_mb * 1024 * 1024

    def apply() -> None:
        die_with_parent()
        if os.getppid() != parent:  # the executor died before the line above
            os._exit(1)
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the worker's process group, then SIGKILL what is left after a grace period."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            if sig == signal.SIGTERM:
                os.killpg(process.pid, signal.SIGKILL)  # children may outlive the leader
            return
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


class ProcessExecutor:
    """The registered `process` executor (orchestrator/executors/__init__.py)."""

    def run_cell(self, cell: Cell, run_root: Path, tool: ToolInfo, image: ImageRef | None,
                 node_id: str | None, on_start: Callable[[], None] | None) -> list[Record]:
        return run_cell(cell, run_root, tool, node_id=node_id, on_start=on_start)

    def remove_leftovers(self, run: str) -> int:
        return 0  # a worker's process group dies with its cell, or with the sweep

    def stop_cell(self, cell: Cell) -> None:
        """Nothing: the cell's executor, still running in its Ray worker, owns the group."""


EXECUTOR = ProcessExecutor()
