"""The EC2 cells of a sweep, as one group beside the local ones (docs/ARCHITECTURE.md: EC2 model).

Entering the group brings the run's cluster up and submits the head driver; a thread then
follows the driver's log and hands each cell's records to the sweep (`record`), while the
sweep runs its local cells. Each cell record carries the seconds the cluster took to boot
and set up (`provision_s`): the start-up a job on that hardware pays (matrix advise).
Leaving the group, however it happens, stops the driver and tears the cluster down.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from orchestrator.plan.cells import Cell
from orchestrator.providers.aws.cluster import Clients, Launcher, ec2_cluster
from orchestrator.providers.aws.follower import JobFollower, stage_job
from orchestrator.providers.aws.head_driver import DriverInput
from orchestrator.results.records import Record, with_startup
from orchestrator.spec.model import MatrixSpec

HEAD_RUN_ROOT = "~/matrix-bench/runs"  # on the nodes: cell files and logs


@dataclass(frozen=True)
class Ec2Work:
    """What the head driver is given, less where it runs."""

    spec: MatrixSpec
    run_id: str
    run_dir: Path  # the local run directory (the cluster config goes there)
    driver_input: DriverInput


class Ec2Group:
    """Context manager: the cluster up and its cells followed in a thread until `wait()`."""

    def __init__(self, work: Ec2Work, launcher: Launcher, clients: Clients,
                 record: Callable[[Cell, list[Record]], None], say: Callable[[str], None],
                 poll_s: float = 2.0) -> None:
        self.work, self.launcher, self.clients = work, launcher, clients
        self.record, self.say = record, say
        self.follower = JobFollower(launcher.dashboard_url, warn=say, poll_s=poll_s)
        self._stack = contextlib.ExitStack()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._job: str | None = None
        self.provision_s: float | None = None

    def __enter__(self) -> Ec2Group:
        work = self.work
        booting = time.monotonic()
        self._stack.enter_context(ec2_cluster(work.spec, work.run_id, work.run_dir,
                                              self.launcher, self.clients, self.say))
        self.provision_s = time.monotonic() - booting
        try:
            with tempfile.TemporaryDirectory(prefix="matrix-bench-job-") as staging:
                self._job = self.follower.submit(stage_job(Path(staging), work.driver_input),
                                                 self.launcher.python)
            self.say(f"head driver: Ray job {self._job}, {len(work.driver_input.cells)} cells")
            self._thread = threading.Thread(target=self._follow, name="ec2-follower",
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
            for cell, records in self.follower.follow(self._job, self.work.driver_input.cells,
                                                      self._stop):
                self.record(cell, with_startup(records, provision_s=self.provision_s))
        except BaseException as exc:  # shown by wait(), in the sweep's thread
            self._error = exc

