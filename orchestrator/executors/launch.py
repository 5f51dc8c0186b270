"""Starting a cell's worker as a process of this machine, with every guarantee a worker has.

This is the public launch: the process executor is one call of it, and an executor of a
plugin that runs the worker here (through a wrapper: `nice`, `numactl`, a profiler, a
container CLI that stays in the foreground) calls it too, so it keeps, without copying any:

- the environment: an allow-list, never a copy, so no credential of the driver reaches
  the worker (executors/environment.py); the cell's GPUs exactly; what `extra_env` adds,
  unless it names a credential;
- the timeout: the worker's whole process group is ended at the cell's `timeout_s`
  (SIGTERM, then SIGKILL after a grace), as is it on Ctrl-C or a cancelled Ray task;
- nothing left running: every process the cell started, in any group or session, is ended
  when it ends, and its record says so (executors/leftovers.py);
- a cell across nodes: this node's own files and the rendezvous (`CellRun.node`:
  NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT, worker/nodes.py);
- the memory limit (RLIMIT_AS: a real MemoryError), and death with the executor that
  started it (a killed sweep leaves no worker writing into its run);
- the cell's records: its exit turned into journal records as every executor's is
  (executors/outcome.py), failures as data, never an exception.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from orchestrator.executors.environment import withheld, worker_environment
from orchestrator.executors.leftovers import CELL_MARK, end_leftovers, new_mark
from orchestrator.executors.outcome import CellFiles, WorkerExit, records_for
from orchestrator.registry.cell_run import Cell, CellRun
from orchestrator.results.records import Record
from orchestrator.worker.host import die_with_parent_setter
from orchestrator.worker.nodes import RENDEZVOUS_ENV

PROJECT_ROOT = Path(__file__).resolve().parents[2]
KILL_GRACE_S = 3.0
# what the launch itself sets: an executor's extra_env cannot change them
OWN_NAMES = frozenset({CELL_MARK, "CUDA_VISIBLE_DEVICES", "PYTHONPATH", "PYTHONUNBUFFERED",
                       *RENDEZVOUS_ENV})


class LaunchRefused(ValueError):
    """An executor asked the launch for what would break a guarantee (a bug of the
    executor, not of the cell): a credential in `extra_env`, an empty wrapper word."""


def launch_worker(run: CellRun, wrapper: Sequence[str] = (),
                  extra_env: Mapping[str, str] | None = None) -> list[Record]:
    """Run `run.cell`'s worker here (`python -m orchestrator.worker CELL_FILE OUT_FILE`,
    after the `wrapper` words, as an argument list) and return its records.

    `extra_env` adds variables to the worker's environment: none that names a credential,
    none the launch sets itself. Raises LaunchRefused, before anything starts, where the
    wrapper or `extra_env` would break a guarantee."""
    environment = _checked_env(extra_env or {})
    if any(not isinstance(word, str) or not word for word in wrapper):
        raise LaunchRefused(f"a wrapper is a list of non-empty words, not {list(wrapper)!r}")
    cell = run.cell
    files = CellFiles.prepare(cell, run.run_root, run.node.node_rank)
    start = time.perf_counter()
    mark = new_mark()  # every process the cell starts inherits it (leftovers.py)
    run.started()
    with open(files.log, "wb") as log:
        process = subprocess.Popen(
            [*wrapper, sys.executable, "-m", "orchestrator.worker", str(files.cell),
             str(files.out)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**worker_env(cell), **environment, **run.node.as_environment(),
                 CELL_MARK: mark}, cwd=run.run_root,
            start_new_session=True, preexec_fn=_child_setup(cell.memory_limit_mb),
        )
        returncode, timed_out = _wait(process, cell.timeout_s, mark)
    wall_s = time.perf_counter() - start
    left = end_leftovers(mark)  # after the clock: ending them is not the cell's time
    exit = WorkerExit(returncode=returncode, timed_out=timed_out, started_at=files.started_at,
                      wall_s=wall_s, node_id=run.node_id, leftovers=tuple(left))
    return records_for(cell, exit, files, run.tool)


def _checked_env(extra_env: Mapping[str, str]) -> dict[str, str]:
    for name, value in extra_env.items():
        if not isinstance(name, str) or not isinstance(value, str) or not name or "=" in name:
            raise LaunchRefused(f"extra_env holds {name!r}: names and values are strings")
        if withheld(name):  # the worker environment's own rule (executors/environment.py)
            raise LaunchRefused(f"extra_env names a credential ({name}): a worker gets none")
        if name in OWN_NAMES:
            raise LaunchRefused(f"extra_env sets {name}, which the launch sets for the cell")
    return dict(extra_env)


def _wait(process: subprocess.Popen[bytes], timeout_s: float,
          mark: str) -> tuple[int | None, bool]:
    """The worker's exit status (None at the timeout) and whether the timeout ended it."""
    # A blocking wait returns the moment the worker exits; Popen.wait(timeout=...) polls
    # with sleeps of up to 50 ms, which cost every cell about 35 ms (bench/overhead.py).
    fired = threading.Event()

    def on_timeout() -> None:
        fired.set()
        kill_group(process)

    deadline = threading.Timer(timeout_s, on_timeout)
    deadline.daemon = True
    deadline.start()
    try:
        returncode: int | None = process.wait()
    except BaseException:  # Ctrl-C or a cancelled Ray task: take the worker down too
        kill_group(process)
        end_leftovers(mark)
        raise
    finally:
        deadline.cancel()
    if fired.is_set():
        return None, True
    return returncode, False


def worker_env(cell: Cell) -> dict[str, str]:
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


def kill_group(process: subprocess.Popen[bytes]) -> None:
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
