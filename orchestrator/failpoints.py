"""Fail points: named places where the fault tests kill this process with a real SIGKILL.

`MATRIX_BENCH_KILL_AT=journal-append:2` kills the process the second time it reaches the
point `journal-append`; `report:1:SIGTERM` sends it that signal instead, once. Unset
(always, outside the tests) a fail point is one environment lookup. This is how the suite
stops `matrix run` at moments no timer can hit reliably: half-way through a journal write,
or while the report renders (docs/RELIABILITY.md).
"""

from __future__ import annotations

import os
import signal
from collections import Counter

ENV = "MATRIX_BENCH_KILL_AT"
POINTS = ("ray-start", "journal-append", "report")  # where `reached` is called
_reached: Counter[str] = Counter()


def reached(point: str) -> None:
    """SIGKILL this process if the environment names `point` and its count is due."""
    armed = os.environ.get(ENV)
    if not armed:
        return
    name, _, rest = armed.partition(":")
    if name != point:
        return
    nth, _, signal_name = rest.partition(":")
    _reached[point] += 1
    if _reached[point] == int(nth or 1) or (_reached[point] > int(nth or 1)
                                            and not signal_name):
        os.kill(os.getpid(), signal.Signals[signal_name or "SIGKILL"])
