"""A launched Ray cluster's cells, as one group beside the local ones (docs/ARCHITECTURE.md:
EC2 model): what every provider that brings a Ray cluster up shares (aws today; a GCP or a
KubeRay provider tomorrow: docs/kubernetes.md).

Entering the group brings the provider's cluster up (its `cluster` context manager) and
submits the head driver; a thread then follows the driver's log and hands each cell's
records to the sweep (`record`), while the sweep runs its local cells. Each cell record
carries the seconds the cluster took to boot and set up (`provision_s`): the start-up a job
on that hardware pays (matrix advise). Leaving the group, however it happens, stops the
driver and leaves the cluster's block, which tears it down.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from orchestrator.providers.ray_head.driver import DriverInput
from orchestrator.providers.ray_head.follower import JobFollower, stage_job
from orchestrator.registry.cell_run import Cell
from orchestrator.results.records import Record, with_startup


class Head(Protocol):
    """How to reach the cluster's head once it is up."""

    python: str  # the interpreter that runs the head driver on the head

    def dashboard_url(self) -> str: ...


class RayHeadGroup:
    """Context manager: the cluster up and its cells followed in a thread until `wait()`."""

    def __init__(self, cluster: Callable[[], AbstractContextManager[Any]], head: Head,
                 driver_input: DriverInput, record: Callable[[Cell, list[Record]], None],
                 say: Callable[[str], None], poll_s: float = 2.0,
                 forwarded_env: tuple[str, ...] = ()) -> None:
        self.cluster, self.head, self.driver_input = cluster, head, driver_input
        self.record, self.say = record, say
        self.follower = JobFollower(head.dashboard_url, warn=say, poll_s=poll_s,
                                    forwarded_env=forwarded_env)
        self._stack = contextlib.ExitStack()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._job: str | None = None
        self.provision_s: float | None = None

    def __enter__(self) -> RayHeadGroup:
        booting = time.monotonic()
        self._stack.enter_context(self.cluster())
        self.provision_s = time.monotonic() - booting
        try:
            with tempfile.TemporaryDirectory(prefix="matrix-bench-job-") as staging:
                self._job = self.follower.submit(stage_job(Path(staging), self.driver_input),
                                                 self.head.python)
            self.say(f"head driver: Ray job {self._job}, {len(self.driver_input.cells)} cells")
            self._thread = threading.Thread(target=self._follow, name="ray-head-follower",
                                            daemon=True)
            self._thread.start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def wait(self) -> None:
        """Until every cell of the group has its records (Ctrl-C interrupts)."""
        assert self._thread is not None
        while self._thread.is_alive():
            self._thread.join(timeout=0.5)
        if self._error is not None:
            raise self._error

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        try:
            if self._thread is not None:
                self._thread.join(timeout=self.follower.poll_s + 30)
            if self._job is not None:
                self.follower.stop(self._job)
        finally:
            self._stack.close()

    def _follow(self) -> None:
        assert self._job is not None
        try:
            for cell, records in self.follower.follow(self._job, self.driver_input.cells,
                                                      self._stop):
                self.record(cell, with_startup(records, provision_s=self.provision_s))
        except BaseException as exc:  # shown by wait(), in the sweep's thread
            self._error = exc
