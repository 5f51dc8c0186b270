"""When each cell on a Ray node started, as the node tells the driver: the driver's own
hold on every cell's timeout.

A cell's executor enforces `timeout_s` where the cell runs. It cannot when its own Ray
worker process is frozen (SIGSTOP, a hung system call, a machine swapping): the cell's
worker then runs on past its timeout and the driver would wait for the node-wait grace. So
each Ray task reports the moment the cell's clock starts (as its worker is spawned, or its
container is up) to a small actor and waits until the actor has taken it; the driver reads
that board at every poll, and a cell still out `DRIVER_GRACE_S` past its timeout from then
is ended from the driver's side: its task is force-cancelled (which kills the Ray worker,
and the cell's worker dies with it) and it is recorded `timeout`.
"""

from __future__ import annotations

import time
from typing import Any

# Past timeout_s, what an executor may still need to stop a cell and report it (the
# process executor's 3 s kill grace, the docker executor's wait for a killed container).
DRIVER_GRACE_S = 30.0
READ_TIMEOUT_S = 5.0
START_REPORT_TIMEOUT_S = 5.0  # a task's wait for the board to take its start


class StartBoard:
    """The actor: the tokens of the cell attempts that have started, in order, and where
    each cell across nodes meets (run/ray_task.py: its rendezvous)."""

    def __init__(self) -> None:
        self._tokens: list[str] = []
        self._addresses: dict[str, str] = {}

    def started(self, token: str) -> None:
        self._tokens.append(token)

    def since(self, index: int) -> list[str]:
        return self._tokens[index:]

    def publish(self, token: str, address: str) -> None:
        """A cell across nodes: node 0's rendezvous (host:port) for its attempt `token`."""
        self._addresses[token] = address

    def address(self, token: str) -> str | None:
        return self._addresses.get(token)


class StartWatch:
    """The driver's side: when it first saw each attempt start (monotonic seconds)."""

    def __init__(self, ray: Any) -> None:
        self.ray = ray
        self.board = ray.remote(num_cpus=0, max_restarts=-1)(StartBoard).remote()
        self._read = 0
        self._seen: dict[str, float] = {}

    def poll(self) -> None:
        """Take the starts reported since the last poll; a board that does not answer
        (its node lost, a restart) is asked again at the next poll."""
        try:
            tokens = self.ray.get(self.board.since.remote(self._read),
                                  timeout=READ_TIMEOUT_S)
        except (self.ray.exceptions.RayError, TimeoutError):
            return
        now = time.monotonic()
        for token in tokens:
            self._seen.setdefault(token, now)
        self._read += len(tokens)

    def overdue(self, token: str, timeout_s: float) -> float | None:
        """Seconds since the attempt started, once that is past its timeout and the grace;
        else None (not started yet, or still within its time)."""
        started = self._seen.get(token)
        if started is None:
            return None
        running = time.monotonic() - started
        return running if running > timeout_s + DRIVER_GRACE_S else None
