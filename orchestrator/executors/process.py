"""The process executor: run a cell's worker as a subprocess of this Python environment.

The subprocess is the fault boundary: a crash, an out-of-memory kill or a timeout ends that
cell alone. The cell's whole process group is killed at its timeout, so nothing it started
lingers. A stack's declared pins (Python, framework version) are checked against this
environment first; a mismatch is the status `stack_mismatch`, and nothing runs.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from orchestrator.executors.outcome import ToolInfo, WorkerExit, records_for
from orchestrator.matrix import Cell
from orchestrator.records import Record, Status
from orchestrator.spec import Stack

PROJECT_ROOT = Path(__file__).resolve().parents[2]
KILL_GRACE_S = 3.0
FRAMEWORK_DISTRIBUTIONS = {
    "torch": ("torch",),
    "tensorflow": ("tensorflow", "tensorflow-cpu"),
    "jax": ("jax",),
}


def run_cell(cell: Cell, run_root: Path, tool: ToolInfo,
             node_id: str | None = None) -> list[Record]:
    """Run `cell` in a worker subprocess and return its journal records."""
    cell_file = run_root / "cells" / f"{cell.cell_id}.json"
    out_file = run_root / "cells" / f"{cell.cell_id}.out.jsonl"
    log_file = run_root / "logs" / f"{cell.cell_id}.log"
    for folder in (cell_file.parent, log_file.parent):
        folder.mkdir(parents=True, exist_ok=True)
    cell_file.write_text(cell.model_dump_json(indent=2))
    out_file.unlink(missing_ok=True)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")

    mismatch = stack_mismatch(cell.stack)
    if mismatch:
        log_file.write_text(f"stack check: {mismatch}\n")
        exit = WorkerExit(returncode=None, timed_out=False, started_at=started_at, wall_s=0.0,
                          node_id=node_id)
        return records_for(cell, exit, out_file, log_file, tool,
                           status_override=(Status.STACK_MISMATCH, mismatch))

    start = time.perf_counter()
    with open(log_file, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.worker", str(cell_file), str(out_file)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=_worker_env(cell), cwd=run_root, start_new_session=True,
            preexec_fn=_limit_memory(cell.memory_limit_mb),
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
            raise
        finally:
            deadline.cancel()
        timed_out = fired.is_set()
        if timed_out:
            returncode = None
    exit = WorkerExit(returncode=returncode, timed_out=timed_out, started_at=started_at,
                      wall_s=time.perf_counter() - start, node_id=node_id)
    return records_for(cell, exit, out_file, log_file, tool)


def stack_mismatch(stack: Stack) -> str | None:
    """Why this environment is not the stack it claims to be, or None."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    if stack.python and not _version_matches(stack.python, here):
        return f"stack {stack.name} declares Python {stack.python}, this environment has {here}"
    if stack.framework and stack.framework_version:
        installed = _installed_version(stack.framework)
        if installed is None:
            return f"stack {stack.name} declares {stack.framework} {stack.framework_version}, " \
                   f"which is not installed here"
        if not _version_matches(stack.framework_version, installed):
            return f"stack {stack.name} declares {stack.framework} {stack.framework_version}, " \
                   f"this environment has {installed}"
    return None


def _version_matches(declared: str, actual: str) -> bool:
    """"2.13" matches "2.13.0+cpu": every declared component equals the actual one."""
    wanted = declared.split(".")
    have = actual.split("+")[0].split(".")
    return have[: len(wanted)] == wanted


def _installed_version(framework: str) -> str | None:
    for distribution in FRAMEWORK_DISTRIBUTIONS.get(framework, (framework,)):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None


def _worker_env(cell: Cell) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT),
                                                      env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    if cell.hardware.gpus == 0:
        env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU cell must not touch a GPU the machine has
    return env


def _limit_memory(limit_mb: int | None):
    if limit_mb is None:
        return None
    limit = limit_mb * 1024 * 1024

    def apply() -> None:  # runs in the child between fork and exec
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def _kill_group(process: subprocess.Popen) -> None:
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
