"""Nothing a cell starts outlives it (issue 41, item 6).

A command or workload may start processes and exit 0, leaving them running (in its process
group, or in sessions of their own), loading the CPU or GPU while the next cells are timed.
Each process worker carries a mark in its environment (`CELL_MARK`, unique per attempt),
which every process it starts inherits whatever group or session it moves to. When the
cell ends, however it ends, the executor finds every live process with the cell's mark
(Linux: /proc/PID/environ, readable for the user's own processes), ends them (SIGTERM,
then SIGKILL after a grace), and the cell's record says what it left behind. A container's
processes end with their container; on Slurm, Slurm's own containment stands behind this.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from pathlib import Path

CELL_MARK = "MATRIX_BENCH_CELL_MARK"
# A helper that ends on its own once its parent has gone (multiprocessing's resource
# tracker waits for its pipe to close) is given this long before it counts as left behind
LINGER_S = 1.0
GRACE_S = 2.0
SHOWN = 5  # processes named in the record


def new_mark() -> str:
    return uuid.uuid4().hex


def marked(mark: str, proc: Path = Path("/proc")) -> dict[int, str]:
    """pid -> command line of every live process whose environment holds `mark`."""
    wanted = f"{CELL_MARK}={mark}".encode()
    found = {}
    try:
        entries = list(proc.iterdir())
    except OSError:  # no /proc (not Linux): nothing can be found, nothing is claimed
        return {}
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            if wanted not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
            if stat.rpartition(")")[2].split()[0] == "Z":  # a zombie runs nothing
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").strip()
        except OSError:  # not ours, or gone meanwhile
            continue
        found[int(entry.name)] = command.decode("utf-8", "replace")[:120]
    return found


def end_leftovers(mark: str) -> list[str]:
    """End every live process of the cell marked `mark`; what was found, for the record
    ("pid: command line"). Processes that end on their own within LINGER_S do not count."""
    found = marked(mark)
    deadline = time.monotonic() + LINGER_S
    while found and time.monotonic() < deadline:
        time.sleep(0.05)
        found = marked(mark)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in marked(mark) if sig == signal.SIGKILL else found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        if sig == signal.SIGTERM and found:
            deadline = time.monotonic() + GRACE_S
            while marked(mark) and time.monotonic() < deadline:
                time.sleep(0.05)
    return [f"{pid}: {command}" for pid, command in sorted(found.items())]


def leftover_reason(found: list[str]) -> str:
    """The cell record's note on what it left running."""
    named = "; ".join(found[:SHOWN]) + (f"; and {len(found) - SHOWN} more"
                                        if len(found) > SHOWN else "")
    return (f"left_processes: {len(found)} process(es) it started were still running when "
            f"it ended, and were ended: {named}")
