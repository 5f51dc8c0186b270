"""Ctrl-C and SIGTERM while the tool writes what a person reads.

A sweep stops on either at once while cells run (what ended is in the journal). While the
parquet and the report are written, a signal waits instead: they are written whole, both
of the same journal, and the interruption then counts as usual (exit 130, the resume
line). Writing them takes seconds; a report torn between two runs' states would mislead.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

DEFERRED = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signals_deferred() -> Iterator[list[int]]:
    """Within the block, SIGINT and SIGTERM are only noted (in the yielded list) and the
    block runs to its end; outside the main thread, where no signal lands, nothing changes."""
    pending: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return

    def note(signum: int, frame: object) -> None:
        pending.append(signum)

    previous = {sig: signal.signal(sig, note) for sig in DEFERRED}
    try:
        yield pending
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
