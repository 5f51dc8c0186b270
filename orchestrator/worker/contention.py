"""Did the cell have its CPUs to itself? The contention probe, one reading per epoch.

A time measured while another process held one of the cell's cores is that process's as
much as the configuration's: torch's OpenMP threads wait on each other, so one thread whose
core is taken stalls them all (docs/PERFORMANCE.md: a 43 s run took over 350 s beside two
busy loops). The probe reads two counters of the kernel's at the start and end of each epoch
(Linux; elsewhere it reports nothing):

- the CPU time of the processes of the cell's session (the worker, its ranks, its data
  loaders, a command's script run through the client; `/proc/<pid>/stat`, with the children
  they reaped), and their threads' time waiting for a CPU on a run queue
  (`/proc/<pid>/task/<tid>/schedstat`);
- the busy time of the CPUs the cell may run on (`/proc/stat`; a hypervisor's steal counts
  as busy: another guest held the core).

It reports, as means over the epoch, `cell_cpu_cores` (how many of the cell's threads ran),
`cpu_wait_cores` (how many waited for a CPU) and `other_cpu_cores` (how many cores of the
cell's CPUs everything else used). The executor flags the cell `contended` when the last two
say so together (executors/outcome.py): its threads waited, and others were there. Waiting
is counted in threads, not as a share of the cell's time: one thread of an OpenMP team that
waits stalls the rest, which spin meanwhile, so a share would shrink as the team grows. A
thread that ended during the epoch takes its wait with it (its CPU time stays with its
process, or with the cell's process that reaped it), so the wait is if anything too low.

Stdlib only, read twice an epoch: about a millisecond on a host of a hundred processes
(bench/contention_probe.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.worker.measure import Window

# /proc/stat's per-CPU columns that are work: user nice system idle iowait irq softirq steal
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)


@dataclass(frozen=True)
class Counters:
    """One reading: seconds since boot, as the kernel counts them."""

    at: float  # monotonic clock
    cell_run_s: float  # the cell's threads, running
    cell_wait_s: float  # the cell's threads, runnable and waiting for a CPU
    cpus_busy_s: float  # the cell's CPUs, busy with anything


def read_counters(cpus: frozenset[int], session: int) -> Counters | None:
    """The counters now, or None where the kernel does not keep them (not Linux, no
    schedstat)."""
    busy = _cpus_busy_s(cpus)
    threads = _session_threads_s(session)
    if busy is None or threads is None:
        return None
    return Counters(time.monotonic(), threads[0], threads[1], busy)


def contention(before: Counters, after: Counters, cpus: int) -> dict[str, float]:
    """The epoch's figures from two readings; {} where no time passed between them."""
    wall = after.at - before.at
    run = max(after.cell_run_s - before.cell_run_s, 0.0)
    wait = max(after.cell_wait_s - before.cell_wait_s, 0.0)
    busy = max(after.cpus_busy_s - before.cpus_busy_s, 0.0)
    if wall <= 0:
        return {}
    # the counters are read one after another, in ticks: clamp what rounding overshoots
    return {"cell_cpu_cores": min(run / wall, float(cpus)),
            "cpu_wait_cores": wait / wall,
            "other_cpu_cores": min(max(busy - run, 0.0) / wall, float(cpus))}


class ContentionProbe:
    """Reset at the start of an epoch, read at its end (measure.MemoryProbe's protocol):
    the epoch's `cell_cpu_cores`, `cpu_wait_cores` and `other_cpu_cores`, over all of it."""

    def __init__(self) -> None:
        self.cpus = _allowed_cpus()
        self.session = os.getsid(0) if hasattr(os, "getsid") else -1  # -1: no session here
        self._start: Counters | None = None

    def reset(self) -> None:
        self._start = read_counters(self.cpus, self.session)

    def read(self, timed_windows: Sequence[Window] = ()) -> dict[str, float]:
        if self._start is None:
            return {}
        now = read_counters(self.cpus, self.session)
        return {} if now is None else contention(self._start, now, len(self.cpus))


def _allowed_cpus() -> frozenset[int]:
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return frozenset(range(os.cpu_count() or 1))


def _cpus_busy_s(cpus: frozenset[int]) -> float | None:
    """Seconds the CPUs in `cpus` have been busy since boot (`/proc/stat`)."""
    ticks = 0
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            for line in handle:
                name, _, rest = line.partition(" ")
                if not name.startswith("cpu"):
                    break  # the cpu lines come first
                if name[3:].isdigit() and int(name[3:]) in cpus:
                    columns = rest.split()
                    ticks += sum(int(columns[i]) for i in _BUSY_COLUMNS if i < len(columns))
    except (OSError, ValueError):
        return None
    return ticks / os.sysconf("SC_CLK_TCK")


def _session_threads_s(session: int) -> tuple[float, float] | None:
    """(running, waiting) seconds of the processes in `session`: running from their CPU
    time (`/proc/<pid>/stat`: their threads, the ended ones too, and the children they
    reaped), waiting from each live thread's run-queue wait (`schedstat`)."""
    ticks = 0
    wait_ns = 0
    waits_read = False
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()  # past the command's name
            if int(fields[3]) != session:  # field 6 of proc(5), the session id
                continue
            ticks += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as handle:
                    wait_ns += int(handle.read().split()[1])
                waits_read = True
        except (OSError, ValueError, IndexError):  # ended meanwhile, or not ours to read
            continue
    return (ticks / os.sysconf("SC_CLK_TCK"), wait_ns / 1e9) if waits_read else None
