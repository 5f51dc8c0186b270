"""The user's side of a cluster sweep: submit the head driver as a Ray job and follow it.

The job carries the tool's code (its working_dir: `orchestrator/`, `workloads/` and the
driver's input). Following reads the job's whole log on every poll and takes each numbered
records line once, so a lost connection costs nothing: the next successful poll catches up.
When the driver says it is done, or the job ends without saying so (its cells then become
`node_lost`), or the head stays unreachable past `reconnect_timeout_s`, following ends.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from orchestrator.providers.ray_head.driver import DONE_LINE, RECORDS_LINE, DriverInput
from orchestrator.registry.cell_run import Cell
from orchestrator.results.records import Record, parse_record
from orchestrator.run.dispatch import lost_node_records

PROJECT_ROOT = Path(__file__).resolve().parents[3]
CARRIED_PACKAGES = ("orchestrator", "workloads")
INPUT_FILE = "driver_input.json"


def stage_job(directory: Path, driver_input: DriverInput) -> Path:
    """The job's working_dir: the tool's packages and the driver's input."""
    for package in CARRIED_PACKAGES:
        shutil.copytree(PROJECT_ROOT / package, directory / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (directory / INPUT_FILE).write_text(driver_input.model_dump_json(), encoding="utf-8")
    return directory


class JobFollower:
    """Submits and follows one head-driver job through the cluster's dashboard.

    `dashboard` returns the dashboard's URL as reachable from here; it is called again
    after a failed poll, so that it may reopen the way there (an SSH tunnel)."""

    def __init__(self, dashboard: Callable[[], str], warn: Callable[[str], None],
                 poll_s: float = 2.0, reconnect_timeout_s: float = 600.0,
                 forwarded_env: tuple[str, ...] = ()) -> None:
        self.dashboard, self.warn = dashboard, warn
        self.forwarded_env = forwarded_env  # passed on when set here; never a credential
        self.poll_s, self.reconnect_timeout_s = poll_s, reconnect_timeout_s
        self._client: Any = None

    def submit(self, working_dir: Path, python: str) -> str:
        import os

        env = {name: os.environ[name] for name in self.forwarded_env if name in os.environ}
        entrypoint = shlex.join([python, "-m", "orchestrator.providers.ray_head.driver",
                                 INPUT_FILE])
        return str(self._connect().submit_job(
            entrypoint=entrypoint,
            runtime_env={"working_dir": str(working_dir), "env_vars": env}))

    def follow(self, job_id: str, cells: list[Cell], stop: threading.Event | None = None
               ) -> Iterator[tuple[Cell, list[Record]]]:
        """Yield each cell's records once, as the driver prints them, until all are in or
        `stop` is set."""
        stop = stop or threading.Event()
        by_id = {cell.cell_id: cell for cell in cells}
        taken: set[int] = set()
        lost_since: float | None = None
        while not stop.is_set():
            try:
                client = self._connect()
                log = client.get_job_logs(job_id)
                status = client.get_job_status(job_id)
            except (OSError, RuntimeError) as exc:  # requests' errors are OSErrors
                self._client = None
                now = time.monotonic()
                if lost_since is None:
                    lost_since = now
                    self.warn(f"lost the connection to the cluster's head ({_first_line(exc)});"
                              " retrying, the sweep goes on there")
                if now - lost_since > self.reconnect_timeout_s:
                    reason = (f"the head was unreachable for {self.reconnect_timeout_s:g} s; "
                              "the cluster tears itself down after the sweep")
                    yield from self._unreported(by_id, reason)
                    return
                stop.wait(self.poll_s)
                continue
            if lost_since is not None:
                self.warn("reconnected to the cluster's head; catching up")
                lost_since = None
            done = False
            for line in log.splitlines():
                if line.startswith(RECORDS_LINE):
                    batch = json.loads(line[len(RECORDS_LINE):])
                    if batch["seq"] not in taken and batch["cell_id"] in by_id:
                        taken.add(batch["seq"])
                        cell = by_id.pop(batch["cell_id"])
                        yield cell, [parse_record(raw) for raw in batch["records"]]
                done = done or line == DONE_LINE
            if done or status.is_terminal():
                if by_id:
                    tail = " | ".join(log.strip().splitlines()[-3:])
                    yield from self._unreported(
                        by_id, f"the head's driver ended ({status.value}) before the cell "
                               f"reported: {tail[-300:]}")
                return
            stop.wait(self.poll_s)

    def stop(self, job_id: str) -> None:
        """Stop the driver (it cancels its cells); quietly, the cluster goes down next."""
        with contextlib.suppress(OSError, RuntimeError):
            self._connect().stop_job(job_id)

    def _connect(self) -> Any:
        if self._client is None:
            from ray.job_submission import JobSubmissionClient

            self._client = JobSubmissionClient(self.dashboard())
        return self._client

    @staticmethod
    def _unreported(by_id: dict[str, Cell], reason: str
                    ) -> Iterator[tuple[Cell, list[Record]]]:
        for cell in list(by_id.values()):
            yield cell, lost_node_records(cell, reason)
        by_id.clear()


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]
